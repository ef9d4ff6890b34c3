"""The launch through Slurm (train_launch_scheduler: slurm): one sbatch job whose one srun step runs torchrun once
per node, and what Slurm says about it.

Plain Python (stdlib only), unit-tested on recorded outputs (tests/unit/plugins/module_utils/launch/test_slurm_job.py,
samples in tests/fixtures/slurm/ with their source). Used by the train_launch role's Slurm engine (filters in
plugins/filter/train_launch.py), its watch (plugins/action/train_launch_watch.py reads each node's share through
`poll_head`/`share_props`/`share_state`), the module rdma_llm.cluster.slurm_job (sbatch, scancel, squeue, scontrol on
the submit host) and the validation ladder's `slurm` rung (`parse_topology`, `node_map`).

What the two engines share is everything but starting and watching the job: the same ranks, payload config, per-node
environment and torchrun command line (the systemd engine passes them to systemd-run, this one writes them into
each node's step script), the same logs, metrics and outcome. Slurm adds the queue: a job waits (PENDING) until
its nodes are free.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

JOB_PREFIX = "train-"
STEP_SCRIPT = "slurm-step.sh"
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


def job_name(run_id: str) -> str:
    """The Slurm job name of a run (the systemd engine's unit name: `train-<run_id>`)."""
    return f"{JOB_PREFIX}{run_id}"


def time_limit(deadline_s: Any, grace_s: Any) -> int:
    """sbatch --time in minutes: the launch's deadline plus the stop grace, rounded up, and one minute more, so the
    launch's own watch stops the job first (SIGTERM, checkpoint) and Slurm's limit holds a detached job."""
    return math.ceil((int(deadline_s) + int(grace_s)) / 60) + 1


# ------------------------------------------------------------------------------------------- the scripts


def _q(value: Any) -> str:
    return shlex.quote(str(value))


def step_script(
    host: str,
    nodename: str,
    rank: Any,
    run_id: str,
    run_dir: str,
    env: Mapping[str, Any],
    command: list[str],
    group: str = "",
) -> str:
    """One node's share of the job: `<run_dir>/slurm-step.sh`, written on every node with that node's own
    environment and torchrun command line (the same ones the systemd engine gives systemd-run), and run there by the
    batch script's srun step (the same path on every node).

    It records its start and its end (exit code, the signal it passed on) in `logs/step-<job id>.state`, the
    node's record of its share that the watch reads as systemd's unit properties, and appends torchrun's output to
    `logs/torchrun.log` as the systemd engine does. Slurm signals the step's task only (this script: recorded with
    Slurm 22.05 and proctrack/cgroup, `scancel --signal=TERM` and `scancel` reached it and not its children), so it
    hands SIGTERM and SIGINT to torchrun, which passes them to its workers: the payload checkpoints.

    `group`: the fabric firewall's group for the training processes (the systemd engine's unit `Group=`): torchrun
    runs with it as its real and effective group (`setpriv --regid`, where the step runs as root, as the lab's and
    most training sites' jobs do), so the firewall's rule on that group's sockets holds for this job too; a job of
    another user keeps its own groups and the log says the rule does not cover it."""
    bad = [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k))]
    if bad:
        raise RuleError(f"{host}: environment names must be shell names, got {bad}")
    if group and not re.fullmatch(r"[a-z_][a-z0-9_-]*\$?", str(group)):
        raise RuleError(f"{host}: {group!r} is not a group name")
    as_group = (
        f'if [ "$(id -u)" = 0 ] && getent group {_q(group)} >/dev/null; then\n'
        f'  as="setpriv --regid={group} --keep-groups --"\n'
        f'else echo "{host}: the fabric firewall\'s rule for group {group} does not cover this job (uid $(id -u))" '
        ">> logs/torchrun.log\nfi"
        if group
        else ""
    )
    exports = "\n".join(f"export {k}={_q(v)}" for k, v in env.items())
    argv = " ".join(_q(a) for a in command)
    state = '"logs/step-${SLURM_JOB_ID}.state"'
    return f"""#!/bin/bash
# rdma-llm training run {run_id}: the share of {host} (node rank {rank}, Slurm node {nodename}), run by the Slurm
# job's step on every node (each node has its own file at this path). Written by the train_launch role.
if [ "${{SLURMD_NODENAME:-}}" != {_q(nodename)} ]; then
  echo "{STEP_SCRIPT} of {host} (Slurm node {nodename}) started on ${{SLURMD_NODENAME:-a host outside Slurm}}" >&2
  exit 2
fi
cd {_q(run_dir)} || exit 2
printf 'host=%s\\nnode=%s\\njob=%s\\nstart=%s\\n' {_q(host)} "$SLURMD_NODENAME" "$SLURM_JOB_ID" \\
  "$(date +%s.%N)" > {state}
# RDMA registers memory: the job's limits are slurmd's (sbatch --propagate=NONE); raise memlock where they allow it.
ulimit -l unlimited 2>/dev/null || echo "{host}: memlock stays at $(ulimit -l) KiB" >> logs/torchrun.log
{exports}
as=
{as_group}
pid= got=
trap 'got=TERM; [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null' TERM
trap 'got=INT; [ -z "$pid" ] || kill -INT "$pid" 2>/dev/null' INT
$as {argv} >> logs/torchrun.log 2>&1 &
pid=$!
[ -z "$got" ] || kill -"$got" "$pid" 2>/dev/null
wait "$pid"; rc=$?
# A trapped signal ends `wait` early: wait again for torchrun's own exit (127: already collected).
while [ -n "$got" ]; do sig=$got; got=; wait "$pid"; r=$?; [ "$r" -eq 127 ] || rc=$r; done
printf 'end=%s\\nrc=%s\\nsignal=%s\\n' "$(date +%s.%N)" "$rc" "${{sig:-}}" >> {state}
exit "$rc"
"""


