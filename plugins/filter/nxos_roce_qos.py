"""Filters: the switch role's post-check and per-speed ECN policies (rules in module_utils/switch/postcheck.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.postcheck import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
