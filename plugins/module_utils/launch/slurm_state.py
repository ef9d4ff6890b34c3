"""What Slurm says about a launch's job, and each node's share of it as the watch reads it (the Slurm engine,
slurm_script.py): the job states, `scontrol show ... --oneliner` records, sbatch's job id, the queue, each node's step
record (logs/step-<job>.state), and from them the share in the keys of the systemd engine's unit properties, its
state, the watch's poll head on a node and its line while the job queues."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

# Job states (squeue(1) "JOB STATE CODES") in which the job still holds or waits for its nodes.
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
          "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD")  # fmt: skip
WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD")
# A job that ended for a reason of Slurm's own: that reason is the cause on every node it ended (squeue(1)).
SLURM_CAUSES = {
    "TIMEOUT": "reached its time limit",
    "NODE_FAIL": "ended because a node failed",
    "BOOT_FAIL": "ended because a node failed to boot",
    "PREEMPTED": "was preempted",
    "OUT_OF_MEMORY": "ran out of memory",
    "DEADLINE": "reached its deadline",
}
# Pending reasons that mean the job will not start by itself (squeue(1) "JOB REASON CODES"; the prolog case recorded).
HELD = ("launch_failed_requeued_held", "JobHeldAdmin", "JobHeldUser", "BadConstraints", "PartitionDown",
        "PartitionInactive", "ReqNodeNotAvail", "InvalidAccount", "InvalidQOS")  # fmt: skip

# What Slurm's client tools print when slurmctld does not answer (`<call> error: <slurm_strerror>`, e.g.
# `slurm_load_jobs error: Unable to contact slurm controller (connect failure)`): the messages of slurm_errno.c
# (SchedMD slurm, src/common/slurm_errno.c) for the controller connection and its socket. The job's state is then
# unknown, never failed: the job runs on without its controller.
UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out on send/recv operation",
               "Zero Bytes were transmitted or received", "Communication connection failure",
               "Connection timed out", "Rate limit exceeded", "Slurm backup controller in standby mode")  # fmt: skip
# A job Slurm no longer holds (ESLURM_INVALID_JOB_ID): an answer, not a failure to get one.
FORGOTTEN = "Invalid job id specified"
# Seconds a poll gives `scontrol show job` (coreutils timeout: exit 124) before the controller counts as silent;
# Slurm's own retries take MessageTimeout (10 s by default) against a controller that refuses connections.
SCONTROL_TIMEOUT = 30


def controller_error(rc: int, output: str, tool: str = "scontrol") -> str:
    """Why a Slurm client tool got no answer from the controller, in the tool's own words ("" when it got one:
    rc 0, or `Invalid job id specified`): `controller unreachable (<its line>)` for a connection failure or a
    timeout (rc 124: no answer within SCONTROL_TIMEOUT s), `<tool> failed (<its line>)` for any other refusal."""
    if int(rc) == 0:
        return ""
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    if any(FORGOTTEN in line for line in lines):
        return ""
    if int(rc) == 124:
        return f"controller unreachable ({tool} had no answer within {SCONTROL_TIMEOUT} s)"
    hit = next((line for line in lines if any(m in line for m in UNREACHABLE)), "")
    if hit:
        return f"controller unreachable ({hit})"
    return f"{tool} failed ({lines[-1] if lines else f'exit code {rc}'})"


# `scontrol show job/node --oneliner`: Key=Value fields; keys hold letters, digits, `_`, `:` and `/` (AllocNode:Sid,
# CPUs/Task). A value runs to the next key (node lines have `OS=Linux 6.18 #1 SMP ...`), a node's Reason to the end.
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_fields(line: str, tail: tuple[str, ...] = ("Reason",)) -> dict[str, str]:
    """One `scontrol show ... --oneliner` line as a dict. A key in `tail` takes the rest of the line: a node's drain
    reason is free text (it may hold `word=`) and comes last on the node line (Slurm 22.05, the recorded samples)."""
    line = (line or "").strip()
    marks = list(_FIELD.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        key = m.group(1)
        if key in tail:
            out[key] = line[m.end() :].strip()
            break
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out[key] = line[m.end() : end].strip()
    return out


def parse_job(text: str) -> dict[str, str]:
    """`scontrol show job <id> --oneliner` as a dict ({} for `Invalid job id specified`: the record is gone once
    MinJobAge (300 s) has passed since the job ended, and no slurmdbd keeps it)."""
    for line in (text or "").splitlines():
        if line.startswith("JobId="):
            return parse_fields(line, tail=())
    return {}


def sbatch_job_id(stdout: str) -> str:
    """`sbatch --parsable`: the job id, `<id>` or `<id>;<cluster>`."""
    m = re.search(r"^(\d+)(?:;\S+)?\s*$", (stdout or "").strip(), re.M)
    if not m:
        raise RuleError(f"sbatch did not print a job id: {(stdout or '').strip()[:200]!r}")
    return m.group(1)


def parse_queue(text: str) -> list[dict[str, str]]:
    """`squeue --noheader --format=%i|%T|%r|%S|%N`: id, state, reason, start, nodes per job."""
    out = []
    for line in (text or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0].strip():
            # No zip(strict=): this runs on the nodes (rdma-llm-metrics), Python 3.9; the length is checked above.
            out.append(dict(zip(("id", "state", "reason", "start", "nodes"), (p.strip() for p in parts))))  # noqa: B905
    return out


QUEUE_FORMAT = "%i|%T|%r|%S|%N"


def parse_step(text: str) -> dict[str, Any]:
    """A node's `logs/step-<job>.state` (written by its slurm-step.sh): host, node, job, start, and once it ended
    end, rc (torchrun's exit status as bash's `wait` gives it: 128+N when a signal N ended it) and signal (the one the
    step passed on to torchrun, if any)."""
    out: dict[str, Any] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("start", "end"):
            try:
                out[key] = float(value)
            except ValueError:
                continue
        elif key == "rc":
            try:
                out[key] = int(value)
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def share_props(text: str) -> dict[str, str]:
    """A node's share of the job as the watch reads it (poll_head's output: `@@step` the step's state file, `@@job`
    `scontrol show job`, or the copy collect saved beside the logs once Slurm forgot the job), in the keys of the
    systemd engine's unit properties the outcome rules read (ExecMainStartTimestamp, ExecMainExitTimestamp,
    ExecMainCode, ExecMainStatus, Result), with Slurm's own (Engine, JobId, JobState, Reason, ExitCode, Restarts,
    NodeList, BatchHost) and `Why`: the cause where Slurm ended or held the job."""
    _, _, rest = (text or "").partition("@@step\n")
    step_text, _, job_text = rest.partition("@@job\n")
    job_text, _, failed = job_text.partition("@@scontrol rc=")
    step, job = parse_step(step_text), parse_job(job_text)
    props = {"Engine": "slurm"}
    rc, _, said = failed.partition("\n")
    # No record of the job, live or saved, because scontrol got no answer (poll_head): the share is unknown.
    unknown = "" if job or not rc.strip().isdigit() else controller_error(int(rc), said)
    if unknown:
        props["Unknown"] = unknown
    for key in ("JobId", "JobName", "JobState", "Reason", "ExitCode", "Restarts", "NodeList", "BatchHost"):
        if key in job:
            props[key] = job[key]
    if "start" in step:
        props["ExecMainStartTimestamp"] = f"@{step['start']}"
    if "end" in step:
        rc = int(step.get("rc", 1))
        props["ExecMainExitTimestamp"] = f"@{step['end']}"
        if rc > 128 and rc - 128 < 65:
            props.update(ExecMainCode="killed", ExecMainStatus=str(rc - 128), Result="signal")
        else:
            props.update(ExecMainCode="exited", ExecMainStatus=str(rc), Result="success" if rc == 0 else "exit-code")
        if step.get("signal"):
            props["Signal"] = str(step["signal"])
    why = _why(job, step)
    if why:
        props["Why"] = why
    return props


def _why(job: Mapping[str, str], step: Mapping[str, Any]) -> str:
    """The cause Slurm gives for this node's share, where Slurm ended or holds the job itself."""
    state, reason, jid = job.get("JobState", ""), job.get("Reason", ""), job.get("JobId", "?")
    if state in SLURM_CAUSES:
        return f"Slurm job {jid} {SLURM_CAUSES[state]} ({state})"
    if state in WAITING and (reason in HELD or int(job.get("Restarts") or 0) > 0):
        return f"Slurm job {jid} cannot start: {state} ({reason})" + (
            ", requeued after its launch failed (a node's prolog failed: see the nodes' drain reasons)"
            if reason == "launch_failed_requeued_held"
            else ""
        )
    if "start" in step and "end" not in step and state and state not in ACTIVE:
        return (
            f"Slurm job {jid} ended {state} before this node's step recorded its end (killed: SIGKILL after KillWait)"
        )
    return ""


