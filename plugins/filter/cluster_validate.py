"""Filters: the validation ladder's parsers, thresholds, pairing, rungs and verdict.

The rules live in module_utils/cluster_validate.py.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.cluster_validate import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