OPTION_RE = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*(=[^\x00-\x1f\x7f]*)?$")
# Options the batch script sets itself from the launch: a second one would contradict it.
OWN_OPTIONS = ("job-name", "nodes", "nodelist", "ntasks-per-node", "output", "chdir", "time", "partition",
               "gres", "propagate", "exclusive", "comment", "J", "N", "w", "o", "D", "t", "p")  # fmt: skip


def options_problems(options: Any) -> list[str]:
    """What is wrong with train_launch_slurm_options (more sbatch options: `--account=ml`, `--qos=high`, `--mem=0`,
    `--reservation=r1`): a list of single-line `--name=value` strings, none the batch script sets itself."""
    if not isinstance(options, list):
        return [f"train_launch_slurm_options must be a list of sbatch options, got {options!r}"]
    out = []
    for opt in options:
        text = str(opt)
        if not OPTION_RE.match(text):
            out.append(f"train_launch_slurm_options: {text!r} is not one sbatch option (`--name` or `--name=value`)")
            continue
        name = text.lstrip("-").split("=", 1)[0]
        if name in OWN_OPTIONS:
            out.append(f"train_launch_slurm_options: {text!r} is set by the launch itself (train_launch_* variables)")
    return out


def batch_script(
    run_id: str,
    launch_id: str,
    run_dir: str,
    nodenames: list[str],
    minutes: int,
    partition: str = "",
    gres: str = "",
    exclusive: bool = True,
    options: list[str] | None = None,
) -> str:
    """The batch script sbatch submits: `--nodes` and `--nodelist` are the launch's nodes (torchrun's node 0
    holds the rendezvous on its fabric address, so the job runs exactly there), one task per node, the whole node
    (`--exclusive`: a training job owns its nodes, and a second job waits in the queue), the limits of slurmd and
    not of the submitting SSH session (`--propagate=NONE`), Slurm's time limit just past the launch's deadline.
    Its one step runs each node's `slurm-step.sh` on all nodes at once (`srun --ntasks-per-node=1`, as torchtitan's
    multinode_trainer.slurm runs torchrun), with all of the node's CPUs (`--whole`), and ends every node's task as
    soon as one fails (`--kill-on-bad-exit=1`)."""
    problems = options_problems(list(options or []))
    if problems:
        raise RuleError("; ".join(problems))
    if not nodenames:
        raise RuleError("a Slurm launch needs at least one node")
    for value, what in ((partition, "train_launch_slurm_partition"), (gres, "train_launch_slurm_gres")):
        if value and not re.fullmatch(r"[A-Za-z0-9_.:,/-]+", str(value)):
            raise RuleError(f"{what}={value!r}: letters, digits and . _ : , / - only")
    n = len(nodenames)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name(run_id)}",
        f"#SBATCH --nodes={n}",
        f"#SBATCH --nodelist={','.join(nodenames)}",
        "#SBATCH --ntasks-per-node=1",
        *(["#SBATCH --exclusive"] if exclusive else []),
        f"#SBATCH --time={int(minutes)}",
        *([f"#SBATCH --partition={partition}"] if partition else []),
        *([f"#SBATCH --gres={gres}"] if gres else []),
        "#SBATCH --propagate=NONE",
        f"#SBATCH --output={run_dir}/logs/slurm-%j.out",
        f"#SBATCH --chdir={run_dir}",
        f"#SBATCH --comment=rdma-llm:{run_id}:{launch_id}",
        *(f"#SBATCH {opt}" for opt in options or []),
        f"# rdma-llm training run {run_id}, launch {launch_id}: one step, one task per node, each node's share in its",
        f"# own {run_dir}/{STEP_SCRIPT}. Written by the train_launch role.",
        'echo "=== job ${SLURM_JOB_ID} on ${SLURM_JOB_NODELIST}, batch host $(hostname -s) ==="',
        f"srun --nodes={n} --ntasks-per-node=1 --whole --kill-on-bad-exit=1 {_q(run_dir + '/' + STEP_SCRIPT)}",
        "rc=$?",
        'echo "=== srun exit ${rc} ==="',
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- what Slurm says

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
            out.append(dict(zip(("id", "state", "reason", "start", "nodes"), (p.strip() for p in parts), strict=True)))
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


