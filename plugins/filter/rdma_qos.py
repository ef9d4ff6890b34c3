"""Filters: the fabric networks the host QoS marking matches (rules in module_utils/host/qos.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
