"""Filters: the design's fabric address (rules in module_utils/fabric.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.fabric import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