# ------------------------------------------------------------------------------------------- one node's share


def share_props(text: str) -> dict[str, str]:
    """A node's share of the job as the watch reads it (poll_head's output: `@@step` the step's state file, `@@job`
    `scontrol show job`, or the copy collect saved beside the logs once Slurm forgot the job), in the keys of the
    systemd engine's unit properties the outcome rules read (ExecMainStartTimestamp, ExecMainExitTimestamp,
    ExecMainCode, ExecMainStatus, Result), with Slurm's own (Engine, JobId, JobState, Reason, ExitCode, Restarts,
    NodeList, BatchHost) and `Why`: the cause where Slurm ended or held the job."""
    _, _, rest = (text or "").partition("@@step\n")
    step_text, _, job_text = rest.partition("@@job\n")
    step, job = parse_step(step_text), parse_job(job_text)
    props = {"Engine": "slurm"}
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
    """pending | running | completed | failed | stopped | missing: a node's share, from share_props (the states of
    the systemd engine's unit_state, and `pending` while the job waits in the queue)."""
    state, why = props.get("JobState", ""), props.get("Why", "")
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
    """The first part of the watch's poll on a node (the rest, common to both engines, is train_launch.poll_tail):
    the node's step record and Slurm's record of the job (`scontrol show job`, read by every node: one RPC to
    slurmctld per node and poll), else the copy collect saved (`logs/slurm-job-<id>.show`) once Slurm forgot it."""
    jid = _q(job_id)
    saved = _q(f"{run_dir}/logs/slurm-job-{job_id}.show")
    return (
        f"echo @@step; cat {_q(run_dir + '/logs/step-' + str(job_id) + '.state')} 2>/dev/null; echo @@job; "
        f"j=$(scontrol show job {jid} --oneliner 2>/dev/null); "
        f'case "$j" in JobId=*) printf \'%s\\n\' "$j";; *) cat {saved} 2>/dev/null;; esac; '
    )


def queued_line(elapsed: float, props: Mapping[str, str]) -> str:
    """The progress line while the job waits in the queue."""
    return (
        f"[{max(float(elapsed), 0.0):5.0f} s] queued: Slurm job {props.get('JobId', '?')} "
        f"{props.get('JobState', 'PENDING')} ({props.get('Reason') or 'no reason given'})"
    )


# ------------------------------------------------------------------------------------------- the nodes


def node_map(show_nodes: str, aliases: Mapping[str, list[str]]) -> dict[str, dict[str, str]]:
    """Each launch host's Slurm node, from `scontrol show nodes --oneliner`: the node whose NodeName, NodeHostName or
    NodeAddr is one of the host's names (its short hostname, ansible_host, its fabric address), with its fields.
    A host Slurm does not know is absent."""
    nodes = [parse_fields(line) for line in (show_nodes or "").splitlines() if line.startswith("NodeName=")]
    out = {}
    for host, names in aliases.items():
        wanted = [str(n) for n in names if n]
        for key in ("NodeName", "NodeHostName", "NodeAddr"):
            match = next((n for w in wanted for n in nodes if n.get(key) == w), None)
            if match:
                out[host] = match
                break
    return out


