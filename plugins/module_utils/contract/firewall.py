"""The inventory contract's fabric_firewall rule: the firewall never guards SSH."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import ALL, NODES, Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int


def fabric_firewall_leaves_ssh(inv: Inventory) -> Iterator[Problem]:
    """The fabric firewall guards the project's ports on every address: SSH (22, or the node's ansible_port) is never
    one of them, so the controller's connection is never filtered."""
    hosts = inv.members(NODES)
    found: dict[str, str] = {}
    for host in hosts:
        ports = inv.get(host, "fabric_firewall_extra_ports")
        if not isinstance(ports, list):  # not a list: the row reports it
            continue
        ssh = {22, as_int(inv.get(host, "ansible_port")) or 22}
        hit = sorted({as_int(p) for p in ports} & ssh)
        if hit:
            found[host] = f"has {hit[0]}, the SSH port: the firewall never guards SSH"
    if len(hosts) > 1 and len(found) == len(hosts) and len(set(found.values())) == 1:
        yield Problem(ALL, "fabric_firewall_extra_ports", next(iter(found.values())))
        return
    for host, why in found.items():
        yield Problem(host, "fabric_firewall_extra_ports", why)
