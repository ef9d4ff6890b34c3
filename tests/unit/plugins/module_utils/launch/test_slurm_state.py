"""What Slurm says of a launch's job and each node's share of it (plugins/module_utils/launch/slurm_state.py), on
recorded Slurm outputs: the records parsed, a share read as the systemd engine's unit properties, the watch's
poll of a Slurm share run by sh, the outcome of a Slurm job, and all of it while slurmctld cannot be reached.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import outcome as O
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import poll as P
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as J
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_state as Q

from tests.unit.plugins.module_utils.launch.slurm_samples import FIXTURES, fixture

pytestmark = pytest.mark.lint


def share(job_fixture: str, step: str = "") -> dict[str, str]:
    """A node's share as the watch reads it: its step record and `scontrol show job`."""
    return Q.share_props(f"@@step\n{step}@@job\n{fixture(job_fixture)}")


START = "host=lab-node1\nnode=mol-slurm-1\njob=3\nstart=1764162463.5\n"


# ------------------------------------------------------------------------------------------- what Slurm says


@pytest.mark.parametrize(
    ("sample", "state", "reason"),
    [
        ("scontrol_show_job_pending.txt", "PENDING", "Resources"),
        ("scontrol_show_job_running.txt", "RUNNING", "None"),
        ("scontrol_show_job_completed.txt", "COMPLETED", "None"),
        ("scontrol_show_job_cancelled.txt", "CANCELLED", "None"),
        ("scontrol_show_job_failed.txt", "FAILED", "NonZeroExitCode"),
        ("scontrol_show_job_timeout.txt", "TIMEOUT", "TimeLimit"),
        ("scontrol_show_job_requeued_held.txt", "PENDING", "launch_failed_requeued_held"),
    ],
)
def test_parse_job_reads_the_recorded_records(sample, state, reason) -> None:
    job = Q.parse_job(fixture(sample))
    assert (job["JobState"], job["Reason"]) == (state, reason)
    # Keys with `:` and `/` are keys, and a value runs to the next key.
    assert job["AllocNode:Sid"].startswith("mol-slurm-ctl:") and job["CPUs/Task"] == "1"
    assert job["Partition"] == "train" and job["StdIn"] == "/dev/null"


def test_a_forgotten_job_is_no_record() -> None:
    assert Q.parse_job(fixture("scontrol_show_job_invalid.txt")) == {}
    assert Q.parse_job("") == {}


def test_a_nodes_reason_keeps_its_words_to_the_end_of_the_line() -> None:
    node = Q.parse_fields(fixture("scontrol_show_node_drained_by_check.txt").strip())
    assert node["NodeName"] == "mol-slurm-2" and node["State"] == "IDLE+DRAIN"
    assert node["Reason"] == "rdma-node-check: test failure [root@2026-11-26T13:06:53]"


@pytest.mark.parametrize(("stdout", "job_id"), [("12\n", "12"), ("12;lab\n", "12"), ("sbatch: warning: x\n57\n", "57")])
def test_sbatch_job_id(stdout, job_id) -> None:
    assert Q.sbatch_job_id(stdout) == job_id


def test_sbatch_without_a_job_id_is_an_error() -> None:
    with pytest.raises(RuleError, match="sbatch did not print a job id: 'Submitted batch job'"):
        Q.sbatch_job_id("Submitted batch job")


def test_parse_queue() -> None:
    assert Q.parse_queue(fixture("squeue_name.txt")) == [
        {"id": "7", "state": "PENDING", "reason": "Resources", "start": "N/A", "nodes": ""},
        {"id": "6", "state": "RUNNING", "reason": "None", "start": "2026-11-26T13:09:16", "nodes": "mol-slurm-[1-2]"},
    ]


# ------------------------------------------------------------------------------------------- one node's share


@pytest.mark.parametrize(
    ("sample", "step", "state", "why"),
    [
        ("scontrol_show_job_pending.txt", "", "pending", ""),
        ("scontrol_show_job_running.txt", "", "running", ""),  # the step has not started on this node yet
        ("scontrol_show_job_running.txt", START, "running", ""),
        ("scontrol_show_job_completed.txt", START + "end=1764162480.1\nrc=0\nsignal=\n", "completed", ""),
        ("scontrol_show_job_cancelled.txt", START + "end=1764162459.0\nrc=143\nsignal=TERM\n", "stopped", ""),
        ("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=1\nsignal=\n", "failed", ""),
        (
            "scontrol_show_job_timeout.txt",
            START + "end=1764162692.0\nrc=143\nsignal=TERM\n",
            "failed",
            "Slurm job 8 reached its time limit (TIMEOUT)",
        ),
        (
            "scontrol_show_job_requeued_held.txt",
            "",
            "failed",
            "Slurm job 1 cannot start: PENDING (launch_failed_requeued_held), requeued after its launch failed "
            "(a node's prolog failed: see the nodes' drain reasons)",
        ),
        (
            "scontrol_show_job_cancelled.txt",
            START,
            "stopped",
            "Slurm job 4 ended CANCELLED before this node's step recorded its end (killed: SIGKILL after KillWait)",
        ),
        ("scontrol_show_job_invalid.txt", "", "missing", ""),
    ],
)
def test_share_state(sample, step, state, why) -> None:
    props = Q.share_props(f"@@step\n{step}@@job\n{fixture(sample)}")
    assert Q.share_state(props) == state
    assert props.get("Why", "") == why
    # The watch's outcome rules read both engines through one function.
    assert P.unit_state(props) == state


