"""Filters: the validation ladder's units, parsers, pairing, rungs and verdict.

The rules live in module_utils, one module per concern: validate_units, validate_parsers, validate_pairing,
validate_rungs and validate_verdict.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing as validate_pairing
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers as validate_parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import rungs as validate_rungs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import units as validate_units
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as validate_verdict
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        table = {}
        for rules in (validate_units, validate_parsers, validate_pairing, validate_rungs, validate_verdict):
            table.update(rules.FILTERS)
        return adapt(table)
