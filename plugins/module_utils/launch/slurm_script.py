"""The launch through Slurm (train_launch_scheduler: slurm): one sbatch job whose one srun step runs torchrun once
per node. This module writes the job: its name and time limit, the batch script sbatch submits, each node's step
script, and what a launch request asks that the Slurm engine cannot do.

What the two engines share is everything but starting and watching the job: the same ranks, payload config, per-node
environment and torchrun command line (the systemd engine passes them to systemd-run, this one writes them into
each node's step script), the same logs, metrics and outcome. Slurm adds the queue: a job waits (PENDING) until
its nodes are free.

The rest of the Slurm engine (stdlib only, unit-tested on recorded outputs, samples in tests/fixtures/slurm/ with
their source): slurm_state.py (what Slurm and the step record say of the job and of each node's share, read by the
watch), slurm_nodes.py (the launch hosts' Slurm nodes, the queue, the topology; the validation ladder's `slurm`
rung uses it too), slurm_job.py (the commands on the submit host, run by the module rdma_llm.cluster.slurm_job).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

JOB_PREFIX = "train-"
STEP_SCRIPT = "slurm-step.sh"


def job_name(run_id: str) -> str:
    """The Slurm job name of a run (the systemd engine's unit name: `train-<run_id>`)."""
    return f"{JOB_PREFIX}{run_id}"


def time_limit(deadline_s: Any, grace_s: Any) -> int:
    """sbatch --time in minutes: the launch's deadline plus the stop grace, rounded up, and one minute more, so the
    launch's own watch stops the job first (SIGTERM, checkpoint) and Slurm's limit holds a detached job."""
    return math.ceil((int(deadline_s) + int(grace_s)) / 60) + 1


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


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_slurm_request_problems": request_problems,
    "train_launch_slurm_job_name": job_name,
    "train_launch_slurm_time_limit": time_limit,
    "train_launch_slurm_step_script": step_script,
    "train_launch_slurm_batch_script": batch_script,
    "train_launch_slurm_options_problems": options_problems,
}
