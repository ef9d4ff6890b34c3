"""Filters: the fabric networks the host QoS marking matches (rules in module_utils/rdma_qos.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.rdma_qos import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
