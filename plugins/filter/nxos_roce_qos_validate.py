"""Filters: the switch role's value rules (rules in module_utils/switch/values.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
