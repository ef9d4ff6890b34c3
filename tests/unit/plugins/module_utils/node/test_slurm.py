"""Slurm's health check and prolog (plugins/module_utils/node/slurm.py) on recorded `scontrol show node` lines
(tests/fixtures/slurm/)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.slurm import (
    parse_scontrol_node,
    slurm_action,
    slurm_apply,
)

from tests.unit.plugins.module_utils.node.helpers import SLURM, FakeTools

# ------------------------------------------------------------------------------------ Slurm's health check


def scontrol(name: str, reason: str | None = None) -> str:
    """A recorded `scontrol show node -o` line (tests/fixtures/slurm/README.md), its reason changed where given."""
    line = (SLURM / name).read_text()
    return line if reason is None else line.replace("Reason=maintenance by hand", f"Reason={reason}")


def test_scontrol_node_lines_as_slurm_prints_them() -> None:
    assert parse_scontrol_node(scontrol("scontrol_show_node_idle.txt")) == {
        "state": "IDLE", "reason": "", "reason_set": None}  # fmt: skip
    drained = parse_scontrol_node(scontrol("scontrol_show_node_drain.txt"))
    assert drained == {"state": "IDLE+DRAIN+NOT_RESPONDING", "reason": "maintenance by hand",
                       "reason_set": "root@2026-11-26T11:48:04"}  # fmt: skip
    ours = parse_scontrol_node(scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: MTU 1500 (x)"))
    assert ours["reason"] == "rdma-node-check: rdma0: MTU 1500 (x)"


FAIL = {"status": "fail", "reason": "rdma0: MTU 1500 (configured 9000)"}
PASS = {"status": "pass", "reason": "12 checks passed"}
DRAIN = ("drain", "rdma-node-check: rdma0: MTU 1500 (configured 9000)")


@pytest.mark.parametrize(
    ("result", "line", "want"),
    [
        (FAIL, scontrol("scontrol_show_node_idle.txt"), DRAIN),
        (PASS, scontrol("scontrol_show_node_idle.txt"), None),
        # Drained by the check: the same reason stays, a new one replaces it, a pass (or a warning) resumes.
        (FAIL, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: MTU 1500 (configured 9000)"), None),
        (FAIL, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: link down"), DRAIN),
        (PASS, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: link down"),
         ("resume", "passes again (pass: 12 checks passed)")),
        ({"status": "warn", "reason": "x"}, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: y"),
         ("resume", "passes again (warn: x)")),
        # An operator's drain, or a node slurmctld holds down: theirs, whatever the check says.
        (FAIL, scontrol("scontrol_show_node_drain.txt"), None),
        (PASS, scontrol("scontrol_show_node_drain.txt"), None),
        (FAIL, scontrol("scontrol_show_node_down.txt"), None),
        # The check could not run (exit 3): nothing.
        ({"status": "error", "reason": "config: ..."}, scontrol("scontrol_show_node_idle.txt"), None),
    ],
)  # fmt: skip
def test_slurm_drains_on_fail_and_resumes_only_its_own_drain(result, line, want) -> None:
    assert slurm_action(result, parse_scontrol_node(line)) == want


def test_slurm_apply_runs_scontrol() -> None:
    tools = FakeTools({"scontrol show": scontrol("scontrol_show_node_idle.txt"), "scontrol update": ""})
    assert slurm_apply(tools, "mol-slurm-1", FAIL) == (
        "slurm: drained mol-slurm-1: rdma-node-check: rdma0: MTU 1500 (configured 9000)"
    )
    assert tools.calls[-1] == ["scontrol", "update", "NodeName=mol-slurm-1", "State=DRAIN",
                               "Reason=rdma-node-check: rdma0: MTU 1500 (configured 9000)"]  # fmt: skip
    gone = FakeTools({"scontrol show": {"rc": 1, "out": "", "err": "Node mol-slurm-9 not found"}})
    assert slurm_apply(gone, "mol-slurm-9", FAIL) == "slurm: node mol-slurm-9 not read (Node mol-slurm-9 not found)"
    assert slurm_apply(FakeTools({}), "n1", FAIL) == "slurm: node n1 not read (scontrol not installed)"