def test_a_share_reads_as_the_systemd_engines_unit_properties() -> None:
    props = share("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=1\nsignal=\n")
    assert props["Engine"] == "slurm" and props["JobId"] == "5" and props["ExitCode"] == "143:0"
    assert props["ExecMainStartTimestamp"] == "@1764162463.5" and props["ExecMainExitTimestamp"] == "@1764162544.0"
    assert (props["ExecMainCode"], props["ExecMainStatus"], props["Result"]) == ("exited", "1", "exit-code")
    assert O.systemd_time(props["ExecMainStartTimestamp"]) == 1764162463.5


def test_a_torchrun_ended_by_a_signal_reads_as_killed() -> None:
    props = share("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=137\nsignal=\n")
    assert (props["ExecMainCode"], props["ExecMainStatus"], props["Result"]) == ("killed", "9", "signal")
    assert Q.share_state(props) == "failed"


def test_the_poll_of_a_slurm_share_splits_as_the_systemd_one(tmp_path: Path) -> None:
    """poll_script's Slurm head run by sh with a stand-in scontrol that prints a recorded record: the watch's
    parse_poll gets the share, the link state, the metrics and the worker failures."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "out").mkdir()
    (run_dir / "logs" / "step-3.state").write_text(START)
    (run_dir / "out" / "metrics.jsonl").write_text('{"rank": 0, "step": 4, "loss": 3.5}\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        f"#!/bin/sh\ncat {shlex.quote(str(FIXTURES / 'scontrol_show_job_running.txt'))}\n"
    )
    (bin_dir / "scontrol").chmod(0o755)
    script = P.poll_script("train-run1", str(run_dir), "lo", "L1", "slurm", "3")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props, link, metrics, failures = P.parse_poll(out)
    assert props["JobId"] == "3" and props["ExecMainStartTimestamp"] == "@1764162463.5"
    assert P.unit_state(props) == "running"
    assert link == "unknown" and metrics == {"rank": 0, "step": 4, "loss": 3.5} and failures == []
    # Once Slurm forgot the job, the copy collect saved beside the logs answers.
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\n")
    (run_dir / "logs" / "slurm-job-3.show").write_text(fixture("scontrol_show_job_completed.txt"))
    with (run_dir / "logs" / "step-3.state").open("a") as f:
        f.write("end=1764162480.1\nrc=0\nsignal=\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props = P.parse_poll(out)[0]
    assert props["JobState"] == "COMPLETED" and P.unit_state(props) == "completed"


def test_the_queued_line() -> None:
    props = share("scontrol_show_job_pending.txt")
    assert Q.queued_line(42.4, props) == "[   42 s] queued: Slurm job 7 PENDING (Resources)"


# ------------------------------------------------------------------------------------------- the outcome


def test_a_job_waiting_in_the_queue_is_pending_not_running() -> None:
    props = share("scontrol_show_job_pending.txt")
    jobs = {h: {"state": "pending", "unit": props} for h in ("n1", "n2")}
    got = O.job_outcome(jobs, False, ["n1", "n2"])
    assert got["outcome"] == "pending"
    assert got["message"] == "Slurm job 7 waits in the queue (PENDING, Resources)"


def test_a_cancelled_slurm_job_says_scancel() -> None:
    props = share("scontrol_show_job_cancelled.txt", START + "end=1764162459.0\nrc=143\nsignal=TERM\n")
    jobs = {"n1": {"state": "stopped", "unit": props, "ended": 1764162459.0}, "n2": {"state": "running", "unit": {}}}
    got = O.job_outcome(jobs, False, ["n1", "n2"])
    assert got["outcome"] == "failed"
    assert "n1: its Slurm job was cancelled (train_stop.yml or scancel)" in got["message"]


def test_a_slurm_cause_is_the_message() -> None:
    props = share("scontrol_show_job_timeout.txt", START + "end=1764162692.0\nrc=143\nsignal=TERM\n")
    jobs = {"n1": {"state": "failed", "unit": props, "ended": 1764162692.0, "why": props["Why"]}}
    assert "Slurm job 8 reached its time limit (TIMEOUT)" in O.job_outcome(jobs, False, ["n1"])["message"]


# ------------------------------------------------------------------------------------------- slurmctld down
# A Slurm job while slurmctld cannot be reached (issue #46, item 5): every node's share reads as `unknown`, the
# outcome as `unknown: controller unreachable (<the tool's own words>)`, never failed or finished, and the submit
# host's commands (cancel, queue, nodes) refuse to guess.
#
# The tool outputs are Slurm's own strings, printed as `<call> error: <slurm_strerror(errno)>` by slurm_perror():
# - CONNECT: SchedMD slurm src/common/slurm_errno.c, SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR "Unable to contact
#   slurm controller (connect failure)", behind scontrol's and squeue's `slurm_perror("slurm_load_jobs error")`
#   (src/scontrol/info_job.c, src/squeue/squeue.c); printed so by squeue while the controller was down in
#   fls-bioinformatics-core/genomics PR #245 and ArjunaCluster/ArjunaUsers issue #92.
# - NODES: the same errno behind scontrol show nodes' `slurm_perror("slurm_load_node error")`
#   (src/scontrol/info_node.c).
# - TIMEOUT: slurm_errno.c SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT "Socket timed out on send/recv operation" (a controller
#   that accepts but does not answer; seen with squeue in mlr-org/batchtools issue #201).
# - AUTH: slurm_errno.c SLURM_PROTOCOL_AUTHENTICATION_ERROR "Protocol authentication error" (MUNGE down: the
#   controller is up but the answer cannot be read).
# - Invalid job id: the recorded tests/fixtures/slurm/scontrol_show_job_invalid.txt (a forgotten job, an answer).

CONNECT = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
NODES = "slurm_load_node error: Unable to contact slurm controller (connect failure)"
TIMEOUT = "slurm_load_jobs error: Socket timed out on send/recv operation"
AUTH = "slurm_load_jobs error: Protocol authentication error"
INVALID = fixture("scontrol_show_job_invalid.txt").strip()
DOWN = f"controller unreachable ({CONNECT})"


def share_down(step: str = "", rc: int = 1, said: str = CONNECT) -> dict[str, str]:
    """A node's share as poll_head prints it when scontrol got no record: its exit status and its words."""
    return Q.share_props(f"@@step\n{step}@@job\n@@scontrol rc={rc}\n{said}\n")


