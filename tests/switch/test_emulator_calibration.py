"""lab.nxos_emu against the nxos_config mechanisms cisco.nxos tests on real switches.

tests/fixtures/nxos/calibration.yml rebuilds, with QoS lines, what the collection's nxos_config
integration tests assert on a device (sub- and multi-level lines idempotent, save_when modified and
always, diff against an intended config); the real module runs it against a fresh emulator.
"""

from __future__ import annotations

import pytest

from lab.cluster import switch_inventory
from tests.switch.conftest import run_playbook

pytestmark = pytest.mark.switch


def test_nxos_config_mechanisms_behave_as_on_a_switch(emulator, tmp_path):
    inventory = switch_inventory(
        tmp_path / "inventory", {"lab-switch": {"ansible_host": "127.0.0.1", "ansible_port": emulator.port}}
    )
    run = run_playbook(inventory, playbook="tests/fixtures/nxos/calibration.yml")
    assert run.rc == 0, run.explain()
    sent = [e["line"] for e in emulator.log()]
    # Each idempotent repeat read the config and sent nothing; each save is one copy.
    assert sent.count("configure terminal") == 2, sent
    assert sent.count("copy running-config startup-config") == 2, sent
    running = emulator.running()
    assert "class-map type qos match-any CAL\n  match dscp 26\n" in running
    assert "policy-map type qos CAL_POLICY\n  class CAL\n    set qos-group 3\n" in running
    assert emulator.startup() == running
