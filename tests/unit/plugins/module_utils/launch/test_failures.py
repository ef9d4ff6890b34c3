"""torchrun's worker failures read from its log (plugins/module_utils/launch/failures.py): the payload's own error
line, the log time's year, and a rebooted host as the cause of a restart (recorded in the lab)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import failures as W

from tests.conftest import ROOT


def test_worker_failure_carries_the_payloads_own_error_line() -> None:
    failed = "E1122 20:00:0{} 9 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: {}) of binary: /venv/bin/python"
    text = "\n".join(
        [
            "[rank1]: error: saving checkpoint /r/out/checkpoints/step_0000020 failed: the disk is full: free space",
            failed.format(1, 5),
            "Traceback (most recent call last):",
            failed.format(9, 6),  # a later failure with no error line of its own
        ]
    )
    first, second = W.worker_failures(text)
    assert first["error"].endswith("failed: the disk is full: free space") and second["error"] is None
    assert W.first_failure([{**second, "time": 1.0}, {**first, "time": 2.0}])["pid"] == 5


def test_log_time_takes_the_year_nearest_the_run() -> None:
    assert W.log_time("1231", "23:59:59.5", 1798761600.0) == pytest.approx(1798761599.5)  # 2027-01-01 00:00 UTC
    assert W.log_time(None, None, 1798761600.0) is None


def test_a_rebooted_host_is_the_cause_of_the_restart_not_the_survivor() -> None:
    """Recorded in the lab (tests/test_lab_4_faults.py, lab-node2's container stopped and started mid-run with
    max_restarts=1; tests/fixtures/train_launch/README.md): the rebooted host's torchrun logged its death signal,
    the rejoin unit its boot; the survivor's worker exited 143 (the payload's stop on the peer's SIGTERM) 1.5 s
    later."""
    logs = ROOT / "tests" / "fixtures" / "train_launch"
    near = 1795802482.0
    rebooted = W.worker_failures((logs / "torchrun_rebooted_node.log").read_text(), near)
    assert rebooted == [
        {
            "local_rank": None,
            "pid": 5381,
            "code": -15,
            "text": "restarted: torchrun got SIGTERM as the host went down, and rejoined at its boot "
            "(2026-11-27T18:01:53Z)",
            "time": pytest.approx(1795802510.663),
            "error": None,
        }
    ]
    survivor = W.worker_failures((logs / "torchrun_survivor.log").read_text(), near)
    assert [(f["local_rank"], f["code"], f["text"]) for f in survivor] == [(0, 143, "local rank 0 exit code 143")]
    both = [{**rebooted[0], "host": "lab-node2"}, {**survivor[0], "host": "lab-node1"}]
    assert W.first_failure(both[::-1])["host"] == "lab-node2"
    # Without the rejoin line (a unit stopped by hand, a host that did not come back): the signal alone.
    text = (logs / "torchrun_rebooted_node.log").read_text().replace("=== rejoin", "=== something else")
    assert (
        W.worker_failures(text, near)[0]["text"] == "torchrun got SIGTERM (its host shutting down, or its unit stopped)"
    )