@pytest.mark.parametrize(
    ("rc", "said", "why"),
    [
        (1, CONNECT, DOWN),
        (1, f"{NODES}\n", f"controller unreachable ({NODES})"),
        (1, TIMEOUT, f"controller unreachable ({TIMEOUT})"),
        (124, "", f"controller unreachable (scontrol had no answer within {Q.SCONTROL_TIMEOUT} s)"),
        (1, AUTH, f"scontrol failed ({AUTH})"),
        (127, "sh: 1: scontrol: not found", "scontrol failed (sh: 1: scontrol: not found)"),
        (1, INVALID, ""),  # Slurm answered: it no longer holds the job
        (0, fixture("scontrol_show_job_running.txt"), ""),
    ],
)
def test_controller_error_keeps_the_tools_own_words(rc, said, why) -> None:
    assert Q.controller_error(rc, said) == why


@pytest.mark.parametrize(
    ("step", "state"),
    [
        ("", "unknown"),  # queued or not started here: Slurm alone could say
        (START, "unknown"),  # training: the case, which read `failed` with an empty exit code
        (START + "end=1764162544.0\nrc=1\nsignal=\n", "unknown"),  # failed, cancelled or timed out: Slurm's to say
        (START + "end=1764162459.0\nrc=143\nsignal=TERM\n", "unknown"),
        (START + "end=1764162480.1\nrc=0\nsignal=\n", "completed"),  # the node's own record of a clean end
    ],
)
def test_a_share_slurm_cannot_be_asked_about_is_unknown_not_failed(step, state) -> None:
    props = share_down(step)
    assert props["Unknown"] == DOWN
    assert Q.share_state(props) == state and P.unit_state(props) == state


def test_a_forgotten_job_is_still_missing_not_unknown() -> None:
    props = share_down("", 1, INVALID)
    assert "Unknown" not in props and Q.share_state(props) == "missing"


