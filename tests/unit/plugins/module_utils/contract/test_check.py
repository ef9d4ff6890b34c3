"""The inventory contract as a whole (plugins/module_utils/contract/check.py): the good inventory passes, every
error comes at once, and the action plugin templates every variable a rule reads."""

from __future__ import annotations

import re

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check, needed_variables
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.slurm import SLURM_ROWS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.switch import NXOS_RENDERED
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import EXTRA_VARIABLES, VARIABLES

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.contract import test_fabric, test_switch, test_variables
from tests.unit.plugins.module_utils.contract.inventories import good, on_all

pytestmark = pytest.mark.lint


def test_good_inventory_passes() -> None:
    assert [str(p) for p in check(good())] == []


def test_strings_from_extra_vars_are_numbers() -> None:
    """`-e cluster_roce_dscp=24` arrives as a string: accepted as the number it spells."""
    inv = good()
    on_all("cluster_roce_dscp", "24")(inv)
    assert [str(p) for p in check(inv)] == []


def test_every_error_at_once() -> None:
    """Independent mistakes in one inventory: every one is reported, in one run."""
    ids = ("no-prefix", "bad-hostname", "duplicate-rank", "roce-dscp-64", "module-name-injection", "switch-port-name")
    inv, expected = good(), []
    for i, change, errors in test_fabric.BAD + test_variables.BAD + test_switch.BAD:
        if i in ids:
            change(inv)
            expected += errors
    assert sorted(str(p) for p in check(inv)) == sorted(expected)


def test_needed_variables_are_every_variable_a_rule_reads() -> None:
    """The action plugin templates exactly needed_variables(): every row's variable, each one once, and every
    variable a rule reads by name (`inv.get(host, "<name>")` in plugins/module_utils/contract/)."""
    names = needed_variables()
    assert len(names) == len(set(names))
    rows = [v.name for v in VARIABLES + SLURM_ROWS]
    assert [n for n in [*rows, *EXTRA_VARIABLES, *NXOS_RENDERED] if n not in names] == []
    sources = "".join(p.read_text() for p in (ROOT / "plugins" / "module_utils" / "contract").glob("*.py"))
    read = set(re.findall(r'inv\.get\([^,()]+, "([A-Za-z_]+)"', sources))
    assert read and sorted(read - set(names)) == []


def test_docs_preflight_lists_every_rule_in_its_order() -> None:
    """docs/preflight.md's table of rules is RULES: each rule once, in the order check() runs them."""
    import re

    from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import RULES

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "preflight.md").read_text()
    listed = re.findall(r"^\| `([a-z_]+)` \| ([a-z_]+) \|", text, re.M)
    assert listed == [(rule.__name__, rule.__module__.rsplit(".", 1)[1]) for rule in RULES]