# Node state words (sinfo(1) "NODE STATE CODES", as scontrol spells them) that keep a job off the node.
UNUSABLE = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "INVAL", "INVALID_REG",
            "MAINTENANCE", "MAINT", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN",
            "POWER_DOWN", "FUTURE", "UNKNOWN", "NO_RESPOND")  # fmt: skip


def node_words(fields: Mapping[str, str]) -> list[str]:
    """`State=IDLE+DRAIN+NOT_RESPONDING` as its words (a trailing `*` is sinfo's NOT_RESPONDING)."""
    raw = fields.get("State", "")
    words = [w for w in raw.rstrip("*").split("+") if w]
    return [*words, "NOT_RESPONDING"] if raw.endswith("*") and "NOT_RESPONDING" not in words else words


def node_problems(
    hosts: list[str], found: Mapping[str, Mapping[str, str]], aliases: Mapping[str, list[str]], partition: str = ""
) -> list[str]:
    """Why Slurm would not run the launch on these hosts now, each naming its host: not a Slurm node, not in the
    partition, or in a state that keeps jobs off it (DOWN, DRAIN with its reason: the node check's, for one
    `rdma-node-check` drained). A node busy with another job (ALLOCATED, MIXED) is no problem: the job queues."""
    out = []
    for host in hosts:
        fields = found.get(host)
        if not fields:
            names = ", ".join(str(n) for n in aliases.get(host, []) if n)
            out.append(f"{host}: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of {names})")
            continue
        name = fields.get("NodeName", "?")
        parts = [p for p in fields.get("Partitions", "").split(",") if p]
        if partition and partition not in parts:
            out.append(f"{host}: Slurm node {name} is not in partition {partition} (its partitions: {','.join(parts)})")
        bad = [w for w in node_words(fields) if w in UNUSABLE]
        if bad:
            reason = fields.get("Reason", "")
            out.append(
                f"{host}: Slurm node {name} is {fields.get('State')}"
                + (f": {reason}" if reason else "")
                + " (the job would wait until it returns)"
            )
    return out


def queue_problems(queue: list[Mapping[str, str]], run_id: str) -> list[str]:
    """A job of this run that Slurm still holds (squeue by name): a second launch of the run must wait for it."""
    return [
        f"Slurm job {j.get('id')} of run {run_id} is still {j.get('state')} ({j.get('reason')}): stop it first "
        f"(playbooks/train_stop.yml -e run_id={run_id})"
        for j in queue
    ]


# ------------------------------------------------------------------------------------------- the topology