def share_state(props: Mapping[str, str]) -> str:
    """pending | running | completed | failed | stopped | missing | unknown: a node's share, from share_props (the
    states of the systemd engine's unit_state, `pending` while the job waits in the queue, `unknown` while Slurm's
    controller cannot be reached and the node's step has not recorded a clean end)."""
    state, why = props.get("JobState", ""), props.get("Why", "")
    if props.get("Unknown"):
        # Slurm could not be asked: only the node's own record of a clean end is certain.
        done = props.get("ExecMainStatus") == "0" and props.get("ExecMainCode") == "exited"
        return "completed" if done else "unknown"
    if "ExecMainExitTimestamp" in props:
        if props.get("ExecMainStatus") == "0" and props.get("ExecMainCode") == "exited":
            return "completed"
        if state == "CANCELLED" and props.get("Signal"):
            return "stopped"  # scancel (train_stop.yml, the launch's stop, or by hand)
        return "failed"
    if "ExecMainStartTimestamp" in props:
        if state in ACTIVE:
            return "running"
        return "stopped" if state == "CANCELLED" else "failed"
    if why and state in WAITING:
        return "failed"  # held: it would never start by itself
    if state in WAITING:
        return "pending"
    if state in ACTIVE:
        return "running"  # the step has not started on this node yet
    if not state:
        return "missing"
    return "stopped" if state == "CANCELLED" else "failed"


