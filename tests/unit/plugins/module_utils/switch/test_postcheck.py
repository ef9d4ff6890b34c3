"""The post-check (module_utils/switch/postcheck.py) on what lab.nxos_emu shows after the plan was typed in.

The switch is converged in-process to a golden intent; `show running-config` and `show interface
priority-flow-control` come from an emulator session, as the role's action reads them, and are read
through the diff engine's parser. Each check is then broken by one config line on the switch.
"""

from __future__ import annotations

import copy

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import plan as engine
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import postcheck as post

from lab.nxos_emu.device import Device, DeviceInfo
from tests.switch.conftest import FIXTURES

pytestmark = pytest.mark.switch

PORT = {"name": "Ethernet1/1"}
# What roles/nxos_roce_qos/vars/main.yml hands the post-check for the lab (golden-default.cfg).
EXPECTED = {
    "profile": "dcqcn",
    "marking_policy": "ROCE_QOS_MARKING",
    "network_policy": "ROCE_NETWORK_QOS",
    "queuing_policy": "ROCE_QUEUING",
    "roce_class": "ROCE",
    "cnp_class": "CNP",
    "roce_dscp": [26],
    "cnp_dscp": 48,
    "nodrop_cos": 3,
    "cnp_qos_group": 7,
    "mtu": 9216,
    "network_class": "c-8q-nq3",
    "roce_queue": "c-out-8q-q3",
    "cnp_queue": "c-out-8q-q7",
    "interfaces": [{"name": "Ethernet1/1"}, {"name": "Ethernet1/2"}],
    "port_speed": 100000,
    "speed_policies": [{"name": "ROCE_QUEUING_100G", "speed": 100000, "min_kbytes": 150, "max_kbytes": 3000}],
    "port_queuing": {"Ethernet1/1": "ROCE_QUEUING_100G", "Ethernet1/2": "ROCE_QUEUING_100G"},
    "pfc_watchdog": True,
    "pfc_watchdog_per_port": True,
    "pfc_mode": "on",
    "default_qos_group": 0,
    "tcp": {"class": "FABRIC_TCP", "dscp": 10, "qos_group": 1, "queue": "c-out-8q-q1", "network_class": "c-8q-nq1"},
    "pause_buffer": None,
}
PFC_ONLY = {**EXPECTED, "profile": "pfc_only", "speed_policies": [], "port_queuing": {}}


