"""The inventory contract's node_health rule: the thresholds rdma-node-check would refuse, refused before any host
changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import NODES, Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import per_value
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import config as node_check


def node_health_thresholds(inv: Inventory) -> Iterator[Problem]:
    """The thresholds rdma-node-check would refuse (unknown key, bad value): its own check, run here so a bad value
    stops the play before any host changes, not the command on the node."""

    def refused(value: Any) -> str | None:
        try:
            node_check.resolve({"interfaces": [{"name": "any"}], "thresholds": value})
        except node_check.ConfigError as exc:
            return str(exc).removeprefix("config: ")
        return None

    hosts = inv.members(NODES)
    values = {h: inv.get(h, "node_health_thresholds") for h in hosts}
    values = {h: v for h, v in values.items() if isinstance(v, dict)}  # not a mapping: the row reports it
    yield from per_value("node_health_thresholds", values, refused, len(hosts))
