"""Post-check of the nxos_roce_qos role, and the per-speed queuing policies it renders.

`nxos_roce_qos_speed_policies(interfaces, table, default_speed, prefix)` decides which queuing
policy each RoCE port gets: one policy per port speed in use, carrying that speed's ECN thresholds.

`nxos_roce_qos_postcheck(running, pfc, expected)` takes the text of `show running-config`, of
`show interface priority-flow-control` (None where the switch does not support it) and the role's
expectations, and returns `{"passed": bool, "failed": [names], "checks": [{"name", "passed",
"detail"}], "unverified": [what could not be checked and why]}`.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.plan import parse

DOCUMENTATION = """
name: nxos_roce_qos_postcheck
short_description: Check NX-OS show output against the nxos_roce_qos policy
description: Parses `show running-config` and `show interface priority-flow-control`.
"""


def speed_label(mbps: int) -> str:
    """NX-OS port speed (Mb/s, as the `speed` command takes it) -> the suffix of its policy name."""
    return f"{mbps // 1000}G" if mbps % 1000 == 0 else f"{mbps}M"


def nxos_roce_qos_speed_policies(interfaces, table, default_speed, prefix):
    """One queuing policy per port speed in use: {"policies": [{name, speed, label, min_kbytes, max_kbytes,
    source}] (ascending speed), "ports": {port: policy name}}. A port without `speed` has `default_speed`;
    `source` is the row's (where its numbers come from, rendered as a comment). The values were
    validated before (nxos_roce_qos_validate), so a missing row is a KeyError."""
    rows = {int(speed): row for speed, row in (table or {}).items()}
    policies = {}
    ports = {}
    for item in interfaces or []:
        speed = int(item.get("speed") or default_speed)
        row = rows[speed]
        name = f"{prefix}_{speed_label(speed)}"
        policies[speed] = {
            "name": name,
            "speed": speed,
            "label": speed_label(speed),
            "min_kbytes": int(row["min_kbytes"]),
            "max_kbytes": int(row["max_kbytes"]),
            "source": row["source"],
        }
        ports[item["name"]] = name
    return {"policies": [policies[speed] for speed in sorted(policies)], "ports": ports}


def _tree(text):
    """`show running-config` -> {line: subtree}, read by the diff engine's parser (one parser for the
    plan and the post-check); the first of two equal lines wins."""

    def nested(nodes):
        out = {}
        for node in nodes:
            out.setdefault(node.line, nested(node.children))
        return out

    return nested(parse(text))


def _block(tree, *path):
    node = tree
    for key in path:
        node = node.get(key)
        if node is None:
            return None
    return node


def _find(tree, prefix):
    """The first line of a block that starts with prefix (or None)."""
    for line in tree or {}:
        if line.startswith(prefix):
            return line
    return None


def _class_map(tree, name):
    """The class-map block of that name, whatever its match type."""
    for match_type in ("match-any", "match-all"):
        block = tree.get(f"class-map type qos {match_type} {name}")
        if block is not None:
            return block
    return None


def _expand(values):
    """`24,26` or `24-26` -> {24, 26} / {24, 25, 26} (NX-OS value lists)."""
    out = set()
    for part in values.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (high or low).isdigit():
            out.update(range(int(low), int(high or low) + 1))
    return out


def _dscp_values(block):
    """All DSCP values of every `match dscp` line of a class-map, and the lines."""
    lines = [line for line in block or {} if line.startswith("match dscp ")]
    values = set()
    for line in lines:
        values |= _expand(line.split(" ", 2)[2])
    return values, lines


def _pfc_table(text):
    """`show interface priority-flow-control` -> {port: {"mode", "oper", "bitmap"}}."""
    ports = {}
    for line in str(text).splitlines():
        match = re.match(r"^(Ethernet\S+)\s+(\S+)\s+(On|Off)\s*(?:\((\w+)\))?", line.strip())
        if match:
            bitmap = int(match.group(4), 16) if match.group(4) else 0
            ports[match.group(1)] = {"mode": match.group(2), "oper": match.group(3), "bitmap": bitmap}
    return ports


def nxos_roce_qos_postcheck(running, pfc, expected):
    tree = _tree(running)
    checks = []

    def check(name, passed, detail):
        checks.append({"name": name, "passed": bool(passed), "detail": detail})

    nodrop = int(expected["nodrop_cos"])
    cnp_group = int(expected["cnp_qos_group"])
    mtu = int(expected["mtu"])

    sysqos = _block(tree, "system qos") or {}
    want = f"service-policy type network-qos {expected['network_policy']}"
    check(
        "system_qos_network_qos",
        want in sysqos,
        f"system qos attaches {expected['network_policy']} (without it PFC and MTU are not active)",
    )
    want = f"service-policy type queuing output {expected['queuing_policy']}"
    check("system_qos_queuing", want in sysqos, f"system qos attaches {expected['queuing_policy']}")

    roce_cmap = _class_map(tree, expected["roce_class"])
    values, lines = _dscp_values(roce_cmap)
    wanted = {int(v) for v in expected["roce_dscp"]}
    check(
        "roce_classification",
        values == wanted and len(lines) == 1,
        f"class-map {expected['roce_class']} matches exactly DSCP {sorted(wanted)} in one line (found {lines})",
    )
    values, lines = _dscp_values(_class_map(tree, expected["cnp_class"]))
    check(
        "cnp_classification",
        values == {int(expected["cnp_dscp"])} and len(lines) == 1,
        f"class-map {expected['cnp_class']} matches exactly DSCP {int(expected['cnp_dscp'])} (found {lines})",
    )
    tcp = expected.get("tcp") or None  # the fabric TCP class, when it has its own (lossy) one
    if tcp:
        values, lines = _dscp_values(_class_map(tree, tcp["class"]))
        check(
            "tcp_classification",
            values == {int(tcp["dscp"])} and len(lines) == 1,
            f"class-map {tcp['class']} matches exactly DSCP {int(tcp['dscp'])} (found {lines})",
        )

    marking = _block(tree, f"policy-map type qos {expected['marking_policy']}") or {}
    roce_set = f"set qos-group {nodrop}" in (marking.get(f"class {expected['roce_class']}") or {})
    cnp_set = f"set qos-group {cnp_group}" in (marking.get(f"class {expected['cnp_class']}") or {})
    tcp_set = not tcp or f"set qos-group {int(tcp['qos_group'])}" in (marking.get(f"class {tcp['class']}") or {})
    default_group = expected.get("default_qos_group")
    default_set = default_group in (None, "") or f"set qos-group {int(default_group)}" in (
        marking.get("class class-default") or {}
    )
    check(
        "marking_policy",
        roce_set and cnp_set and tcp_set and default_set,
        f"{expected['marking_policy']}: RoCE -> qos-group {nodrop}, CNP -> qos-group {cnp_group}"
        + (f", fabric TCP -> qos-group {int(tcp['qos_group'])}" if tcp else "")
        + ("" if default_group in (None, "") else f", class-default -> qos-group {int(default_group)}"),
    )

    network = _block(tree, f"policy-map type network-qos {expected['network_policy']}") or {}
    nq = network.get(f"class type network-qos {expected['network_class']}") or {}
    buffer = expected.get("pause_buffer") or None
    headroom = (
        f"pause buffer-size {int(buffer['buffer_size'])} pause-threshold {int(buffer['pause_threshold'])} "
        f"resume-threshold {int(buffer['resume_threshold'])}"
        if buffer
        else None
    )
    check(
        "nodrop_class",
        f"pause pfc-cos {nodrop}" in nq and f"mtu {mtu}" in nq and (headroom is None or headroom in nq),
        f"{expected['network_class']} has `pause pfc-cos {nodrop}` and `mtu {mtu}`"
        + (f" and `{headroom}`" if headroom else "")
        + f" (found {sorted(nq)})",
    )

    queuing = _block(tree, f"policy-map type queuing {expected['queuing_policy']}") or {}
    roce_q = queuing.get(f"class type queuing {expected['roce_queue']}") or {}
    ecn = _find(roce_q, "random-detect ")
    if expected["profile"] == "dcqcn":
        check(
            "roce_queue_ecn",
            ecn is not None and ecn.endswith(" ecn"),
            f"{expected['roce_queue']} marks ECN with WRED (found {ecn})",
        )
    else:
        check(
            "roce_queue_no_ecn",
            ecn is None,
            f"{expected['roce_queue']} has no WRED/ECN (profile pfc_only: PFC alone; found {ecn})",
        )
    if tcp:
        tcp_q = queuing.get(f"class type queuing {tcp['queue']}") or {}
        share = _find(tcp_q, "bandwidth remaining percent ")
        tcp_nq = network.get(f"class type network-qos {tcp['network_class']}") or {}
        paused = _expand((_find(nq, "pause pfc-cos ") or "pause pfc-cos ").split(" ", 2)[2])
        lossy = _find(tcp_nq, "pause") is None and int(tcp["qos_group"]) not in paused
        check(
            "tcp_queue_lossy",
            share is not None and share != "bandwidth remaining percent 0" and lossy,
            f"{tcp['queue']} (fabric TCP) has a bandwidth share and no PFC (found {share}, {sorted(tcp_nq)})",
        )
    check(
        "roce_queue_not_strict_priority",
        _find(roce_q, "priority") is None and _find(roce_q, "bandwidth remaining percent") is not None,
        f"{expected['roce_queue']} is a bandwidth queue, not strict priority",
    )
    cnp_q = queuing.get(f"class type queuing {expected['cnp_queue']}") or {}
    check(
        "cnp_queue_strict_priority",
        "priority level 1" in cnp_q,
        f"{expected['cnp_queue']} (CNP) has `priority level 1`",
    )

    if expected.get("lldp"):
        check("lldp", "feature lldp" in tree, "`feature lldp` (DCBX, and the ladder's cabling rung)")

    if expected.get("pfc_watchdog"):
        check(
            "pfc_watchdog",
            "priority-flow-control watch-dog-interval on" in tree,
            "global `priority-flow-control watch-dog-interval on`",
        )

    for policy in expected.get("speed_policies") or []:
        block = _block(tree, f"policy-map type queuing {policy['name']}") or {}
        ecn = _find(block.get(f"class type queuing {expected['roce_queue']}") or {}, "random-detect ")
        thresholds = f"minimum-threshold {policy['min_kbytes']} kbytes maximum-threshold {policy['max_kbytes']} kbytes"
        check(
            f"speed_policy {policy['name']}",
            ecn is not None and thresholds in ecn and ecn.endswith(" ecn"),
            f"{policy['name']} marks ECN on {expected['roce_queue']} at {policy['min_kbytes']}-"
            f"{policy['max_kbytes']} KB ({speed_label(policy['speed'])} ports; found {ecn})",
        )

    unverified = []
    warnings = []
    port_policies = expected.get("port_queuing") or {}
    if pfc is None:
        unverified.append(
            "PFC operational state per port (`show interface priority-flow-control` is not supported here)"
        )
    table = _pfc_table(pfc) if pfc is not None else {}
    for item in expected.get("interfaces") or []:
        name = item["name"]
        block = _block(tree, f"interface {name}")
        if_mtu = int(item.get("mtu") or mtu)
        mode = expected.get("pfc_mode", "on")
        # `auto` is NX-OS's default: the running config shows no mode line then.
        mode_ok = block is not None and (
            f"priority-flow-control mode {mode}" in block
            if mode != "auto"
            else not any(line.startswith("priority-flow-control mode") for line in block)
        )
        watchdog_ok = not expected.get("pfc_watchdog_per_port") or (
            block is not None and "priority-flow-control watch-dog-interval on" in block
        )
        # dcqcn: the port's own queuing policy (ECN thresholds of its speed); pfc_only: none of its own.
        queuing_policy = port_policies.get(name)
        port_queuing = _find(block, "service-policy type queuing output ")
        queuing_ok = port_queuing == (
            f"service-policy type queuing output {queuing_policy}" if queuing_policy else None
        )
        # The port's `speed` line (absent when it auto-negotiates) against the speed its ECN
        # thresholds were chosen for.
        want_speed = int(item.get("speed") or expected.get("port_speed") or 0)
        speed_line = _find(block, "speed ")
        if queuing_policy and speed_line and want_speed and speed_line != f"speed {want_speed}":
            warnings.append(
                f"{name} is configured with `{speed_line}` but its ECN thresholds are those of speed "
                f"{want_speed} (set `speed` in its nxos_roce_qos_interfaces item)"
            )
        config_ok = (
            mode_ok
            and watchdog_ok
            and queuing_ok
            and (if_mtu == 1500 or f"mtu {if_mtu}" in block)
            and f"service-policy type qos input {expected['marking_policy']}" in block
        )
        check(
            f"interface_config {name}",
            config_ok,
            f"{name}: PFC mode {mode}"
            + (", PFC watchdog" if expected.get("pfc_watchdog_per_port") else "")
            + f", mtu {if_mtu}, input policy {expected['marking_policy']}"
            + (f", queuing policy {queuing_policy}" if queuing_policy else ""),
        )
        if pfc is None:
            continue
        state = table.get(name, {})
        oper_ok = state.get("oper") == "On" and bool(state.get("bitmap", 0) & (1 << nodrop))
        check(
            f"interface_pfc_oper {name}",
            oper_ok,
            f"{name}: PFC operational with CoS {nodrop} in the bitmap (found {state or 'no row'})",
        )

    failed = [c["name"] for c in checks if not c["passed"]]
    return {
        "passed": not failed,
        "failed": failed,
        "checks": checks,
        "unverified": unverified,
        "warnings": warnings,
    }


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "nxos_roce_qos_postcheck": nxos_roce_qos_postcheck,
    "nxos_roce_qos_speed_policies": nxos_roce_qos_speed_policies,
}
