"""The Nexus switches' RoCE counters as metrics, from the reads the validation ladder and the launch already make
and parse (ladder/parsers.py switch_counters: `show interface priority-flow-control` and `show queuing interface`):
PFC pauses per port, drops and ECN marks per port and qos-group, the ingress drops a lossless class shows first;
and each port's link state (`show interface brief`, read here: no rule of the project reads it yet).

A switch that did not answer is `rdma_llm_switch_up{switch} 0` with no port series: counters are never made up.
Each RoCE port with a node behind it in the inventory's port map (ladder/switches.py port_nodes, on
ladder/cabling.py: `peer`/`peer_port`, else the description's first two words) has
`rdma_llm_switch_port_node_info{switch, port, node, nic} 1`, the join from a port's counters to the node, its series
and the runs on it (`* on(switch, port) group_left(node) ...`).
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.cabling import port_name
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.parsers import switch_counters
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.switches import port_nodes
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table

PFC = "show interface priority-flow-control: RxPPP, TxPPP"
QUEUING = "show queuing interface <if>"
BRIEF = "show interface brief"
METRICS = table(
    Metric("rdma_llm_switch_up", "gauge", "", ("switch",), "1 when the switch answered the reads, 0 when not",
           "the switch's CLI (network_cli)"),
    Metric("rdma_llm_switch_port_pfc_pause_frames_total", "counter", "frames", ("switch", "port", "direction"),
           "PFC pause frames a port received (the host paused the switch) or sent (the switch paused the host)",
           PFC),
    Metric("rdma_llm_switch_port_drops_total", "counter", "packets", ("switch", "port", "qos_group"),
           "Packets a port's egress queue dropped (WRED/AFD and tail drops), unicast and multicast, per qos-group",
           f"{QUEUING}: Drop Pkts"),
    Metric("rdma_llm_switch_port_ecn_marked_total", "counter", "packets", ("switch", "port", "qos_group"),
           "Packets a port's egress queue ECN-marked, per qos-group", f"{QUEUING}: ECN Marked Pkts"),
    Metric("rdma_llm_switch_port_ingress_drops_total", "counter", "packets", ("switch", "port"),
           "Packets dropped on ingress (MMU, overflow): where a lossless class drops first", f"{QUEUING}: Ingress"),
    Metric("rdma_llm_switch_port_up", "gauge", "", ("switch", "port"), "1 when the port's link is up, 0 when not",
           f"{BRIEF}: Status"),
    Metric("rdma_llm_switch_port_node_info", "gauge", "", ("switch", "port", "node", "nic"),
           "1 for each RoCE port with a node behind it: the node (inventory name) and its NIC",
           "the inventory's port map (nxos_roce_qos_host_interfaces: peer/peer_port, else the description)"),
)  # fmt: skip
# `show interface brief`'s Ethernet table: Interface, VLAN, Type, Mode, Status, Reason ... (NX-OS 7+).
_BRIEF_ROW = re.compile(r"^(Eth\S+)\s+\S+\s+eth\s+\S+\s+(\S+)\s")


def parse_brief(text: str) -> dict:
    """`show interface brief` -> {"Ethernet1/1": True (up) | False}; the mgmt, port-channel and loopback tables'
    rows are not Ethernet ports and are left out."""
    out = {}
    for line in str(text or "").splitlines():
        m = _BRIEF_ROW.match(line.strip())
        if m:
            out[port_name(m.group(1))] = m.group(2) == "up"
    return out


def _group(key: str, prefix: str):
    return key[len(prefix) :] if key.startswith(prefix) and key[len(prefix) :].isdigit() else None


def port_samples(switch: str, counters: dict, links: dict, ports=None) -> list:
    """One switch's switch_counters() and parse_brief(); `ports` (names as the switch spells them) keeps the
    series to the ports given, e.g. the inventory's RoCE ports."""
    keep = None if ports is None else {port_name(p) for p in ports}
    out = []
    for port, values in sorted(counters.items()):
        if keep is not None and port not in keep:
            continue
        where = {"switch": switch, "port": port}
        for key, direction in (("pause_rx", "received"), ("pause_tx", "sent")):
            if key in values:
                out.append(
                    ("rdma_llm_switch_port_pfc_pause_frames_total", {**where, "direction": direction}, values[key])
                )
        for key, value in values.items():
            for prefix, name in (("drops_q", "drops"), ("ecn_q", "ecn_marked")):
                group = _group(key, prefix)
                if group is not None:
                    out.append((f"rdma_llm_switch_port_{name}_total", {**where, "qos_group": group}, value))
        if "ingress_drops" in values:
            out.append(("rdma_llm_switch_port_ingress_drops_total", where, values["ingress_drops"]))
    for port, up in sorted(links.items()):
        if keep is None or port in keep:
            out.append(("rdma_llm_switch_port_up", {"switch": switch, "port": port}, int(up)))
    return out


