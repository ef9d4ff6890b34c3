"""The diff engine (module_utils/nxos_roce_qos_plan.py) against the emulator, in-process.

From several starting configs (factory, the field switch, the role's previous output, a config with
stale lines) the planned commands, typed into lab.nxos_emu as `nxos_config` sends them, take every
managed block to exactly the intent: the next plan is empty and the managed blocks are byte-identical
to the golden converged view. Lines outside the managed blocks are untouched.
"""

from __future__ import annotations

import os

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils import nxos_roce_qos_plan as engine

from lab.nxos_emu.device import Device, DeviceInfo
from tests.switch.conftest import FIELD_CONFIG, FIXTURES

pytestmark = pytest.mark.switch


DEFAULT_INTENT = (FIXTURES / "golden-default.cfg").read_text()
FIELD_INTENT = (FIXTURES / "golden-example.cfg").read_text()


def _golden(name: str, text: str) -> None:
    path = FIXTURES / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"converged managed blocks differ from {path} (UPDATE_GOLDEN=1 rewrites it)"


def converge(
    start: str | None, intent: str, marking: str, hostname: str = "leaf1", queuing: str | None = None
) -> tuple[Device, list[str]]:
    dev = Device(DeviceInfo(hostname=hostname))
    dev.boot(start)
    commands = engine.plan(dev.body_text(dev.running), intent, marking, queuing)["commands"]
    cli = dev.new_session()
    for line in ["configure terminal", *commands, "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
    return dev, commands


STARTS = {
    "factory": None,
    "role-v1": (FIXTURES / "start-role-v1.cfg").read_text(),
    "stale": (FIXTURES / "start-stale.cfg").read_text(),
    # The role before per-speed ECN thresholds: one queuing policy under system qos, none per port.
    "role-v2": (FIXTURES / "start-role-v2.cfg").read_text(),
    # A port on another speed's policy, an unused per-speed policy of the role, a foreign policy.
    "speeds": (FIXTURES / "start-speeds.cfg").read_text(),
    "converged": DEFAULT_INTENT,
}


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_every_start_converges_to_the_golden_blocks(start):
    dev, commands = converge(start, DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    again = engine.plan(dev.body_text(dev.running), DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert again["commands"] == [], "a second plan after the push is empty"
    assert again["before"] == again["after"]
    _golden("converged-default.cfg", again["before"])
    if start == DEFAULT_INTENT:
        assert commands == []


def test_stale_lines_are_removed_and_foreign_lines_kept():
    dev, commands = converge(STARTS["stale"], DEFAULT_INTENT, "ROCE_QOS_MARKING")
    # Each stale line inside a managed block goes with its `no` form.
    for line in (
        "no match dscp 24",
        "no class OTHER",
        "no class type network-qos c-8q-nq4",
        "no random-detect minimum-threshold 100 kbytes maximum-threshold 2000 kbytes drop-probability 5 weight 0 ecn",
        "no priority-flow-control mode on",  # Ethernet1/3 left the port list
        "no service-policy type qos input ROCE_QOS_MARKING",
    ):
        assert line in commands, line
    # Replaced values are sent once, without a `no` (NX-OS replaces them in place).
    assert "bandwidth remaining percent 50" in commands and "no bandwidth remaining percent 60" not in commands
    running = dev.body_text(dev.running)
    assert "class-map type qos match-any ROCE\n  match dscp 26\nclass-map" in running
    assert "class-map type qos match-all OTHER\n  match dscp 10\n" in running, "a foreign class-map stays"
    assert "feature lldp" in running
    assert (
        "interface Ethernet1/1\n  description rack A node 1\n  priority-flow-control mode on\n"
        "  priority-flow-control watch-dog-interval on\n  mtu 9216\n"
        "  service-policy type queuing output ROCE_QUEUING_100G\n"
        "  service-policy type qos input ROCE_QOS_MARKING\n  shutdown\n" in running
    ), "user lines of a managed port (description, shutdown) stay"
    assert "interface Ethernet1/3\n  description was a RoCE port\n  mtu 9216\n\n" in running


def test_field_config_converges_in_place():
    dev, commands = converge(FIELD_CONFIG.read_text(), FIELD_INTENT, "QOS_MARKING", hostname="field-leaf1")
    nq = commands.index("policy-map type network-qos QOS_NETWORK")
    assert commands[nq + 1 : nq + 3] == ["class type network-qos c-nq3", "mtu 9216"]
    again = engine.plan(dev.body_text(dev.running), FIELD_INTENT, "QOS_MARKING")
    assert again["commands"] == []
    _golden("converged-field.cfg", again["before"])


def test_diff_shows_before_and_after_of_the_managed_blocks():
    planned = engine.plan(FIELD_CONFIG.read_text(), FIELD_INTENT, "QOS_MARKING")
    diff = planned["unified_diff"]
    assert diff.startswith("--- running-config\n+++ intended\n")
    assert "-    mtu 2240\n" in diff and "+    mtu 9216\n" in diff
    assert "-class-map type qos match-all RDMA\n" in diff and "+class-map type qos match-any CNP\n" in diff
    assert "hostname" not in diff and "feature lldp" not in diff and "mgmt0" not in diff


def test_match_type_change_recreates_the_class_maps():
    """role-v1 rendered match-all; NX-OS cannot change a class-map's type in place."""
    dev, commands = converge(STARTS["role-v1"], DEFAULT_INTENT, "ROCE_QOS_MARKING")
    assert commands[:5] == [
        "policy-map type qos ROCE_QOS_MARKING",
        "no class ROCE",
        "no class-map type qos match-all ROCE",
        "policy-map type qos ROCE_QOS_MARKING",
        "no class CNP",
    ]
    running = dev.body_text(dev.running)
    assert "match-all" not in running
    assert "  class ROCE\n    set qos-group 3\n  class CNP\n    set qos-group 7\n  class class-default\n" in running


def test_ports_move_to_the_policy_of_their_speed_and_unused_speed_policies_go():
    dev, commands = converge(STARTS["speeds"], DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    # Ethernet1/2 is re-pointed in place (no `no` line, the port keeps an egress policy throughout),
    # then the role's policies no port uses are deleted, after the port left them.
    port = commands.index("interface Ethernet1/2")
    assert commands[port + 1] == "service-policy type queuing output ROCE_QUEUING_100G"
    assert commands[-2:] == [
        "no policy-map type queuing ROCE_QUEUING_25G",
        "no policy-map type queuing ROCE_QUEUING_40G",
    ]
    running = dev.body_text(dev.running)
    assert "policy-map type queuing OTHER_QUEUING_25G\n" in running, "a foreign policy stays"
    assert "ROCE_QUEUING_25G" not in running and "ROCE_QUEUING_40G" not in running
    planned = engine.plan(STARTS["speeds"], DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert "-policy-map type queuing ROCE_QUEUING_40G\n" in planned["unified_diff"]
    assert "-  service-policy type queuing output ROCE_QUEUING_25G\n" in planned["unified_diff"]


def test_role_v2_gains_a_queuing_policy_per_speed_without_touching_the_system_one():
    _dev, commands = converge(STARTS["role-v2"], DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert "policy-map type queuing ROCE_QUEUING_100G" in commands
    assert "policy-map type queuing ROCE_QUEUING" not in commands, "the system-wide policy is unchanged"
    assert commands.count("service-policy type queuing output ROCE_QUEUING_100G") == 2
    assert not [c for c in commands if c.startswith("no ")], commands
