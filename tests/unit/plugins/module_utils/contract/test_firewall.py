"""The inventory contract's fabric_firewall rule (plugins/module_utils/contract/firewall.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check

from tests.unit.plugins.module_utils.contract.inventories import Change, both, good, on_all, setv

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "firewall-guards-ssh",
        on_all("fabric_firewall_extra_ports", [2049, 22]),
        ["all: fabric_firewall_extra_ports has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        "firewall-guards-the-ssh-port-of-one-node",
        both(setv("n2", "ansible_port", 2222), on_all("fabric_firewall_extra_ports", [2222])),
        ["n2: fabric_firewall_extra_ports has 2222, the SSH port: the firewall never guards SSH"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in BAD])
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    inv = good()
    change(inv)
    assert [str(p) for p in check(inv)] == expected
