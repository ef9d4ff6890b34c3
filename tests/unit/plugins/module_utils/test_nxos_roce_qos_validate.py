"""The nxos_roce_qos value rules (plugins/module_utils/nxos_roce_qos_validate.py), in-process.

Every value the role renders into the switch config is checked for what NX-OS accepts before any
connection; these cases are the injection payloads a description or a name could carry.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils import nxos_roce_qos as filters
from ansible_collections.rdma_llm.cluster.plugins.module_utils import nxos_roce_qos_validate as rules

pytestmark = pytest.mark.switch


GOOD = {
    "nxos_roce_qos_roce_dscp": [26],
    "nxos_roce_qos_cnp_dscp": 48,
    "nxos_roce_qos_nodrop_cos": 3,
    "nxos_roce_qos_cnp_qos_group": 7,
    "nxos_roce_qos_queue_scheme": "8q",
    "nxos_roce_qos_mtu": 9216,
    "nxos_roce_qos_roce_class": "ROCE",
    "nxos_roce_qos_cnp_class": "CNP",
    "nxos_roce_qos_marking_policy": "ROCE_QOS_MARKING",
    "nxos_roce_qos_network_policy": "ROCE_NETWORK_QOS",
    "nxos_roce_qos_queuing_policy": "ROCE_QUEUING",
    "nxos_roce_qos_checkpoint_file": "bootflash:nxos_roce_qos.ckpt",
    "nxos_roce_qos_interfaces": [
        {"name": "Ethernet1/1", "description": "gpu-node-01 port 0 (rack A, U12) #1 & more"},
        {"name": "Ethernet1/1/2", "mtu": 4200},
    ],
}


def problems(**changes):
    return rules.nxos_roce_qos_validate({**GOOD, **changes})


def test_good_values_pass():
    assert problems() == []
    assert problems(nxos_roce_qos_interfaces=[{"name": "Ethernet1/1", "description": "x" * 254}]) == []


INJECTIONS = {
    "newline": "node1\nno system qos",
    "carriage-return": "node1\rno system qos",
    "crlf": "node1\r\ninterface Ethernet1/2",
    "semicolon": "node1 ; no feature lldp",
    "question-mark": "what?",
    "pipe": "node1 | include x",
    "ctrl-z": "node1\x1aconfigure terminal",
    "ctrl-c": "node1\x03",
    "escape": "node1\x1b[2J",
    "tab": "node1\tport",
    "nul": "node1\x00",
    "del": "node1\x7f",
    "non-ascii": "nœud-1",
    "unicode-line-separator": "node1\u2028no system qos",
    "overlong": "x" * 255,
    "leading-space": " node1",
    "not-a-string": 12,
}


@pytest.mark.parametrize("payload", INJECTIONS.values(), ids=INJECTIONS.keys())
def test_description_injection_payloads_are_refused(payload):
    found = problems(nxos_roce_qos_interfaces=[{"name": "Ethernet1/1", "description": payload}])
    assert len(found) == 1, found
    assert found[0]["var"] == "nxos_roce_qos_interfaces"
    assert "Ethernet1/1: description" in found[0]["msg"]


NAME_PAYLOADS = [
    "ROCE\nsystem qos",
    "ROCE\n",
    "ROCE;x",
    "ROCE X",
    "1ROCE",
    "R" * 41,
    "class-default",
    "c-out-8q-q3",
    "",
    5,
]


@pytest.mark.parametrize("var", rules.NAME_VARS)
@pytest.mark.parametrize("payload", NAME_PAYLOADS)
def test_name_payloads_are_refused(var, payload):
    found = problems(**{var: payload})
    assert [p["var"] for p in found] == [var], found


@pytest.mark.parametrize(
    "name",
    [
        "Ethernet1/1\nno system qos",
        "Ethernet1/1\n",
        "eth1/1",
        "Ethernet1/1 ",
        "Ethernet1/0",
        "Ethernet1/1/9",
        "Ethernet100/1",
        "mgmt0",
    ],
)
def test_interface_name_payloads_are_refused(name):
    found = problems(nxos_roce_qos_interfaces=[{"name": name}])
    assert [p["var"] for p in found] == ["nxos_roce_qos_interfaces"], found


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("nxos_roce_qos_roce_dscp", [26, 64]),
        ("nxos_roce_qos_roce_dscp", ["26\nno system qos"]),
        ("nxos_roce_qos_roce_dscp", [True]),
        ("nxos_roce_qos_roce_dscp", []),
        ("nxos_roce_qos_cnp_dscp", 26),
        ("nxos_roce_qos_cnp_dscp", "48;"),
        ("nxos_roce_qos_nodrop_cos", 8),
        ("nxos_roce_qos_cnp_qos_group", 3),
        ("nxos_roce_qos_mtu", 9215),
        ("nxos_roce_qos_mtu", "9216\n"),
        ("nxos_roce_qos_queue_scheme", "16q"),
        ("nxos_roce_qos_roce_bandwidth_percent", 80),
        ("nxos_roce_qos_ecn_weight", 16),
        ("nxos_roce_qos_ecn_min_threshold_kbytes", 5000),
        ("nxos_roce_qos_checkpoint_file", "bootflash:x.ckpt\ndelete bootflash:nxos.bin"),
        ("nxos_roce_qos_checkpoint_file", "bootflash:x ckpt"),
        ("nxos_roce_qos_interfaces", [{"name": "Ethernet1/1", "mtu": 9215}]),
        ("nxos_roce_qos_interfaces", [{"name": "Ethernet1/1", "speed": 100}]),
        ("nxos_roce_qos_interfaces", [{"name": "Ethernet1/1"}, {"name": "Ethernet1/1"}]),
        ("nxos_roce_qos_interfaces", "Ethernet1/1"),
    ],
)
def test_numbers_and_lists_out_of_range_are_refused(var, value):
    found = problems(**{var: value})
    assert found and all(p["msg"].startswith(p["var"]) for p in found), found
    assert var in {p["var"] for p in found} or (
        var == "nxos_roce_qos_ecn_min_threshold_kbytes" and found[0]["var"] == var
    ), found


TABLE = {10000: {"min_kbytes": 15, "max_kbytes": 300}, 100000: {"min_kbytes": 150, "max_kbytes": 3000}}


@pytest.mark.parametrize(
    ("changes", "var", "text"),
    [
        ({"nxos_roce_qos_port_speed": 25000}, "nxos_roce_qos_port_speed", "with a row"),
        (
            {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "speed": 25000}]},
            "nxos_roce_qos_interfaces",
            "speed 25000 has no row",
        ),
        ({"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "speed": 12345}]}, "nxos_roce_qos_interfaces", "one of"),
        (
            {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "speed": "100000\nno system qos"}]},
            "nxos_roce_qos_interfaces",
            "one of",
        ),
        (
            {"nxos_roce_qos_ecn_thresholds_by_speed": {**TABLE, 25000: {"min_kbytes": 800, "max_kbytes": 700}}},
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "min <= max",
        ),
        (
            {"nxos_roce_qos_ecn_thresholds_by_speed": {**TABLE, 30000: {"min_kbytes": 1, "max_kbytes": 2}}},
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "speed 30000",
        ),
        (
            {"nxos_roce_qos_ecn_thresholds_by_speed": {**TABLE, 25000: {"min_kbytes": 38}}},
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "min_kbytes, max_kbytes",
        ),
        ({"nxos_roce_qos_ecn_thresholds_by_speed": {}}, "nxos_roce_qos_ecn_thresholds_by_speed", "non-empty"),
        ({"nxos_roce_qos_queuing_policy": "Q" * 36}, "nxos_roce_qos_queuing_policy", "at most 35"),
    ],
)
def test_speed_table_and_port_speeds_are_checked(changes, var, text):
    found = problems(**{"nxos_roce_qos_ecn_thresholds_by_speed": TABLE, "nxos_roce_qos_port_speed": 100000, **changes})
    assert [p["var"] for p in found] == [var], found
    assert text in found[0]["msg"], found


def test_ports_get_the_queuing_policy_of_their_speed():
    ports = [
        {"name": "Ethernet1/1"},
        {"name": "Ethernet1/2", "speed": 10000},
        {"name": "Ethernet1/3", "speed": "100000"},
    ]
    # Table keys as strings too (a table passed through -e JSON has string keys).
    table = {"10000": TABLE[10000], 100000: TABLE[100000]}
    planned = filters.nxos_roce_qos_speed_policies(ports, table, 100000, "ROCE_QUEUING")
    assert planned == {
        "policies": [
            {"name": "ROCE_QUEUING_10G", "speed": 10000, "min_kbytes": 15, "max_kbytes": 300},
            {"name": "ROCE_QUEUING_100G", "speed": 100000, "min_kbytes": 150, "max_kbytes": 3000},
        ],
        "ports": {
            "Ethernet1/1": "ROCE_QUEUING_100G",
            "Ethernet1/2": "ROCE_QUEUING_10G",
            "Ethernet1/3": "ROCE_QUEUING_100G",
        },
    }
    assert filters.speed_label(1000) == "1G" and filters.speed_label(400000) == "400G"
