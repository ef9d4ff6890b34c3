"""Filters: the netplan role's connection interfaces and live-address check (rules in module_utils/host/netplan.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.netplan import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
