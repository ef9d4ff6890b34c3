"""The nxos_roce_qos value rules (plugins/module_utils/switch/values.py), in-process.

Every value the role renders into the switch config is checked for what NX-OS accepts before any
connection; these cases are the injection payloads a description or a name could carry.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import postcheck as filters
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import values as rules

pytestmark = pytest.mark.switch


SOURCE = "a test row"
TABLE = {
    10000: {"min_kbytes": 15, "max_kbytes": 300, "source": SOURCE},
    100000: {"min_kbytes": 150, "max_kbytes": 3000, "source": SOURCE},
}
# Every variable the role renders, as its defaults hand them over with the lab's cluster_* values.
GOOD = {
    "nxos_roce_qos_profile": "dcqcn",
    "nxos_roce_qos_roce_dscp": [26],
    "nxos_roce_qos_cnp_dscp": 48,
    "nxos_roce_qos_nodrop_cos": 3,
    "nxos_roce_qos_cnp_qos_group": 7,
    "nxos_roce_qos_queue_scheme": "8q",
    "nxos_roce_qos_mtu": 9216,
    "nxos_roce_qos_roce_bandwidth_percent": 50,
    "nxos_roce_qos_default_bandwidth_percent": 25,
    "nxos_roce_qos_tcp_dscp": 10,
    "nxos_roce_qos_tcp_qos_group": 1,
    "nxos_roce_qos_tcp_bandwidth_percent": 25,
    "nxos_roce_qos_tcp_lossless": False,
    "nxos_roce_qos_ecn_min_threshold_kbytes": 150,
    "nxos_roce_qos_ecn_max_threshold_kbytes": 3000,
    "nxos_roce_qos_ecn_drop_probability": 7,
    "nxos_roce_qos_ecn_weight": 0,
    "nxos_roce_qos_ecn_thresholds_by_speed": TABLE,
    "nxos_roce_qos_port_speed": 100000,
    "nxos_roce_qos_roce_class": "ROCE",
    "nxos_roce_qos_cnp_class": "CNP",
    "nxos_roce_qos_tcp_class": "FABRIC_TCP",
    "nxos_roce_qos_marking_policy": "ROCE_QOS_MARKING",
    "nxos_roce_qos_network_policy": "ROCE_NETWORK_QOS",
    "nxos_roce_qos_queuing_policy": "ROCE_QUEUING",
    "nxos_roce_qos_checkpoint_file": "bootflash:nxos_roce_qos.ckpt",
    "nxos_roce_qos_class_match": "match-any",
    "nxos_roce_qos_pfc_mode": "on",
    "nxos_roce_qos_default_qos_group": 0,
    "nxos_roce_qos_pfc_cable_length_m": 100,
    "nxos_roce_qos_pfc_pause_buffer": None,
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
    "run-of-spaces": "node1  port 0",
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
            {
                "nxos_roce_qos_ecn_thresholds_by_speed": {
                    **TABLE,
                    25000: {"min_kbytes": 800, "max_kbytes": 700, "source": SOURCE},
                }
            },
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "min <= max",
        ),
        # Every row says where its numbers come from (rendered into a config comment, so checked as text).
        (
            {"nxos_roce_qos_ecn_thresholds_by_speed": {**TABLE, 25000: {"min_kbytes": 38, "max_kbytes": 750}}},
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "min_kbytes, max_kbytes, source",
        ),
        (
            {
                "nxos_roce_qos_ecn_thresholds_by_speed": {
                    **TABLE,
                    25000: {"min_kbytes": 38, "max_kbytes": 750, "source": ""},
                }
            },
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "25000: source (where the numbers come from; say so when none exists) is empty",
        ),
        (
            {
                "nxos_roce_qos_ecn_thresholds_by_speed": {
                    **TABLE,
                    25000: {"min_kbytes": 38, "max_kbytes": 750, "source": "mine\nno system qos"},
                }
            },
            "nxos_roce_qos_ecn_thresholds_by_speed",
            "contains a line break",
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
    assert [p.pop("source") for p in planned["policies"]] == [SOURCE, SOURCE], "each policy keeps its row's source"
    assert planned == {
        "policies": [
            {"name": "ROCE_QUEUING_10G", "speed": 10000, "label": "10G", "min_kbytes": 15, "max_kbytes": 300},
            {"name": "ROCE_QUEUING_100G", "speed": 100000, "label": "100G", "min_kbytes": 150, "max_kbytes": 3000},
        ],
        "ports": {
            "Ethernet1/1": "ROCE_QUEUING_100G",
            "Ethernet1/2": "ROCE_QUEUING_10G",
            "Ethernet1/3": "ROCE_QUEUING_100G",
        },
    }
    assert filters.speed_label(1000) == "1G" and filters.speed_label(400000) == "400G"


@pytest.mark.parametrize("var", rules.REQUIRED)
def test_a_missing_value_is_an_error_naming_it(var):
    """No defaults here (they live in the role's defaults/main.yml only): what is missing is said."""
    found = rules.nxos_roce_qos_validate({k: v for k, v in GOOD.items() if k != var})
    assert [p["var"] for p in found] == [var], found
    assert found[0]["msg"].startswith(f"{var}: is not set"), found


def test_nullable_values_may_be_absent():
    values = {k: v for k, v in GOOD.items() if k not in rules.NULLABLE}
    assert rules.nxos_roce_qos_validate(values) == []


@pytest.mark.parametrize(
    ("changes", "var", "text"),
    [
        ({"nxos_roce_qos_profile": "dctcp"}, "nxos_roce_qos_profile", "one of ['dcqcn', 'pfc_only']"),
        # Fabric TCP needs its own DSCP and a lossy queue of the scheme.
        ({"nxos_roce_qos_tcp_dscp": 26}, "nxos_roce_qos_tcp_dscp", "other than the RoCE and CNP values"),
        ({"nxos_roce_qos_tcp_dscp": 48}, "nxos_roce_qos_tcp_dscp", "other than the RoCE and CNP values"),
        ({"nxos_roce_qos_tcp_qos_group": 3}, "nxos_roce_qos_tcp_qos_group", "other than the no-drop (3)"),
        ({"nxos_roce_qos_tcp_qos_group": 7}, "nxos_roce_qos_tcp_qos_group", "CNP (7) queues"),
        ({"nxos_roce_qos_tcp_qos_group": 0}, "nxos_roce_qos_tcp_qos_group", "a queue of the 8q scheme"),
        ({"nxos_roce_qos_tcp_lossless": "maybe"}, "nxos_roce_qos_tcp_lossless", "must be a boolean"),
        ({"nxos_roce_qos_tcp_class": "CNP"}, "nxos_roce_qos_tcp_class", "must differ from nxos_roce_qos_cnp_class"),
        (
            {"nxos_roce_qos_tcp_bandwidth_percent": 30},
            "nxos_roce_qos_roce_bandwidth_percent",
            "(1-100) + nxos_roce_qos_tcp_bandwidth_percent (1-100) + nxos_roce_qos_default_bandwidth_percent (0-100) "
            "must be at most 100, got 50 + 30 + 25",
        ),
        ({"nxos_roce_qos_tcp_bandwidth_percent": 0}, "nxos_roce_qos_roce_bandwidth_percent", "got 50 + 0 + 25"),
        # PFC headroom: mandatory beyond 100 m, ordered thresholds.
        ({"nxos_roce_qos_pfc_cable_length_m": 300}, "nxos_roce_qos_pfc_pause_buffer", "longer than 100 m"),
        ({"nxos_roce_qos_pfc_cable_length_m": 0}, "nxos_roce_qos_pfc_cable_length_m", "in meters (1-100000)"),
        (
            {"nxos_roce_qos_pfc_pause_buffer": {"buffer_size": 1000, "pause_threshold": 2000, "resume_threshold": 10}},
            "nxos_roce_qos_pfc_pause_buffer",
            "resume_threshold <= pause_threshold <= buffer_size",
        ),
        (
            {
                "nxos_roce_qos_pfc_pause_buffer": {
                    "buffer_size": "1000\nno system qos",
                    "pause_threshold": 2,
                    "resume_threshold": 1,
                }
            },
            "nxos_roce_qos_pfc_pause_buffer",
            "bytes 1-16777216",
        ),
        (
            {"nxos_roce_qos_pfc_pause_buffer": {"buffer_size": 1000}},
            "nxos_roce_qos_pfc_pause_buffer",
            "must be null or {buffer_size, pause_threshold, resume_threshold}",
        ),
    ],
)
def test_profile_tcp_class_and_headroom_are_checked(changes, var, text):
    found = problems(**changes)
    assert [p["var"] for p in found] == [var], found
    assert text in found[0]["msg"], found


def test_tcp_values_are_not_rendered_and_not_checked_when_tcp_shares_the_lossless_class():
    """cluster_tcp_lossless: the hosts mark TCP with the RoCE DSCP; the switch has no TCP class."""
    assert (
        problems(
            nxos_roce_qos_tcp_lossless=True,
            nxos_roce_qos_tcp_dscp=26,
            nxos_roce_qos_tcp_qos_group=3,
            nxos_roce_qos_tcp_class="ROCE",
            nxos_roce_qos_default_bandwidth_percent=50,
        )
        == []
    )


def test_a_long_cable_with_its_pause_buffer_passes():
    buffer = {"buffer_size": 101920, "pause_threshold": 46800, "resume_threshold": 34320}
    assert problems(nxos_roce_qos_pfc_cable_length_m=300, nxos_roce_qos_pfc_pause_buffer=buffer) == []


def test_an_ecn_threshold_without_a_row_for_the_port_speed_says_where_its_default_comes_from():
    found = problems(nxos_roce_qos_ecn_min_threshold_kbytes=None)
    assert found[0]["msg"].startswith("nxos_roce_qos_ecn_min_threshold_kbytes: is not set (its default is the")


EMPTY_PORTS = (
    "nxos_roce_qos_interfaces: is empty (nxos_roce_qos_host_interfaces and nxos_roce_qos_uplink_interfaces): the run "
    "would configure no RoCE port and take the role's policy off every port that has it; list the switch's RoCE ports "
    "in nxos_roce_qos_host_interfaces / nxos_roce_qos_uplink_interfaces (its host_vars), or name the ports meant to "
    "lose the policy in nxos_roce_qos_release_interfaces"
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"nxos_roce_qos_interfaces": []}, [EMPTY_PORTS]),
        ({"nxos_roce_qos_interfaces": [], "nxos_roce_qos_release_interfaces": []}, [EMPTY_PORTS]),
        ({"nxos_roce_qos_interfaces": [], "nxos_roce_qos_release_interfaces": None}, [EMPTY_PORTS]),
        (
            {"nxos_roce_qos_release_interfaces": ["eth1/3"]},
            [
                "nxos_roce_qos_release_interfaces: must name interfaces as NX-OS prints them (Ethernet1/1 or "
                "Ethernet1/1/2), got 'eth1/3'"
            ],
        ),
        (
            {"nxos_roce_qos_release_interfaces": ["Ethernet1/3\nno system qos"]},
            [
                "nxos_roce_qos_release_interfaces: must name interfaces as NX-OS prints them (Ethernet1/1 or "
                "Ethernet1/1/2), got 'Ethernet1/3\\nno system qos'"
            ],
        ),
        (
            {"nxos_roce_qos_release_interfaces": ["Ethernet1/1/2"]},
            [
                "nxos_roce_qos_release_interfaces: Ethernet1/1/2 is also a RoCE port (nxos_roce_qos_interfaces): a "
                "port is configured or released, not both"
            ],
        ),
        (
            {"nxos_roce_qos_release_interfaces": ["Ethernet1/3", "Ethernet1/3"]},
            ["nxos_roce_qos_release_interfaces: Ethernet1/3 is listed twice"],
        ),
        (
            {"nxos_roce_qos_release_interfaces": "Ethernet1/3"},
            ["nxos_roce_qos_release_interfaces: must be a list of interface names, got 'Ethernet1/3'"],
        ),
    ],
)
def test_port_lists_that_would_strip_ports_unasked_are_refused(changes, expected):
    assert [p["msg"] for p in problems(**changes)] == expected


def test_ports_meant_to_lose_the_policy_pass():
    """Released ports beside the RoCE ports, or instead of them (the switch leaves the fabric)."""
    assert problems(nxos_roce_qos_release_interfaces=["Ethernet1/3", "Ethernet1/1/4"]) == []
    assert problems(nxos_roce_qos_interfaces=[], nxos_roce_qos_release_interfaces=["Ethernet1/1"]) == []
