"""Removing nodes (playbooks/remove.yml): which hosts a run may remove, and the inventory their reset runs with.

The inventory says first what goes: each node to remove moves out of rdma_nodes into removed_nodes (its host_vars
stay, so this run still reaches it), then remove.yml drains it, waits for its jobs, resets it, and converges the
rest of the cluster without it (Slurm's node lines, the monitoring targets, the peers' firewall and /etc/hosts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# A host the cluster cannot lose with it (the group, why), checked in this order.
HELD_BY = (
    ("rdma_nodes", "is still in rdma_nodes: move it out of that group (a later site.yml would converge it again)"),
    ("slurm_controllers", "is the Slurm controller: move slurm_controllers to another host first"),
    ("monitoring", "is the monitoring host (Prometheus, Alertmanager): move the monitoring group first"),
    ("subnet_managers", "runs the subnet manager (OpenSM): move subnet_managers to another node first"),
)


def problems(removed: Sequence[str], groups: Mapping[str, Any], rdzv_hosts: Sequence[str] = ()) -> list[str]:
    """Why this removal must not start, one line a problem naming the host; [] when it may."""
    if not removed:
        return [
            "no host to remove: move each node to remove from rdma_nodes into the group removed_nodes "
            "(docs/slurm.md, 'Removing a node'), or name one with --limit"
        ]
    out = []
    for host in sorted(removed):
        out += [f"{host} {why}" for group, why in HELD_BY if host in (groups.get(group) or [])]
        if host in rdzv_hosts:
            out.append(f"{host} is the rendezvous host (train_launch_rdzv_host): name another host there first")
    if not [h for h in groups.get("rdma_nodes") or [] if h not in removed]:
        out.append("no node would be left in rdma_nodes")
    return out


def reset_inventory(removed: Sequence[str]) -> dict[str, Any]:
    """An inventory source given to reset.yml beside the cluster's own: the removed nodes in rdma_nodes again for that
    one run, so every concern's reset play (on rdma_nodes, with the group's variables) reaches them."""
    return {"all": {"children": {"rdma_nodes": {"hosts": {host: None for host in sorted(removed)}}}}}


FILTERS = {
    "remove_problems": problems,
    "remove_reset_inventory": reset_inventory,
}
