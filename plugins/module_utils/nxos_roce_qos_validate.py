"""What NX-OS accepts for every value the nxos_roce_qos role renders into a switch config.

`nxos_roce_qos_validate(values)` takes the role's variables (a dict, name -> value) and returns a list
of `{"var", "msg"}` problems, empty when every value is safe to render. It runs before any connection
(tasks/assert.yml) and from the inventory preflight: one place for the rules.

Why these rules: a value is typed into an interactive NX-OS CLI session line by line, so a newline or
carriage return ends the command and starts another (config injection), `;` chains commands in the
NX-OS CLI, `?` asks for help mid-line and `|` starts an output filter; control characters are
terminal edits (Ctrl-Z leaves config mode). Ranges are NX-OS's own (Cisco Nexus 9000 NX-OS QoS
Configuration Guide, 10.x: DSCP 0-63, CoS/qos-group 0-7, network-qos MTU 1500-9216, interface MTU
576-9216 even; Interfaces Configuration Guide: description up to 254 characters; class-map and
policy-map names up to 40 alphanumeric characters, case-sensitive, `_` `-` `.` allowed).
"""

from __future__ import annotations

import re

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
SCHEMES = {"8q": [1, 2, 3, 4, 5, 6, 7], "4q": [1, 2, 3]}
# Values of the interface `speed` command on Nexus 9000 (Mb/s).
SPEEDS = (1000, 10000, 25000, 40000, 50000, 100000, 200000, 400000, 800000)
NAME_VARS = (
    "nxos_roce_qos_roce_class",
    "nxos_roce_qos_cnp_class",
    "nxos_roce_qos_marking_policy",
    "nxos_roce_qos_network_policy",
    "nxos_roce_qos_queuing_policy",
)


