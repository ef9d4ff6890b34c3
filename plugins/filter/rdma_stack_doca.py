"""Filter: DOCA-OFED's repository, packages and holds (rules in module_utils/host/doca.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.doca import FILTERS
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(FILTERS)
