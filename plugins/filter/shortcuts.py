"""Filters: the playbooks' short extra-vars as typed role variables (rules in module_utils/contract/shortcuts.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.shortcuts import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
