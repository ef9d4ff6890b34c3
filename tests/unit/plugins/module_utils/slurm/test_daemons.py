"""The daemons' answers (plugins/module_utils/slurm/daemons.py) on recorded scontrol output.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.daemons import node_ready, node_state, ping_up

from tests.unit.plugins.module_utils.slurm.samples import fixture

pytestmark = pytest.mark.lint


def test_recorded_node_states() -> None:
    idle = node_state(fixture("scontrol_show_node_idle.txt"))
    assert idle == {"state": "IDLE", "flags": [], "responding": True, "reason": ""}
    assert node_ready(idle) == (True, "IDLE")
    down = node_state(fixture("scontrol_show_node_down.txt"))
    assert down["state"] == "DOWN" and down["reason"] == "taken out for a test [root@2026-11-26T11:48:04]"
    assert node_ready(down) == (
        False,
        "slurmctld holds the node DOWN: taken out for a test [root@2026-11-26T11:48:04]",
    )
    drain = node_state(fixture("scontrol_show_node_drain.txt"))
    assert drain["flags"] == ["DRAIN", "NOT_RESPONDING"] and not drain["responding"]
    assert node_ready(drain) == (False, "slurmctld has not heard from this node")


def test_a_drain_someone_set_is_not_a_failure() -> None:
    """Derived from the recorded drain line, once the node answered again (the NOT_RESPONDING flag gone)."""
    line = fixture("scontrol_show_node_drain.txt").replace("State=IDLE+DRAIN+NOT_RESPONDING", "State=IDLE+DRAIN")
    assert node_ready(node_state(line)) == (True, "IDLE")
    assert not node_state("State=IDLE* Reason=x")["responding"]  # sinfo's short form
    assert not node_state("State=UNKNOWN")["responding"]
    assert node_state("") == {"state": "", "flags": [], "responding": False, "reason": ""}


def test_ping() -> None:
    assert ping_up(fixture("scontrol_ping_up.txt"))
    assert not ping_up("Slurmctld(primary) at mol-slurm-ctl is DOWN\n")