def expand_hostlist(text: str) -> list[str]:
    """A Slurm hostlist (`mol-slurm-[1-2]`, `n[01-03,7],login`) as its names, in order."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text or ""):
        stack = [""]
        for piece in re.split(r"(\[[^\]]*\])", part):
            if piece.startswith("["):
                options = []
                for rng in piece[1:-1].split(","):
                    lo, _, hi = rng.partition("-")
                    if hi:
                        options += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
                    else:
                        options.append(lo)
                stack = [s + o for s in stack for o in options]
            else:
                stack = [s + piece for s in stack]
        out += [s for s in stack if s]
    return out


def parse_topology(text: str) -> dict[str, dict[str, Any]]:
    """`scontrol show topology` (or topology.conf lines) as switch -> {"nodes": names directly below it (a level-0
    switch's; Slurm lists every node below an upper switch, derived), "switches": switches below it}. {} for `No
    topology information available` (no topology.conf)."""
    out: dict[str, dict[str, Any]] = {}
    for line in (text or "").splitlines():
        if not line.startswith("SwitchName="):
            continue
        fields = parse_fields(line, tail=())
        below = expand_hostlist(fields.get("Switches", ""))
        level = fields.get("Level")
        nodes = expand_hostlist(fields.get("Nodes", "")) if not below or level in (None, "0") else []
        out[fields["SwitchName"]] = {"nodes": sorted(nodes), "switches": sorted(below)}
    return out


def topology_differences(expected: list[str], reported: str) -> list[str]:
    """How the topology Slurm reports differs from the one the inventory gives (the slurm role's topology.conf lines
    from the switches' ports, module_utils/slurm/conf.py `topology`): each switch missing, extra, or with other nodes or
    switches below it."""
    want, got = parse_topology("\n".join(expected)), parse_topology(reported)
    out = []
    for sw in sorted(set(want) | set(got)):
        if sw not in got:
            out.append(f"switch {sw} is missing in Slurm's topology")
        elif sw not in want:
            out.append(f"Slurm has switch {sw}, which the inventory's switches do not give")
        else:
            for key in ("nodes", "switches"):
                if want[sw][key] != got[sw][key]:
                    out.append(
                        f"{sw}: {key} {','.join(got[sw][key]) or 'none'} in Slurm, "
                        f"{','.join(want[sw][key]) or 'none'} from the inventory"
                    )
    return out


# ------------------------------------------------------------------------------------------- the submit host's commands

Runner = Callable[[list[str]], tuple[int, str, str]]


def submit(run: Runner, script: str) -> dict[str, Any]:
    """`sbatch --parsable <script>` -> {"job_id", "stdout"}; a refusal raises RuleError with sbatch's own words
    (`sbatch: error: Batch job submission failed: Requested node configuration is not available`)."""
    rc, out, err = run(["sbatch", "--parsable", script])
    if rc != 0:
        raise RuleError(f"sbatch refused the job: {(err or out).strip()[-400:]}")
    return {"job_id": sbatch_job_id(out), "stdout": out.strip()}


def show_job(run: Runner, job_id: str) -> dict[str, str]:
    """Slurm's record of the job ({} once it is gone)."""
    _, out, _ = run(["scontrol", "show", "job", str(job_id), "--oneliner"])
    return parse_job(out)


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
    _, out, _ = run(["squeue", "--noheader", f"--name={name}", f"--format={QUEUE_FORMAT}"])
    return parse_queue(out)


def nodes(run: Runner) -> str:
    """`scontrol show nodes --oneliner` (every node: node_map finds the launch's)."""
    rc, out, err = run(["scontrol", "show", "nodes", "--oneliner"])
    if rc != 0:
        raise RuleError(f"scontrol show nodes failed: {(err or out).strip()[-300:]}")
    return out


def aliases(
    hosts: list[str],
    hostvars: Any,
    hostname_var: str = "__train_launch_reg_hostname",
    fabric_ip_var: str = "__train_launch_fabric_ip",
) -> dict[str, list[str]]:
    """Each host's names Slurm may know it by (node_map): its short hostname as the host reports it (the
    registered `hostname -s` in `hostname_var`), its inventory name and short form, ansible_host and its fabric
    address (`fabric_ip_var`). The launch's variables by default; the ladder's slurm rung names its own."""
    out = {}
    for host in hosts:
        hv = hostvars.get(host, {})
        names = [
            str((hv.get(hostname_var) or {}).get("stdout", "")).strip(),
            host,
            host.split(".")[0],
            str(hv.get("ansible_host") or ""),
            str(hv.get(fabric_ip_var) or ""),
        ]
        out[host] = list(dict.fromkeys(n for n in names if n))
    return out


def request_problems(scheduler: str, elastic: Mapping[str, Any], options: Any, queue_timeout: Any) -> list[str]:
    """What a launch request asks that the Slurm engine cannot do (before anything is staged)."""
    if scheduler != "slurm":
        return []
    out = options_problems(options)
    if elastic.get("elastic"):
        out.append(
            f"train_launch_min_nodes={elastic.get('min_nodes')} (going on without lost nodes) is not offered through "
            "Slurm: Slurm ends the whole job when one of its nodes fails; use train_launch_scheduler=systemd"
        )
    try:
        if int(queue_timeout) < 0:
            raise ValueError
    except (TypeError, ValueError):
        out.append(f"train_launch_slurm_queue_timeout={queue_timeout!r} must be 0 (no limit) or more seconds")
    return out


FILTERS = {
    "train_launch_slurm_aliases": aliases,
    "train_launch_slurm_request_problems": request_problems,
    "train_launch_slurm_job_name": job_name,
    "train_launch_slurm_time_limit": time_limit,
    "train_launch_slurm_step_script": step_script,
    "train_launch_slurm_batch_script": batch_script,
    "train_launch_slurm_options_problems": options_problems,
    "train_launch_slurm_node_map": node_map,
    "train_launch_slurm_node_problems": node_problems,
    "train_launch_slurm_queue_problems": queue_problems,
    "train_launch_slurm_queue": parse_queue,
}
