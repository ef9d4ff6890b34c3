"""What NX-OS accepts for every value the nxos_roce_qos role renders into a switch config.

`nxos_roce_qos_validate(values)` takes the role's variables (a dict, name -> value) and returns a list
of `{"var", "msg"}` problems, empty when every value is safe to render. It runs before any connection
(tasks/assert.yml) and from the inventory preflight: one place for the rules. It reads the values it is
given and knows no defaults (those live in roles/nxos_roce_qos/defaults/main.yml only): a variable it
needs and does not get is a problem naming it.

Why these rules: a value is typed into an interactive NX-OS CLI session line by line, so a newline or
carriage return ends the command and starts another (config injection), `;` chains commands in the
NX-OS CLI, `?` asks for help mid-line and `|` starts an output filter; control characters are
terminal edits (Ctrl-Z leaves config mode). Ranges are NX-OS's own (Cisco Nexus 9000 NX-OS QoS
Configuration Guide, 10.x: DSCP 0-63, CoS/qos-group 0-7, network-qos MTU 1500-9216, interface MTU
576-9216 even; Interfaces Configuration Guide: description up to 254 characters; class-map and
policy-map names up to 40 alphanumeric characters, case-sensitive, `_` `-` `.` allowed). PFC headroom:
the same QoS guide, "Configuring Priority Flow Control", guidelines: the pause buffer thresholds are
mandatory for cables longer than 100 m.

The ranges host and switch share (DSCP, CoS/qos-group, bandwidth share) and the QoS profiles come from
host/qos_values.py, the queue schemes (which qos-groups a 4- or 8-queue Nexus has) from switch/queues.py:
this module writes neither, so the messages below spell them from there.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils import numbers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import (
    COS_RANGE,
    DSCP_RANGE,
    PERCENT_RANGE,
    PROFILES,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.queues import QUEUE_SCHEMES, queue_scheme

DOCUMENTATION = """
name: nxos_roce_qos_validate
short_description: Validate every value nxos_roce_qos renders into an NX-OS config
description: Returns a list of {var, msg} problems (empty when all values are acceptable).
"""

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,39}")
# EthernetM/P or EthernetM/P/S (breakout), spelled as `show running-config` prints it.
INTERFACE_RE = re.compile(r"Ethernet([1-9][0-9]?)/([1-9][0-9]{0,2})(?:/([1-8]))?")
CHECKPOINT_RE = re.compile(r"bootflash:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
DESCRIPTION_MAX = 254
# Characters the interactive CLI interprets inside a line.
CLI_SPECIAL = {";": "chains a second command", "?": "asks the CLI for help", "|": "starts an output filter"}
# The share of a class the role renders with traffic of its own (RoCE, fabric TCP): some of the link, never none.
CLASS_SHARE_RANGE = (PERCENT_RANGE[0] + 1, PERCENT_RANGE[1])
# Values of the interface `speed` command on Nexus 9000 (Mb/s).
SPEEDS = (1000, 10000, 25000, 40000, 50000, 100000, 200000, 400000, 800000)
NAME_VARS = (
    "nxos_roce_qos_roce_class",
    "nxos_roce_qos_cnp_class",
    "nxos_roce_qos_tcp_class",
    "nxos_roce_qos_marking_policy",
    "nxos_roce_qos_network_policy",
    "nxos_roce_qos_queuing_policy",
)
CLASS_VARS = NAME_VARS[:3]
# Beyond 100 m the pause buffer is mandatory (Cisco, above); 100 km is beyond any single Ethernet optic.
CABLE_NO_HEADROOM_M = 100
CABLE_MAX_M = 100000
# A sanity bound, not a Cisco range (NX-OS rejects what its ASIC cannot carve): 16 MiB is more headroom
# than any single port of a Cloud Scale or Silicon One switch has.
PAUSE_BUFFER_MAX = 16 * 1024 * 1024
PAUSE_BUFFER_KEYS = ("buffer_size", "pause_threshold", "resume_threshold")
# Variables whose legitimate value is null: absent means null (the inventory contract drops None values).
NULLABLE = ("nxos_roce_qos_default_qos_group", "nxos_roce_qos_pfc_pause_buffer", "nxos_roce_qos_release_interfaces")
# Every other variable rendered into the config: the validator needs each of them.
REQUIRED = (
    "nxos_roce_qos_profile",
    "nxos_roce_qos_roce_dscp",
    "nxos_roce_qos_cnp_dscp",
    "nxos_roce_qos_nodrop_cos",
    "nxos_roce_qos_cnp_qos_group",
    "nxos_roce_qos_queue_scheme",
    "nxos_roce_qos_mtu",
    "nxos_roce_qos_roce_bandwidth_percent",
    "nxos_roce_qos_default_bandwidth_percent",
    "nxos_roce_qos_tcp_dscp",
    "nxos_roce_qos_tcp_qos_group",
    "nxos_roce_qos_tcp_bandwidth_percent",
    "nxos_roce_qos_tcp_lossless",
    "nxos_roce_qos_ecn_min_threshold_kbytes",
    "nxos_roce_qos_ecn_max_threshold_kbytes",
    "nxos_roce_qos_ecn_drop_probability",
    "nxos_roce_qos_ecn_weight",
    "nxos_roce_qos_ecn_thresholds_by_speed",
    "nxos_roce_qos_port_speed",
    *NAME_VARS,
    "nxos_roce_qos_checkpoint_file",
    "nxos_roce_qos_interfaces",
    "nxos_roce_qos_class_match",
    "nxos_roce_qos_pfc_mode",
    "nxos_roce_qos_pfc_cable_length_m",
)
# Every variable the role renders into the device config: what the inventory contract reads for each switch.
RENDERED = REQUIRED + NULLABLE

MISSING_HINT = "the role's defaults/main.yml sets it, from the shared cluster_* values where it has one"
# Defaults read from another variable: where to look when they come out empty.
MISSING_HINTS = {
    var: "its default is the nxos_roce_qos_ecn_thresholds_by_speed row of nxos_roce_qos_port_speed: give that "
    "speed a row, or set it"
    for var in ("nxos_roce_qos_ecn_min_threshold_kbytes", "nxos_roce_qos_ecn_max_threshold_kbytes")
}


def span(bounds):
    """(low, high) as the messages print it: "0-63"."""
    return f"{bounds[0]}-{bounds[1]}"


def as_int(value, low, high, even=False):
    """The value as an int if it is an integer (or a digit string, numbers.as_int) in [low, high], else None."""
    number = numbers.as_int(value)
    if number is None or not low <= number <= high or (even and number % 2):
        return None
    return number


def as_bool(value):
    """True/False for a boolean (or the strings Ansible's `bool` filter reads as one), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "false", "no"):
        return value.lower() in ("true", "yes")
    return None


def text_problem(value, max_len=DESCRIPTION_MAX):
    """Why a free-text value (a description) cannot be typed into the CLI safely, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if len(value) > max_len:
        return f"is {len(value)} characters, NX-OS accepts at most {max_len}"
    for char in value:
        if char in "\r\n":
            return "contains a line break (it would end the command and inject the rest as config)"
        if not 0x20 <= ord(char) <= 0x7E:
            return f"contains the non-printable or non-ASCII character {char!r}"
        if char in CLI_SPECIAL:
            return f"contains {char!r}, which {CLI_SPECIAL[char]} in the NX-OS CLI"
    if value != value.strip():
        return "has leading or trailing spaces (NX-OS strips them, so the config would never match)"
    if "  " in value:
        # Whether NX-OS keeps or squeezes a run of spaces is not documented: with single spaces the
        # running config matches the intent either way, so a second run reports no change.
        return (
            "contains a run of spaces (write single spaces: the switch may store them squeezed, "
            "and then no run would converge)"
        )
    return None


def name_problem(value):
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        return f"must be 1-40 characters [A-Za-z0-9_.-] starting with a letter, got {value!r}"
    if value.lower() == "class-default" or value.lower().startswith("c-"):
        return f"{value!r} is reserved by NX-OS (class-default and system classes c-...)"
    return None


PEER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")


def interface_problem(item, index, mtu_default, speeds=None):
    """Problems of one nxos_roce_qos_interfaces item (a dict with name, mtu, description, speed);
    `speeds` are the speeds the ECN threshold table has rows for."""
    where = f"item {index}"
    if not isinstance(item, dict):
        return [f"{where} must be a dict with a name, got {item!r}"]
    problems = []
    name = item.get("name")
    if not isinstance(name, str) or not INTERFACE_RE.fullmatch(name):
        problems.append(
            f"{where}: name must be spelled as NX-OS prints it (Ethernet1/1 or Ethernet1/1/2), got {name!r}"
        )
    else:
        where = name
    unknown = sorted(set(item) - {"name", "mtu", "description", "speed", "peer", "peer_port"})
    if unknown:
        problems.append(f"{where}: unknown keys {unknown}")
    # The far end of the port's cable (module_utils/ladder/cabling.py): an inventory name and an interface name, never
    # rendered, but read back from LLDP and printed: one word each.
    for far in ("peer", "peer_port"):
        if item.get(far) not in (None, "") and not (isinstance(item[far], str) and PEER_RE.fullmatch(item[far])):
            problems.append(f"{where}: {far} must be one word of letters, digits and ._:/@-, got {item[far]!r}")
    if as_int(item.get("mtu", mtu_default), 576, 9216, even=True) is None:
        problems.append(f"{where}: mtu must be an even number 576-9216, got {item.get('mtu', mtu_default)!r}")
    if item.get("description") not in (None, ""):
        why = text_problem(item["description"])
        if why:
            problems.append(f"{where}: description {why}")
    if item.get("speed") not in (None, ""):
        speed = as_int(item["speed"], 1000, 800000)
        if speed not in SPEEDS:
            problems.append(f"{where}: speed must be one of {list(SPEEDS)} (Mb/s), got {item['speed']!r}")
        elif speeds and speed not in speeds:
            problems.append(
                f"{where}: speed {speed} has no row in nxos_roce_qos_ecn_thresholds_by_speed ({sorted(speeds)})"
            )
    return problems


def threshold_table_problems(table):
    """Problems of nxos_roce_qos_ecn_thresholds_by_speed ({speed: {min_kbytes, max_kbytes, source}}) and the
    speeds it has rows for. `source` says where the row's numbers come from; it is rendered into a
    comment of the config, so it is checked like a description."""
    if not isinstance(table, dict) or not table:
        return [f"must be a non-empty dict speed (Mb/s) -> {{min_kbytes, max_kbytes, source}}, got {table!r}"], set()
    problems, speeds = [], set()
    for key, row in table.items():
        speed = as_int(key, 1000, 800000) if not isinstance(key, str) or key.isdigit() else None
        if speed not in SPEEDS:
            problems.append(f"speed {key!r} must be one of {list(SPEEDS)} (Mb/s)")
            continue
        speeds.add(speed)
        if not isinstance(row, dict) or set(row) != {"min_kbytes", "max_kbytes", "source"}:
            problems.append(f"{speed}: must be {{min_kbytes, max_kbytes, source}}, got {row!r}")
            continue
        low, high = as_int(row["min_kbytes"], 1, 64000), as_int(row["max_kbytes"], 1, 64000)
        if low is None or high is None or low > high:
            problems.append(f"{speed}: min_kbytes and max_kbytes must be 1-64000 with min <= max, got {row!r}")
        why = "is empty" if row["source"] in (None, "") else text_problem(row["source"], max_len=200)
        if why:
            problems.append(f"{speed}: source (where the numbers come from; say so when none exists) {why}")
    return problems, speeds


def pause_buffer_problem(buffer, cable_m):
    """Why nxos_roce_qos_pfc_pause_buffer cannot be rendered for a cable of `cable_m` meters, or None."""
    if buffer in (None, ""):
        if cable_m is not None and cable_m > CABLE_NO_HEADROOM_M:
            return (
                f"must be set for cables longer than {CABLE_NO_HEADROOM_M} m (nxos_roce_qos_pfc_cable_length_m "
                f"{cable_m}): Cisco's Nexus 9000 QoS guide makes the pause buffer mandatory there"
            )
        return None
    if not isinstance(buffer, dict) or set(buffer) != set(PAUSE_BUFFER_KEYS):
        return f"must be null or {{{', '.join(PAUSE_BUFFER_KEYS)}}} in bytes, got {buffer!r}"
    size, pause, resume = (as_int(buffer[k], 1, PAUSE_BUFFER_MAX) for k in PAUSE_BUFFER_KEYS)
    if None in (size, pause, resume) or not resume <= pause <= size:
        return (
            f"must be bytes 1-{PAUSE_BUFFER_MAX} with resume_threshold <= pause_threshold <= buffer_size, "
            f"got {buffer!r}"
        )
    return None


def nxos_roce_qos_validate(values):
    """All problems of the role's variables, as [{"var": name, "msg": text}]."""
    problems = []

    def bad(var, msg):
        problems.append({"var": var, "msg": f"{var}: {msg}"})

    missing = [var for var in REQUIRED if values.get(var) is None]
    for var in missing:
        bad(var, f"is not set ({MISSING_HINTS.get(var, MISSING_HINT)})")
    if missing:
        return problems  # every rule below reads these values

    profile = values["nxos_roce_qos_profile"]
    if profile not in PROFILES:
        bad("nxos_roce_qos_profile", f"must be one of {list(PROFILES)}, got {profile!r}")

    scheme = values["nxos_roce_qos_queue_scheme"]
    if isinstance(scheme, str) and scheme in QUEUE_SCHEMES:
        queues = queue_scheme(scheme)["queues"]
    else:
        bad("nxos_roce_qos_queue_scheme", f"must be one of {sorted(QUEUE_SCHEMES)}, got {scheme!r}")
        queues = queue_scheme("8q")["queues"]  # the qos-groups below are still checked, against the larger scheme

    dscp = values["nxos_roce_qos_roce_dscp"]
    dscp_ints = [as_int(v, *DSCP_RANGE) for v in dscp] if isinstance(dscp, list) else []
    if not dscp_ints or None in dscp_ints:
        bad("nxos_roce_qos_roce_dscp", f"must be a non-empty list of DSCP values {span(DSCP_RANGE)}, got {dscp!r}")
    cnp = as_int(values["nxos_roce_qos_cnp_dscp"], *DSCP_RANGE)
    if cnp is None or cnp in dscp_ints:
        bad(
            "nxos_roce_qos_cnp_dscp",
            f"must be a DSCP value {span(DSCP_RANGE)} not in nxos_roce_qos_roce_dscp, "
            f"got {values['nxos_roce_qos_cnp_dscp']!r}",
        )
    nodrop = as_int(values["nxos_roce_qos_nodrop_cos"], *COS_RANGE)
    cnp_group = as_int(values["nxos_roce_qos_cnp_qos_group"], *COS_RANGE)
    for var, got in (("nxos_roce_qos_nodrop_cos", nodrop), ("nxos_roce_qos_cnp_qos_group", cnp_group)):
        if got is None or got not in queues:
            bad(var, f"must be a queue of the {scheme} scheme ({queues}), got {values[var]!r}")
    if nodrop is not None and nodrop == cnp_group:
        bad("nxos_roce_qos_cnp_qos_group", f"must differ from nxos_roce_qos_nodrop_cos ({nodrop})")

    # Fabric TCP: its own lossy queue, unless it shares the lossless class (then nothing is rendered).
    tcp_lossless = as_bool(values["nxos_roce_qos_tcp_lossless"])
    if tcp_lossless is None:
        bad("nxos_roce_qos_tcp_lossless", f"must be a boolean, got {values['nxos_roce_qos_tcp_lossless']!r}")
    tcp_rendered = tcp_lossless is False
    if tcp_rendered:
        tcp_dscp = as_int(values["nxos_roce_qos_tcp_dscp"], *DSCP_RANGE)
        if tcp_dscp is None or tcp_dscp in dscp_ints or tcp_dscp == cnp:
            bad(
                "nxos_roce_qos_tcp_dscp",
                f"must be a DSCP value {span(DSCP_RANGE)} other than the RoCE and CNP values (fabric TCP needs its "
                f"own class), got {values['nxos_roce_qos_tcp_dscp']!r}",
            )
        tcp_group = as_int(values["nxos_roce_qos_tcp_qos_group"], *COS_RANGE)
        if tcp_group is None or tcp_group not in queues or tcp_group in (nodrop, cnp_group):
            bad(
                "nxos_roce_qos_tcp_qos_group",
                f"must be a queue of the {scheme} scheme ({queues}) other than the no-drop ({nodrop}) and CNP "
                f"({cnp_group}) queues: fabric TCP is lossy, got {values['nxos_roce_qos_tcp_qos_group']!r}",
            )

    mtu = values["nxos_roce_qos_mtu"]
    if as_int(mtu, 1500, 9216, even=True) is None:
        bad("nxos_roce_qos_mtu", f"must be an even number 1500-9216 (network-qos class range), got {mtu!r}")

    roce_bw = as_int(values["nxos_roce_qos_roce_bandwidth_percent"], *CLASS_SHARE_RANGE)
    default_bw = as_int(values["nxos_roce_qos_default_bandwidth_percent"], *PERCENT_RANGE)
    tcp_bw = as_int(values["nxos_roce_qos_tcp_bandwidth_percent"], *CLASS_SHARE_RANGE) if tcp_rendered else 0
    if roce_bw is None or default_bw is None or tcp_bw is None or roce_bw + default_bw + tcp_bw > PERCENT_RANGE[1]:
        shares = [("roce", CLASS_SHARE_RANGE), ("tcp", CLASS_SHARE_RANGE), ("default", PERCENT_RANGE)]
        shares = [(f"nxos_roce_qos_{name}_bandwidth_percent", span(bounds)) for name, bounds in shares]
        shares = [(var, text) for var, text in shares if tcp_rendered or "_tcp_" not in var]
        bad(
            shares[0][0],
            f"({shares[0][1]}) + "
            + " + ".join(f"{var} ({text})" for var, text in shares[1:])
            + f" must be at most {PERCENT_RANGE[1]}, got "
            + " + ".join(repr(values[var]) for var, _ in shares),
        )
    ecn_min = as_int(values["nxos_roce_qos_ecn_min_threshold_kbytes"], 1, 64000)
    ecn_max = as_int(values["nxos_roce_qos_ecn_max_threshold_kbytes"], 1, 64000)
    if ecn_min is None or ecn_max is None or ecn_min > ecn_max:
        bad(
            "nxos_roce_qos_ecn_min_threshold_kbytes",
            "and nxos_roce_qos_ecn_max_threshold_kbytes must be 1-64000 with min <= max",
        )
    if as_int(values["nxos_roce_qos_ecn_drop_probability"], 0, 100) is None:
        bad("nxos_roce_qos_ecn_drop_probability", "must be 0-100")
    if as_int(values["nxos_roce_qos_ecn_weight"], 0, 15) is None:
        bad("nxos_roce_qos_ecn_weight", "must be 0-15")

    for var in NAME_VARS:
        why = name_problem(values[var])
        if why:
            bad(var, why)
    owner: dict = {}  # class-map name -> the variable that names it
    for var in CLASS_VARS if tcp_rendered else CLASS_VARS[:2]:
        if not isinstance(values[var], str):
            continue  # reported by the name rule above
        if values[var] in owner:
            bad(var, f"must differ from {owner[values[var]]} ({values[var]!r}): each class-map classifies one traffic")
        owner.setdefault(values[var], var)

    for var, choices in (
        ("nxos_roce_qos_class_match", ("match-any", "match-all")),
        ("nxos_roce_qos_pfc_mode", ("on", "auto")),
    ):
        if values[var] not in choices:
            bad(var, f"must be one of {list(choices)}, got {values[var]!r}")
    default_group = values.get("nxos_roce_qos_default_qos_group")
    if default_group not in (None, "") and as_int(default_group, *COS_RANGE) is None:
        bad("nxos_roce_qos_default_qos_group", f"must be a qos-group {span(COS_RANGE)} or null, got {default_group!r}")

    cable = as_int(values["nxos_roce_qos_pfc_cable_length_m"], 1, CABLE_MAX_M)
    if cable is None:
        bad(
            "nxos_roce_qos_pfc_cable_length_m",
            f"must be the longest RoCE cable in meters (1-{CABLE_MAX_M}), "
            f"got {values['nxos_roce_qos_pfc_cable_length_m']!r}",
        )
    why = pause_buffer_problem(values.get("nxos_roce_qos_pfc_pause_buffer"), cable)
    if why:
        bad("nxos_roce_qos_pfc_pause_buffer", why)

    checkpoint = values["nxos_roce_qos_checkpoint_file"]
    if not isinstance(checkpoint, str) or not CHECKPOINT_RE.fullmatch(checkpoint):
        bad("nxos_roce_qos_checkpoint_file", f"must be bootflash:<name> ([A-Za-z0-9_.-]), got {checkpoint!r}")

    table_problems, speeds = threshold_table_problems(values["nxos_roce_qos_ecn_thresholds_by_speed"])
    for msg in table_problems:
        bad("nxos_roce_qos_ecn_thresholds_by_speed", msg)
    port_speed = as_int(values["nxos_roce_qos_port_speed"], 1000, 800000)
    if speeds and port_speed not in speeds:
        bad(
            "nxos_roce_qos_port_speed",
            f"must be a speed (Mb/s) with a row in nxos_roce_qos_ecn_thresholds_by_speed ({sorted(speeds)}), "
            f"got {values['nxos_roce_qos_port_speed']!r}",
        )
    # Per-speed policies are named <queuing policy>_<speed>G: the name must stay within 40 characters.
    queuing = values["nxos_roce_qos_queuing_policy"]
    if isinstance(queuing, str) and NAME_RE.fullmatch(queuing) and len(queuing) > 40 - len("_800G"):
        bad(
            "nxos_roce_qos_queuing_policy",
            f"must be at most 35 characters (per-speed policies add _<N>G), got {queuing!r}",
        )

    interfaces = values["nxos_roce_qos_interfaces"]
    if not isinstance(interfaces, list):
        bad("nxos_roce_qos_interfaces", f"must be a list, got {type(interfaces).__name__}")
        interfaces = None
    seen = set()
    for index, item in enumerate(interfaces or []):
        for msg in interface_problem(item, index, mtu, speeds):
            bad("nxos_roce_qos_interfaces", msg)
        name = item.get("name") if isinstance(item, dict) else None
        if name in seen:
            bad("nxos_roce_qos_interfaces", f"{name} is listed twice")
        seen.add(name)
    for msg in release_problems(values.get("nxos_roce_qos_release_interfaces"), interfaces, seen):
        bad(*msg)
    return problems


RELEASE_HINT = (
    "list the switch's RoCE ports in nxos_roce_qos_host_interfaces / nxos_roce_qos_uplink_interfaces (its "
    "host_vars), or name the ports meant to lose the policy in nxos_roce_qos_release_interfaces"
)


def release_problems(release, interfaces, listed):
    """(var, msg) problems of nxos_roce_qos_release_interfaces, the ports a run may take the role's policy off (the
    plan refuses any other: switch/plan.py), and of a switch with no RoCE port at all: with both lists empty the run
    would strip the policy from every port that has it, which an inventory says only by naming those ports."""
    if release in (None, ""):
        release = []
    if not isinstance(release, list):
        return [("nxos_roce_qos_release_interfaces", f"must be a list of interface names, got {release!r}")]
    out = []
    if interfaces == [] and not release:
        out.append(
            (
                "nxos_roce_qos_interfaces",
                "is empty (nxos_roce_qos_host_interfaces and nxos_roce_qos_uplink_interfaces): the run would configure "
                f"no RoCE port and take the role's policy off every port that has it; {RELEASE_HINT}",
            )
        )
    seen = set()
    for name in release:
        if not isinstance(name, str) or not INTERFACE_RE.fullmatch(name):
            out.append(
                (
                    "nxos_roce_qos_release_interfaces",
                    f"must name interfaces as NX-OS prints them (Ethernet1/1 or Ethernet1/1/2), got {name!r}",
                )
            )
        elif name in listed:
            out.append(
                (
                    "nxos_roce_qos_release_interfaces",
                    f"{name} is also a RoCE port (nxos_roce_qos_interfaces): a port is configured or released, "
                    "not both",
                )
            )
        elif name in seen:
            out.append(("nxos_roce_qos_release_interfaces", f"{name} is listed twice"))
        seen.add(name)
    return out


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>). nxos_roce_qos_scheme hands the
# queue scheme of switch/queues.py to the role (vars/main.yml: the template and the post-check's class names).
FILTERS = {"nxos_roce_qos_validate": nxos_roce_qos_validate, "nxos_roce_qos_scheme": queue_scheme}