def poll_head(job_id: str, run_dir: str) -> str:
    """The first part of the watch's poll on a node (the rest, common to both engines, is poll.poll_tail):
    the node's step record and Slurm's record of the job (`scontrol show job`, read by every node: one RPC to
    slurmctld per node and poll), else the copy collect saved (`logs/slurm-job-<id>.show`) once Slurm forgot it,
    else scontrol's exit status and words (`@@scontrol rc=<n>`: share_props tells a controller that did not answer
    from a job Slurm forgot)."""
    jid = shlex.quote(str(job_id))
    saved = shlex.quote(f"{run_dir}/logs/slurm-job-{job_id}.show")
    return (
        f"echo @@step; cat {shlex.quote(f'{run_dir}/logs/step-{job_id}.state')} 2>/dev/null; echo @@job; "
        f"j=$(timeout {SCONTROL_TIMEOUT} scontrol show job {jid} --oneliner 2>&1); rc=$?; "
        f'case "$j" in *JobId=*) printf \'%s\\n\' "$j";; '
        f'*) if [ -s {saved} ]; then cat {saved}; else printf \'@@scontrol rc=%s\\n%s\\n\' "$rc" "$j"; fi;; esac; '
    )


def queued_line(elapsed: float, props: Mapping[str, str]) -> str:
    """The progress line while the job waits in the queue."""
    return (
        f"[{max(float(elapsed), 0.0):5.0f} s] queued: Slurm job {props.get('JobId', '?')} "
        f"{props.get('JobState', 'PENDING')} ({props.get('Reason') or 'no reason given'})"
    )


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {"train_launch_slurm_queue": parse_queue}
