"""Filters: the lifecycle's rolling change (batches, drain reasons, the report) and node removal (rules in
module_utils/lifecycle/)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle import remove, rolling
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt({**rolling.FILTERS, **remove.FILTERS})
