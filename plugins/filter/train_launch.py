"""Filters: the launch's decisions (ranks, payload config, NCCL env, outcome, progress, manifest).

The rules live in module_utils/train_launch.py.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.train_launch import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