def node_samples(switch: str, nodes: dict | None) -> list:
    """rdma_llm_switch_port_node_info of one switch's ports (port_nodes()[switch])."""
    return [
        ("rdma_llm_switch_port_node_info", {"switch": switch, "port": port_name(port), "node": str(far["node"]),
                                            "nic": str(far.get("nic") or "")}, 1)
        for port, far in sorted((nodes or {}).items())
    ]  # fmt: skip


def samples(reads: dict, ports: dict | None = None, nodes: dict | None = None) -> list:
    """reads: {switch: {"pfc": text, "queuing": text of each port, "brief": text}, or None where the switch did
    not answer}; ports: {switch: [port, ...]} to keep (default: every port the switch printed); nodes:
    port_nodes() (the inventory's map: its info series whether or not the switch answered)."""
    out = [s for switch, far in sorted((nodes or {}).items()) for s in node_samples(switch, far)]
    for switch, read in sorted((reads or {}).items()):
        if not read or not read.get("pfc"):
            out.append(("rdma_llm_switch_up", {"switch": switch}, 0))
            continue
        out.append(("rdma_llm_switch_up", {"switch": switch}, 1))
        counters = switch_counters(read["pfc"], read.get("queuing") or "")
        out += port_samples(switch, counters, parse_brief(read.get("brief")), (ports or {}).get(switch))
    return out


def textfile(reads: dict, ports: dict | None = None, nodes: dict | None = None) -> str:
    return render(METRICS, samples(reads, ports, nodes))


# -- the monitoring role's poll (tasks/switches.yml: nxos_command on each switch, over its network_cli login) --------
def commands(ports) -> list:
    """What one poll sends: the PFC table and the link table for every port, a queuing table per port kept."""
    return ["show interface priority-flow-control", "show interface brief",
            *(f"show queuing interface {port_name(p)}" for p in ports or [])]  # fmt: skip


def read_of(result) -> dict | None:
    """nxos_command's registered result for commands() -> the read samples() takes; None when the switch did not
    answer (unreachable, a login or a command refused: no counters are made up from half a read)."""
    result = result if isinstance(result, dict) else {}
    stdout = result.get("stdout")
    if result.get("failed") or result.get("unreachable") or not isinstance(stdout, list) or len(stdout) < 2:
        return None
    return {"pfc": stdout[0], "brief": stdout[1], "queuing": "\n".join(str(s) for s in stdout[2:])}


def poll_textfile(result, switch: str, ports, nodes: dict | None = None) -> str:
    """One switch's poll as node_exporter's textfile (`rdma_llm_switch_<switch>.prom` on each monitoring host);
    nodes: that switch's port_nodes()."""
    return textfile({switch: read_of(result)}, {switch: list(ports or [])}, {switch: nodes or {}})


FILTERS = {
    "monitoring_switch_commands": commands,
    "monitoring_switch_textfile": poll_textfile,
    "monitoring_switch_port_nodes": port_nodes,
}
