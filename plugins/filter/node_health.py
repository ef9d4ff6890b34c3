"""Filters: rdma-node-check's config and the baseline from the last passing verdict (rules in
module_utils/node/health.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.health import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
