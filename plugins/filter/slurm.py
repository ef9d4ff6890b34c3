"""Filters: the cluster's Slurm configuration and how a host applies it (rules in module_utils/slurm/)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.conf import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
