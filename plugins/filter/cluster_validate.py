"""Filters: the validation ladder's units, parsers, pairing, rungs and verdict.

The rules live in module_utils/ladder/, one module per concern: units, parsers, pairing, the rungs (rung: the record
and the inventory rung; nodes, pairs, collectives, switches, jobs: the rungs by what they measure) and verdict.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import (
    collectives,
    jobs,
    nodes,
    pairing,
    pairs,
    parsers,
    rung,
    switches,
    units,
    verdict,
)
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        table = {}
        for rules in (units, parsers, pairing, rung, nodes, pairs, collectives, switches, jobs, verdict):
            table.update(rules.FILTERS)
        return adapt(table)
