"""The Slurm engine's commands on the submit host (the module rdma_llm.cluster.slurm_job runs them): submit the
batch script (slurm_script.py), read Slurm's record of the job, stop it the way the systemd engine stops its units,
keep Slurm's records beside a node's logs, list the run's jobs in the queue and the nodes. Each takes a `run`
(argv -> rc, stdout, stderr) so the tests answer for Slurm with recorded outputs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import (
    ACTIVE,
    QUEUE_FORMAT,
    WAITING,
    controller_error,
    parse_job,
    parse_queue,
    sbatch_job_id,
)

Runner = Callable[[list[str]], tuple[int, str, str]]


def submit(run: Runner, script: str) -> dict[str, Any]:
    """`sbatch --parsable <script>` -> {"job_id", "stdout"}; a refusal raises RuleError with sbatch's own words
    (`sbatch: error: Batch job submission failed: Requested node configuration is not available`)."""
    rc, out, err = run(["sbatch", "--parsable", script])
    if rc != 0:
        raise RuleError(f"sbatch refused the job: {(err or out).strip()[-400:]}")
    return {"job_id": sbatch_job_id(out), "stdout": out.strip()}


def _answer(rc: int, out: str, err: str, what: str) -> None:
    """Raise when the controller gave no answer (controller_error): a job Slurm cannot be asked about is neither
    gone nor stopped, and saying so would be a lie."""
    failure = controller_error(rc, f"{err}\n{out}", what.split()[0])
    if failure:
        raise RuleError(f"{what}: {failure}")


def show_job(run: Runner, job_id: str) -> dict[str, str]:
    """Slurm's record of the job ({} once it is gone); RuleError when the controller does not answer."""
    rc, out, err = run(["scontrol", "show", "job", str(job_id), "--oneliner"])
    job = parse_job(out)
    if not job:
        _answer(rc, out, err, f"scontrol show job {job_id}")
    return job


def cancel(
    run: Runner, job_id: str, grace: float, kill_wait: float = 60, sleep: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """Stop the job the way the systemd engine stops its units: SIGTERM first (`scancel --signal=TERM`: the step's
    task, which hands it to torchrun and so to the workers, which checkpoint), then after `grace` seconds `scancel`
    (Slurm's own SIGTERM, then SIGKILL after its KillWait), then wait up to `kill_wait` seconds for the job to end. A
    pending job is simply cancelled. Returns {"changed", "state" (the job's last state), "steps" (what was done)}."""
    sleep = sleep or time.sleep
    job = show_job(run, job_id)
    state = job.get("JobState", "")
    if state not in ACTIVE:
        return {"changed": False, "state": state or "gone", "steps": []}
    steps = []
    if state in WAITING:
        run(["scancel", str(job_id)])
        steps.append("scancel (pending)")
    else:
        run(["scancel", "--signal=TERM", str(job_id)])
        steps.append("scancel --signal=TERM")
        state = _wait_end(run, job_id, grace, sleep)
        if state in ACTIVE and state != "COMPLETING":
            run(["scancel", str(job_id)])
            steps.append(f"scancel after {grace:.0f} s")
    state = _wait_end(run, job_id, kill_wait, sleep)
    return {"changed": True, "state": state or "gone", "steps": steps}


def _wait_end(run: Runner, job_id: str, seconds: float, sleep: Callable[[float], None]) -> str:
    """Poll the job once a second until it left the active states (COMPLETING counts as ending) or time runs out."""
    state = ""
    for _ in range(max(int(seconds), 0) + 1):
        state = show_job(run, job_id).get("JobState", "")
        if state not in ACTIVE or state == "COMPLETING":
            return state
        sleep(1)
    return state


SACCT_FORMAT = "JobID,JobName,State,ExitCode,Start,End,Elapsed,NNodes,NodeList"


def accounting(run: Runner, job_id: str, job_state: str, wait: float = 10, sleep: Callable | None = None) -> str:
    """sacct's lines for the job and its steps ("" where Slurm keeps no accounting: sacct fails). slurmdbd learns
    a job's end after slurmctld: for a job that has ended (`job_state`, slurmctld's word, "" once it forgot it) the
    database is read again once a second, up to `wait` seconds, until its line no longer says the job runs; a job
    still active is read once."""
    sleep = sleep or time.sleep
    tries = 1 if job_state in ACTIVE else max(int(wait), 1)
    out = ""
    for left in range(tries, 0, -1):
        rc, out, _ = run(["sacct", "--jobs", str(job_id), "--parsable2", f"--format={SACCT_FORMAT}"])
        if rc != 0:
            return ""
        job_line = (out.splitlines()[1:2] or [""])[0].split("|")
        if left == 1 or len(job_line) < 3 or job_line[2] not in ("RUNNING", "PENDING", "COMPLETING"):
            break
        sleep(1)
    return out


def record(run: Runner, job_id: str, logs: str, wait: float = 10, sleep: Callable | None = None) -> dict[str, Any]:
    """Slurm's records of the job beside a node's logs, which train_status.yml reads once Slurm forgot the job
    (MinJobAge after it ended): `slurm-job-<id>.show` (scontrol's record) and, where accounting keeps jobs,
    `slurm-job-<id>.sacct` (`accounting`). Returns which were written."""
    _, shown, _ = run(["scontrol", "show", "job", str(job_id), "--oneliner"])
    job = parse_job(shown)
    out = {"saved": False, "accounted": False}
    if job:
        Path(logs, f"slurm-job-{job_id}.show").write_text(shown.strip() + "\n")
        out["saved"] = True
    if lines := accounting(run, job_id, job.get("JobState", ""), wait, sleep):
        Path(logs, f"slurm-job-{job_id}.sacct").write_text(lines.strip() + "\n")
        out["accounted"] = True
    return out


def queue(run: Runner, name: str) -> list[dict[str, str]]:
    """The jobs named `name` that Slurm still holds (pending, running)."""
    rc, out, err = run(["squeue", "--noheader", f"--name={name}", f"--format={QUEUE_FORMAT}"])
    _answer(rc, out, err, f"squeue --name={name}")
    return parse_queue(out)


def nodes(run: Runner) -> str:
    """`scontrol show nodes --oneliner` (every node: node_map finds the launch's)."""
    rc, out, err = run(["scontrol", "show", "nodes", "--oneliner"])
    _answer(rc, out, err, "scontrol show nodes")
    if rc != 0:
        raise RuleError(f"scontrol show nodes failed: {(err or out).strip()[-300:]}")
    return out
