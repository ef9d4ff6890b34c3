"""Filters: the kernel modules' plan, state and report (rules in module_utils/host/kernel_modules.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.kernel_modules import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
