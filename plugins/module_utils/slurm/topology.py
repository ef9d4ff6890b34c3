"""The fabric as the inventory gives it, and topology.conf (topology/tree) from the switches' RoCE ports.

The groups the topology is read from (rdma_nodes, switches), a host's inventory value, each switch's RoCE ports and
the names a port may give a host by (cabling.names): the slurm role's topology.conf, the inventory contract's check
that every node is placed, and the validation ladder's view of the same fabric all read them here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling

NODES = "rdma_nodes"
SWITCHES = "switches"


def hostvar(hostvars: Mapping, host: str, name: str, default: Any = None) -> Any:
    """A host's inventory value; `default` where the host, or the value, is missing or None."""
    try:
        value = hostvars[host].get(name, default)
    except (KeyError, AttributeError):
        return default
    return default if value is None else value


def natural(name: str) -> list:
    """Sort key of switch and node names: numbers in numeric order (leaf2 before leaf10)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def topology(
    switch_ports: Mapping[str, list], nodes: list[str], names: Mapping[str, str], nodename: Mapping[str, str]
) -> dict:
    """topology.conf (topology/tree) from the switches' RoCE ports.

    switch_ports: switch -> its RoCE port items (nxos_roce_qos_interfaces: host ports and uplinks); nodes: the
    inventory's Slurm nodes; names: alias -> inventory host or switch (host names, short names, hostnames);
    nodename: inventory host -> its Slurm NodeName. A fabric of one switch holds every node; with more, each
    node hangs off the switch whose port names it first, and a switch is linked to another that one of its ports
    names (cabling.far_end: the port's `peer`, else its description's first word). Leaves are the switches with
    nodes, each level up the switches linked to the level below. Returns {"lines", "unplaced", "notes"}."""
    switches = sorted(switch_ports, key=natural)
    if not switches:
        return {"lines": [], "unplaced": [], "notes": ["no switch in the inventory: no topology.conf"]}
    placed: dict[str, str] = {}
    links: dict[str, set] = {sw: set() for sw in switches}
    notes = []
    # Switch by switch in natural order: the first switch that names a node places it.
    for sw, port in ((s, p) for s in switches for p in switch_ports[s] or [] if isinstance(p, Mapping)):
        owner = cabling.far_end(port, names)[0]
        if owner in links and owner != sw:
            links[sw].add(owner)
            links[owner].add(sw)
        elif owner in nodes:
            if owner in placed and placed[owner] != sw:
                notes.append(f"{owner} is on {placed[owner]} and {sw}: placed on {placed[owner]}")
            placed.setdefault(owner, sw)
    if len(switches) == 1:
        placed = dict.fromkeys(nodes, switches[0])
    unplaced = [n for n in nodes if n not in placed]
    level = {sw for sw in switches if sw in placed.values()}
    lines = []
    for sw in sorted(level, key=natural):
        members = sorted((nodename[n] for n, s in placed.items() if s == sw), key=natural)
        lines.append(f"SwitchName={sw} Nodes={','.join(members)}")
    seen = set(level)
    while level:
        above: dict[str, set] = {}
        for sw in level:
            for up in links[sw] - seen:
                above.setdefault(up, set()).add(sw)
        for up in sorted(above, key=natural):
            lines.append(f"SwitchName={up} Switches={','.join(sorted(above[up], key=natural))}")
        seen |= set(above)
        level = set(above)
    unlinked = [sw for sw in switches if sw not in seen]
    if unlinked:
        notes.append(f"{', '.join(unlinked)}: no node and no link to a switch with nodes, left out")
    roots = _components(lines)
    if roots > 1:
        notes.append(f"the switches form {roots} separate trees: a job spans the nodes of one only (topology.conf(5))")
    return {"lines": lines, "unplaced": unplaced, "notes": notes}


def _components(lines: list[str]) -> int:
    """How many trees the topology.conf lines form (a switch listed by no other is a root)."""
    names, children = [], set()
    for line in lines:
        fields = dict(part.split("=", 1) for part in line.split())
        names.append(fields["SwitchName"])
        children.update(fields.get("Switches", "").split(",") if "Switches" in fields else [])
    return sum(1 for n in names if n not in children)


def host_aliases(hostvars: Mapping, hosts: list[str], switches: list[str] = ()) -> dict[str, str]:
    """alias -> inventory host (or switch) by cabling.names, the hostnames from the hosts' variables."""
    return cabling.names(hosts, switches, lambda h: hostvar(hostvars, h, "common_hostname"))


def switch_ports(hostvars: Mapping, switches: list[str]) -> dict[str, list]:
    """switch -> its RoCE ports (nxos_roce_qos_host_interfaces + _uplink_interfaces, the switch role's lists)."""
    out = {}
    for sw in switches:
        ports = []
        for name in ("nxos_roce_qos_host_interfaces", "nxos_roce_qos_uplink_interfaces"):
            value = hostvar(hostvars, sw, name, [])
            ports += list(value) if isinstance(value, list) else []
        out[sw] = ports
    return out