def as_int(value, low, high, even=False):
    """The value as an int if it is an integer (or a digit string) in [low, high], else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9]{1,6}", value):
        number = int(value)
    else:
        return None
    if not low <= number <= high or (even and number % 2):
        return None
    return number


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
    return None


def name_problem(value):
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        return f"must be 1-40 characters [A-Za-z0-9_.-] starting with a letter, got {value!r}"
    if value.lower() == "class-default" or value.lower().startswith("c-"):
        return f"{value!r} is reserved by NX-OS (class-default and system classes c-...)"
    return None


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
    unknown = sorted(set(item) - {"name", "mtu", "description", "speed"})
    if unknown:
        problems.append(f"{where}: unknown keys {unknown}")
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
    """Problems of nxos_roce_qos_ecn_thresholds_by_speed ({speed: {min_kbytes, max_kbytes}}) and the
    speeds it has rows for."""
    if not isinstance(table, dict) or not table:
        return [f"must be a non-empty dict speed (Mb/s) -> {{min_kbytes, max_kbytes}}, got {table!r}"], set()
    problems, speeds = [], set()
    for key, row in table.items():
        speed = as_int(key, 1000, 800000) if not isinstance(key, str) or key.isdigit() else None
        if speed not in SPEEDS:
            problems.append(f"speed {key!r} must be one of {list(SPEEDS)} (Mb/s)")
            continue
        speeds.add(speed)
        if not isinstance(row, dict) or set(row) != {"min_kbytes", "max_kbytes"}:
            problems.append(f"{speed}: must be {{min_kbytes, max_kbytes}}, got {row!r}")
            continue
        low, high = as_int(row["min_kbytes"], 1, 64000), as_int(row["max_kbytes"], 1, 64000)
        if low is None or high is None or low > high:
            problems.append(f"{speed}: min_kbytes and max_kbytes must be 1-64000 with min <= max, got {row!r}")
    return problems, speeds


def nxos_roce_qos_validate(values):
    """All problems of the role's variables, as [{"var": name, "msg": text}]."""
    problems = []

    def bad(var, msg):
        problems.append({"var": var, "msg": f"{var}: {msg}"})

    scheme = values.get("nxos_roce_qos_queue_scheme", "8q")
    queues = SCHEMES.get(scheme) if isinstance(scheme, str) else None
    if queues is None:
        bad("nxos_roce_qos_queue_scheme", f"must be one of {sorted(SCHEMES)}, got {scheme!r}")
        queues = SCHEMES["8q"]

    dscp = values.get("nxos_roce_qos_roce_dscp")
    dscp_ints = [as_int(v, 0, 63) for v in dscp] if isinstance(dscp, list) else []
    if not dscp_ints or None in dscp_ints:
        bad("nxos_roce_qos_roce_dscp", f"must be a non-empty list of DSCP values 0-63, got {dscp!r}")
    cnp = as_int(values.get("nxos_roce_qos_cnp_dscp"), 0, 63)
    if cnp is None or cnp in dscp_ints:
        bad(
            "nxos_roce_qos_cnp_dscp",
            f"must be a DSCP value 0-63 not in nxos_roce_qos_roce_dscp, got {values.get('nxos_roce_qos_cnp_dscp')!r}",
        )
    nodrop = as_int(values.get("nxos_roce_qos_nodrop_cos"), 0, 7)
    cnp_group = as_int(values.get("nxos_roce_qos_cnp_qos_group", 7), 0, 7)
    for var, got in (("nxos_roce_qos_nodrop_cos", nodrop), ("nxos_roce_qos_cnp_qos_group", cnp_group)):
        if got is None or got not in queues:
            bad(var, f"must be a queue of the {scheme} scheme ({queues}), got {values.get(var)!r}")
    if nodrop is not None and nodrop == cnp_group:
        bad("nxos_roce_qos_cnp_qos_group", f"must differ from nxos_roce_qos_nodrop_cos ({nodrop})")

    mtu = values.get("nxos_roce_qos_mtu", 9216)
    if as_int(mtu, 1500, 9216, even=True) is None:
        bad("nxos_roce_qos_mtu", f"must be an even number 1500-9216 (network-qos class range), got {mtu!r}")

    roce_bw = as_int(values.get("nxos_roce_qos_roce_bandwidth_percent", 50), 1, 100)
    default_bw = as_int(values.get("nxos_roce_qos_default_bandwidth_percent", 50), 0, 100)
    if roce_bw is None or default_bw is None or roce_bw + default_bw > 100:
        bad(
            "nxos_roce_qos_roce_bandwidth_percent",
            "(1-100) + nxos_roce_qos_default_bandwidth_percent (0-100) must be at most 100, got "
            f"{values.get('nxos_roce_qos_roce_bandwidth_percent')!r} + "
            f"{values.get('nxos_roce_qos_default_bandwidth_percent')!r}",
        )
    ecn_min = as_int(values.get("nxos_roce_qos_ecn_min_threshold_kbytes", 150), 1, 64000)
    ecn_max = as_int(values.get("nxos_roce_qos_ecn_max_threshold_kbytes", 3000), 1, 64000)
    if ecn_min is None or ecn_max is None or ecn_min > ecn_max:
        bad(
            "nxos_roce_qos_ecn_min_threshold_kbytes",
            "and nxos_roce_qos_ecn_max_threshold_kbytes must be 1-64000 with min <= max",
        )
    if as_int(values.get("nxos_roce_qos_ecn_drop_probability", 7), 0, 100) is None:
        bad("nxos_roce_qos_ecn_drop_probability", "must be 0-100")
    if as_int(values.get("nxos_roce_qos_ecn_weight", 0), 0, 15) is None:
        bad("nxos_roce_qos_ecn_weight", "must be 0-15")

    for var in NAME_VARS:
        if var in values:
            why = name_problem(values[var])
            if why:
                bad(var, why)
    names = [values[v] for v in NAME_VARS[:2] if isinstance(values.get(v), str)]
    if len(names) == 2 and names[0] == names[1]:
        bad("nxos_roce_qos_cnp_class", "must differ from nxos_roce_qos_roce_class")

    for var, choices in (
        ("nxos_roce_qos_class_match", ("match-any", "match-all")),
        ("nxos_roce_qos_pfc_mode", ("on", "auto")),
    ):
        if var in values and values[var] not in choices:
            bad(var, f"must be one of {list(choices)}, got {values[var]!r}")
    default_group = values.get("nxos_roce_qos_default_qos_group")
    if default_group not in (None, "") and as_int(default_group, 0, 7) is None:
        bad("nxos_roce_qos_default_qos_group", f"must be a qos-group 0-7 or null, got {default_group!r}")

    checkpoint = values.get("nxos_roce_qos_checkpoint_file", "bootflash:nxos_roce_qos.ckpt")
    if not isinstance(checkpoint, str) or not CHECKPOINT_RE.fullmatch(checkpoint):
        bad("nxos_roce_qos_checkpoint_file", f"must be bootflash:<name> ([A-Za-z0-9_.-]), got {checkpoint!r}")

    speeds = None
    if "nxos_roce_qos_ecn_thresholds_by_speed" in values:
        table_problems, speeds = threshold_table_problems(values["nxos_roce_qos_ecn_thresholds_by_speed"])
        for msg in table_problems:
            bad("nxos_roce_qos_ecn_thresholds_by_speed", msg)
        port_speed = as_int(values.get("nxos_roce_qos_port_speed", 100000), 1000, 800000)
        if speeds and port_speed not in speeds:
            bad(
                "nxos_roce_qos_port_speed",
                f"must be a speed (Mb/s) with a row in nxos_roce_qos_ecn_thresholds_by_speed ({sorted(speeds)}), "
                f"got {values.get('nxos_roce_qos_port_speed')!r}",
            )
        # Per-speed policies are named <queuing policy>_<speed>G: the name must stay within 40 characters.
        queuing = values.get("nxos_roce_qos_queuing_policy")
        if isinstance(queuing, str) and NAME_RE.fullmatch(queuing) and len(queuing) > 40 - len("_800G"):
            bad(
                "nxos_roce_qos_queuing_policy",
                f"must be at most 35 characters (per-speed policies add _<N>G), got {queuing!r}",
            )

    interfaces = values.get("nxos_roce_qos_interfaces", [])
    if not isinstance(interfaces, list):
        bad("nxos_roce_qos_interfaces", f"must be a list, got {type(interfaces).__name__}")
        interfaces = []
    seen = set()
    for index, item in enumerate(interfaces):
        for msg in interface_problem(item, index, mtu, speeds):
            bad("nxos_roce_qos_interfaces", msg)
        name = item.get("name") if isinstance(item, dict) else None
        if name in seen:
            bad("nxos_roce_qos_interfaces", f"{name} is listed twice")
        seen.add(name)
    return problems


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"nxos_roce_qos_validate": nxos_roce_qos_validate}