def switch(golden: str, *extra: str) -> Device:
    """An emulated switch converged to the golden intent, then changed by `extra` config lines."""
    dev = Device(DeviceInfo(hostname="leaf1"))
    dev.boot(None)
    intent = (FIXTURES / golden).read_text()
    commands = engine.plan(dev.body_text(dev.running), intent, "ROCE_QOS_MARKING", "ROCE_QUEUING")["commands"]
    cli = dev.new_session()
    for line in ["configure terminal", *commands, *extra, "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
    return dev


def check(dev: Device, expected: dict) -> dict:
    cli = dev.new_session()
    running = "\n".join(cli.handle("show running-config"))
    pfc = "\n".join(cli.handle("show interface priority-flow-control"))
    return post.nxos_roce_qos_postcheck(running, pfc, expected)


def test_a_converged_switch_passes_every_check():
    result = check(switch("golden-default.cfg"), EXPECTED)
    assert result["passed"] and result["failed"] == [], result
    names = {c["name"] for c in result["checks"]}
    assert {"roce_queue_ecn", "tcp_classification", "tcp_queue_lossy", "speed_policy ROCE_QUEUING_100G"} <= names
    assert {"interface_config Ethernet1/2", "interface_pfc_oper Ethernet1/2"} <= names


def test_pfc_only_passes_without_ecn():
    result = check(switch("golden-pfc-only.cfg"), PFC_ONLY)
    assert result["passed"], result
    assert "roce_queue_no_ecn" in {c["name"] for c in result["checks"]}


BREAKS = {
    # (golden, expected, lines typed after the push, the check that must fail)
    "ecn-gone": (
        "golden-default.cfg",
        EXPECTED,
        ["policy-map type queuing ROCE_QUEUING", "class type queuing c-out-8q-q3", "no random-detect"],
        "roce_queue_ecn",
    ),
    "ecn-in-pfc-only": (
        "golden-pfc-only.cfg",
        PFC_ONLY,
        [
            "policy-map type queuing ROCE_QUEUING",
            "class type queuing c-out-8q-q3",
            "random-detect minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn",
        ],
        "roce_queue_no_ecn",
    ),
    "pfc-only-port-keeps-an-ecn-policy": (
        "golden-pfc-only.cfg",
        PFC_ONLY,
        [
            "policy-map type queuing EXTRA",
            "class type queuing c-out-8q-q3",
            "bandwidth remaining percent 50",
            "interface Ethernet1/2",
            "service-policy type queuing output EXTRA",
        ],
        "interface_config Ethernet1/2",
    ),
    "tcp-dscp": (
        "golden-default.cfg",
        EXPECTED,
        ["class-map type qos match-any FABRIC_TCP", "match dscp 12"],
        "tcp_classification",
    ),
    "tcp-not-marked": (
        "golden-default.cfg",
        EXPECTED,
        ["policy-map type qos ROCE_QOS_MARKING", "class FABRIC_TCP", "no set qos-group"],
        "marking_policy",
    ),
    "tcp-made-lossless": (
        "golden-default.cfg",
        EXPECTED,
        ["policy-map type network-qos ROCE_NETWORK_QOS", "class type network-qos c-8q-nq1", "pause pfc-cos 1"],
        "tcp_queue_lossy",
    ),
    "tcp-without-share": (
        "golden-default.cfg",
        EXPECTED,
        ["policy-map type queuing ROCE_QUEUING", "class type queuing c-out-8q-q1", "bandwidth remaining percent 0"],
        "tcp_queue_lossy",
    ),
}


@pytest.mark.parametrize(("golden", "expected", "lines", "failed"), BREAKS.values(), ids=BREAKS.keys())
def test_one_broken_line_fails_its_check(golden, expected, lines, failed):
    result = check(switch(golden, *lines), expected)
    assert not result["passed"] and result["failed"] == [failed], result


def test_headroom_is_checked_when_the_role_sets_it():
    expected = copy.deepcopy(EXPECTED)
    expected["pause_buffer"] = {"buffer_size": 101920, "pause_threshold": 46800, "resume_threshold": 34320}
    dev = switch("golden-default.cfg")
    assert check(dev, expected)["failed"] == ["nodrop_class"]
    line = "pause buffer-size 101920 pause-threshold 46800 resume-threshold 34320"
    cli = dev.new_session()
    cli.handle("configure terminal")
    for typed in ("policy-map type network-qos ROCE_NETWORK_QOS", "class type network-qos c-8q-nq3", line, "end"):
        assert cli.handle(typed) == []
    assert check(dev, expected)["passed"]


def test_the_post_check_reads_through_the_plans_parser(monkeypatch):
    """One NX-OS config parser: the post-check's tree is what nxos_roce_qos_plan.parse makes of the text."""
    seen = []
    monkeypatch.setattr(post, "parse", lambda text: seen.append(text) or engine.parse(text))
    assert check(switch("golden-default.cfg"), EXPECTED)["passed"]
    assert len(seen) == 1 and "system qos" in seen[0]


def test_a_factory_switch_fails_the_checks_without_an_error():
    """Check mode reports the post-check of an unconfigured switch: every check fails, none raises."""
    dev = Device(DeviceInfo(hostname="leaf1"))
    dev.boot(None)
    result = check(dev, EXPECTED)
    assert not result["passed"] and {"nodrop_class", "tcp_queue_lossy", "roce_queue_ecn"} <= set(result["failed"])
