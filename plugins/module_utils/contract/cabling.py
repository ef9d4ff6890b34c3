"""The inventory contract's cabling rule: the switches' port map can be true (module_utils/ladder/cabling.py)."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    NODES,
    SWITCHES,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.switch import switch_ports
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling


def aliases(inv: Inventory, nodes: list[str], switches: list[str]) -> dict[str, str]:
    """alias -> inventory host or switch, as a port's description or LLDP may name it (cabling.names)."""
    return cabling.names(nodes, switches, lambda h: inv.get(h, "common_hostname"))


def cabling_map(inv: Inventory) -> Iterator[Problem]:
    """The switches' port map can be true (module_utils/ladder/cabling.py): no host NIC or switch port at the far end of
    two ports, no `peer` that is no inventory name, every uplink listed back by its far end."""
    switches = inv.members(SWITCHES)
    if any("variables" in inv.unreadable.get(sw, {}) for sw in switches):
        return  # reported as unreadable
    names = aliases(inv, inv.members(NODES), switches)
    links = cabling.links({sw: switch_ports(inv, sw) for sw in switches}, names)
    for where, var, message in cabling.map_problems(links, list(inv.hostvars)):
        yield Problem(where, var, message)