def poll(tmp_path: Path, scontrol: str) -> dict[str, str]:
    """poll_script's Slurm head run by sh with a stand-in scontrol (`scontrol` is its shell body)."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    if not (run_dir / "logs" / "step-3.state").exists():
        (run_dir / "logs" / "step-3.state").write_text(START)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\n{scontrol}\n")
    (bin_dir / "scontrol").chmod(0o755)
    script = P.poll_script("train-run1", str(run_dir), "lo", "L1", "slurm", "3")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    return P.parse_poll(out)[0]


def test_the_poll_of_a_share_while_slurmctld_is_down(tmp_path: Path) -> None:
    props = poll(tmp_path, f"echo {shlex.quote(CONNECT)} >&2; exit 1")
    assert P.unit_state(props) == "unknown" and props["Unknown"] == DOWN
    # scontrol's own time limit passed (coreutils timeout exits 124, as a stand-in that exits so).
    props = poll(tmp_path, "exit 124")
    assert P.unit_state(props) == "unknown" and "no answer within" in props["Unknown"]
    # Slurm forgot the job: the record collect saved beside the logs answers, the outage does not matter.
    (tmp_path / "run" / "logs" / "slurm-job-3.show").write_text(fixture("scontrol_show_job_completed.txt"))
    with (tmp_path / "run" / "logs" / "step-3.state").open("a") as f:
        f.write("end=1764162480.1\nrc=0\nsignal=\n")
    props = poll(tmp_path, f"echo {shlex.quote(CONNECT)} >&2; exit 1")
    assert "Unknown" not in props and P.unit_state(props) == "completed"


def unknown_job() -> dict:
    return {"state": "unknown", "unit": share_down(START), "why": ""}


def test_the_outcome_of_a_running_job_while_slurmctld_is_down_is_unknown() -> None:
    jobs = {"lab-node1": unknown_job(), "lab-node2": unknown_job()}
    got = O.job_outcome(jobs, False, ["lab-node1", "lab-node2"])
    assert got["outcome"] == "unknown" and got["first_failed"] is None
    assert got["message"].startswith(f"{DOWN}: the job's state on lab-node1, lab-node2 is unknown"), got
    # A completed node beside an unknown one: still unknown.
    done = {"state": "completed", "unit": share_down(START + "end=1.0\nrc=0\nsignal=\n")}
    assert O.job_outcome({"lab-node1": done, "lab-node2": unknown_job()})["outcome"] == "unknown"
    # A host lost for a reason of its own still fails the job.
    lost = {"state": "unreachable", "unit": {}, "why": "unreachable for 45 s", "ended": 5.0}
    assert O.job_outcome({"lab-node1": lost, "lab-node2": unknown_job()})["outcome"] == "failed"
    # The launch's own deadline stays the launch's: it passed.
    assert O.job_outcome(jobs, True)["outcome"] == "timeout"


def test_an_unknown_share_has_not_ended() -> None:
    """With min_nodes, a node lost for good beside one Slurm cannot tell about: the job may go on (unknown), it is
    not a failed unit that blocks going on without the lost one."""
    lost = {"state": "missing", "unit": {}, "why": "gone", "ended": 5.0}
    got = O.job_outcome({"lab-node1": unknown_job(), "lab-node2": lost}, False, ["lab-node1", "lab-node2"], 1)
    assert got["outcome"] == "unknown" and got["message"].endswith("after losing lab-node2 (gone)"), got


def test_a_failed_share_without_an_exit_status_says_unknown_not_an_empty_code() -> None:
    jobs = {"n1": {"state": "failed", "unit": {"Engine": "slurm"}, "ended": 1.0}}
    msg = O.job_outcome(jobs, False, ["n1"])["message"]
    assert msg == "job failed on n1: torchrun exit code unknown", msg


class DownSlurm:
    """The submit host's Slurm tools while slurmctld is down: each prints its error and exits 1."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(" ".join(argv))
        return 1, "", (NODES if argv[:3] == ["scontrol", "show", "nodes"] else CONNECT) + "\n"


def test_the_submit_hosts_commands_refuse_to_guess_while_slurmctld_is_down() -> None:
    run = DownSlurm()
    with pytest.raises(RuleError, match="^" + re.escape(f"scontrol show job 3: {DOWN}") + "$"):
        J.cancel(run, "3", grace=1, sleep=lambda s: None)
    assert not [c for c in run.calls if c.startswith("scancel")]  # neither "gone" nor cancelled
    with pytest.raises(RuleError, match=r"squeue --name=train-r1: controller unreachable"):
        J.queue(run, "train-r1")
    with pytest.raises(RuleError, match=r"scontrol show nodes: controller unreachable \(slurm_load_node error"):
        J.nodes(run)
    # A job Slurm forgot is an answer: gone, as before.
    assert J.cancel(lambda argv: (1, "", INVALID + "\n"), "3", grace=1, sleep=lambda s: None)["state"] == "gone"
