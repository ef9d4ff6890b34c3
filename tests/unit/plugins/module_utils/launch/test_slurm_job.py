"""The Slurm engine's commands on the submit host (plugins/module_utils/launch/slurm_job.py) against a stand-in
Slurm that answers with recorded records: cancel, submit, accounting, the records kept beside the logs.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as J

from tests.unit.plugins.module_utils.launch.slurm_samples import fixture

pytestmark = pytest.mark.lint


class FakeSlurm:
    """sbatch/scontrol/scancel on the submit host: the job's state follows a script of recorded records."""

    def __init__(self, states: list[str]):
        self.states, self.calls = list(states), []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(" ".join(argv))
        if argv[0] == "scontrol":
            name = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return 0, fixture(f"scontrol_show_job_{name}.txt"), ""
        return 0, "", ""


def test_cancel_sends_sigterm_then_scancel_after_the_grace() -> None:
    run = FakeSlurm(["running"] * 5 + ["cancelled"])
    got = J.cancel(run, "3", grace=2, kill_wait=5, sleep=lambda s: None)
    assert got == {"changed": True, "state": "CANCELLED", "steps": ["scancel --signal=TERM", "scancel after 2 s"]}
    assert [c for c in run.calls if c.startswith("scancel")] == ["scancel --signal=TERM 3", "scancel 3"]


def test_cancel_after_the_payload_stopped_by_itself_sends_nothing_more() -> None:
    run = FakeSlurm(["running", "running", "cancelled"])
    got = J.cancel(run, "3", grace=30, kill_wait=5, sleep=lambda s: None)
    assert got["steps"] == ["scancel --signal=TERM"] and got["state"] == "CANCELLED"


def test_cancel_of_a_pending_job_and_of_an_ended_one() -> None:
    run = FakeSlurm(["pending", "cancelled"])
    assert J.cancel(run, "7", grace=30, sleep=lambda s: None)["steps"] == ["scancel (pending)"]
    run = FakeSlurm(["completed"])
    assert J.cancel(run, "7", grace=30, sleep=lambda s: None) == {"changed": False, "state": "COMPLETED", "steps": []}
    assert not [c for c in run.calls if c.startswith("scancel")]
    run = FakeSlurm(["invalid"])
    assert J.cancel(run, "7", grace=30, sleep=lambda s: None)["state"] == "gone"


def test_submit_returns_the_job_id_or_sbatchs_own_words() -> None:
    assert J.submit(lambda argv: (0, "12\n", ""), "/r/b.sh") == {"job_id": "12", "stdout": "12"}
    refusal = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    with pytest.raises(RuleError, match="sbatch refused the job: " + refusal):
        J.submit(lambda argv: (1, "", refusal + "\n"), "/r/b.sh")


class FakeAccounting:
    """scontrol and sacct on the submit host: scontrol answers one recorded record, sacct a script of recorded
    outputs (the last one repeats); rc 1 for sacct where `sacct_rc` says so (accounting off)."""

    def __init__(self, job: str, sacct: list[str], sacct_rc: int = 0):
        self.job, self.sacct, self.sacct_rc, self.calls = job, list(sacct), sacct_rc, []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv[0])
        if argv[0] == "scontrol":
            return 0, fixture(f"scontrol_show_job_{self.job}.txt"), ""
        if self.sacct_rc:
            return self.sacct_rc, "", "sacct: error: Problem talking to the database: Connection refused\n"
        name = self.sacct.pop(0) if len(self.sacct) > 1 else self.sacct[0]
        return 0, fixture(f"sacct_{name}.txt"), ""


def test_accounting_of_an_ended_job_waits_until_slurmdbd_shows_its_end() -> None:
    run, slept = FakeAccounting("completed", ["running", "running", "completed"]), []
    got = J.accounting(run, "7", "COMPLETED", wait=10, sleep=slept.append)
    assert got == fixture("sacct_completed.txt") and len(slept) == 2
    assert got.splitlines()[1].split("|")[2] == "COMPLETED"


def test_accounting_reads_an_active_job_once_and_gives_up_waiting_after_wait() -> None:
    run, slept = FakeAccounting("running", ["running"]), []
    assert J.accounting(run, "7", "RUNNING", wait=10, sleep=slept.append) == fixture("sacct_running.txt")
    assert slept == [] and run.calls == ["sacct"]
    run = FakeAccounting("completed", ["running"])
    assert J.accounting(run, "7", "COMPLETED", wait=3, sleep=slept.append) == fixture("sacct_running.txt")
    assert len(slept) == 2 and run.calls == ["sacct"] * 3


def test_accounting_is_empty_where_slurm_keeps_none() -> None:
    assert J.accounting(FakeAccounting("completed", ["completed"], sacct_rc=1), "7", "", sleep=lambda s: None) == ""


def test_record_writes_the_job_and_its_accounting_beside_the_logs(tmp_path) -> None:
    got = J.record(FakeAccounting("completed", ["completed"]), "7", str(tmp_path), sleep=lambda s: None)
    assert got == {"saved": True, "accounted": True}
    assert (tmp_path / "slurm-job-7.show").read_text().startswith("JobId=7 ")
    assert (tmp_path / "slurm-job-7.sacct").read_text() == fixture("sacct_completed.txt").strip() + "\n"
    # Slurm forgot the job (MinJobAge) and keeps no accounting: nothing to write.
    forgot = FakeAccounting("invalid", ["completed"], sacct_rc=1)
    assert J.record(forgot, "7", str(tmp_path / "none"), sleep=lambda s: None) == {"saved": False, "accounted": False}
