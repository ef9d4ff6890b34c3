"""The inventory contract's cabling rule (plugins/module_utils/contract/cabling.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest

from tests.unit.plugins.module_utils.contract.inventories import Change, both, cases, reports, second_switch, setv

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "one-nic-on-two-switches",
        both(
            second_switch,
            setv("sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1/1", "description": "n1 ens192 RoCE"}]),
            setv("sw2", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/3", "peer": "n1", "peer_port": "ens192"}]),
        ),
        [
            "sw2: nxos_roce_qos_host_interfaces n1 ens192 is on sw Ethernet1/1/1 and on sw2 Ethernet1/3: one cable "
            "cannot end on two ports"
        ],
    ),
    (
        "port-peer-unknown",
        setv("sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1/1", "peer": "n9", "peer_port": "ens192"}]),
        ["sw: nxos_roce_qos_host_interfaces sw Ethernet1/1/1: peer 'n9' is no host or switch of the inventory"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected
