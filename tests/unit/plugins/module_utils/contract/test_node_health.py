"""The inventory contract's node_health rule (plugins/module_utils/contract/node_health.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import DEFAULTS as NODE_CHECK_DEFAULTS

from tests.unit.plugins.module_utils.contract.inventories import Change, cases, on_all, reports, setv

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "node-health-unknown-threshold",
        setv("n1", "node_health_thresholds", {"xid_window": 3600}),
        ["n1: node_health_thresholds unknown thresholds xid_window (known: " + ", ".join(NODE_CHECK_DEFAULTS) + ")"],
    ),
    (
        "node-health-bad-threshold",
        on_all("node_health_thresholds", {"sw_power_cap": "fail"}),
        ["all: node_health_thresholds thresholds.sw_power_cap must be one of report, warn"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected
