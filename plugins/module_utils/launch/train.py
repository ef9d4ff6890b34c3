"""Decisions of the train_launch role as pure functions (tested in tests/unit/plugins/module_utils/).

rank order, the payload keys of a launch (resolved by the payload's own payload/config.py), the NCCL/gloo
environment, the job outcome from the units' status, the progress line, the pre-flight all-reduce report,
the manifest's node entries and the checkpoint a resume starts from.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import shlex
import signal
from datetime import UTC, datetime
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as slurm_launch

# Payload keys the role sets itself from its own variables (staged paths, the run directory).
ROLE_KEYS = {
    "data": "train_launch_data or train_launch_data_on_hosts",
    "out_dir": "train_launch_root (the run directory)",
}


def rank_order(hosts: list[str], hostvars: Any) -> list[str]:
    """Hosts sorted by node rank: `hostvars[host].cluster_node_rank` where set, else the position in `hosts`."""
    ranked = []
    for index, host in enumerate(hosts):
        value = hostvars.get(host, {}).get("cluster_node_rank")
        try:
            rank = index if value is None or value == "" else int(value)
        except (TypeError, ValueError) as e:
            raise RuleError(f"{host}: cluster_node_rank={value!r} is not an integer") from e
        ranked.append((rank, host))
    ranked.sort()
    got = [r for r, _ in ranked]
    if got != list(range(len(hosts))):
        listed = ", ".join(f"{h}={r}" for r, h in ranked)
        raise RuleError(
            f"node ranks must be 0..{len(hosts) - 1}, each once, for the hosts of this launch; got {listed}"
            " (cluster_node_rank from the inventory, else the position in the group)"
        )
    return [h for _, h in ranked]


def payload_values(
    payload: dict[str, Any] | None, overrides: dict[str, Any] | None, role_values: dict[str, Any]
) -> dict[str, Any]:
    """The payload keys of a launch: `payload` < `overrides` (short extra-vars, None = not given) < role values.

    Only merged here: the payload's own `config.py resolve` then judges them (unknown keys, types, choices,
    ranges, with the payload's messages) and returns the resolved config the launch keeps. A `model` that
    is a path (it has a `/` or starts with `.`; presets never do) becomes `init_from`, a local model dir."""
    if payload is not None and not isinstance(payload, dict):
        raise RuleError(f"train_launch_payload must be a mapping of payload keys, got {payload!r}")
    values = dict(payload or {})
    for key in ROLE_KEYS:
        if key in values:
            raise RuleError(f"train_launch_payload: {key!r} is set by the role; use {ROLE_KEYS[key]}")
    for key, value in (overrides or {}).items():
        if value is None or value == "":
            continue
        if key == "model" and ("/" in str(value) or str(value).startswith(".")):
            values.pop("model", None)
            key = "init_from"
        values[key] = value
    values.update(role_values)
    return values


def nccl_env(
    fabric_if: str,
    rdma: dict[str, Any],
    threads: int,
    gpus: int,
    qos_env: dict[str, Any] | None = None,
    allow_tcp: bool = False,
    host: str = "",
    log_dir: str = "",
    flight: Any = 0,
) -> dict[str, str]:
    """Environment of the job on one host.

    `rdma` is the endpoint rdma_stack_endpoint found for the fabric interface: an RDMA device present but no
    GID carrying the fabric address means NCCL would silently fall back to TCP (or pick a wrong GID): that fails
    unless the user opts into TCP. `qos_env` is the host's QoS fact (ansible_local.rdma_qos.nccl_env,
    NCCL_IB_TC ...). On GPUs NCCL writes its account of the transport it chose to `log_dir`/nccl.<host>.<pid>.log
    (INIT and NET lines, and its warnings) for the run report. `flight` entries (0: off) turn on PyTorch's flight
    recorder for every process group: each rank dumps it to `log_dir`/fr-rank<rank>.json when the watch touches
    `log_dir`/.fr-request (payload/flight.py), and NCCL's watchdog by itself at a collective's timeout
    (`log_dir`/nccl_trace_rank_<rank>, torch's pickle)."""
    env = {
        "GLOO_SOCKET_IFNAME": fabric_if,
        # Reliable restarts of the c10d rendezvous (the shared TCP store broke 2 of 5 restarts in the lab).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "OMP_NUM_THREADS": str(max(int(threads), 1)),
        "PYTHONUNBUFFERED": "1",
        # torch logs in local time without a zone: UTC on every host makes the hosts' logs comparable.
        "TZ": "UTC",
    }
    env.update(nccl_rules.nccl_env(rdma, qos_env, fabric_if))
    if not rdma.get("hca"):
        if rdma.get("devices") and not allow_tcp:
            raise RuleError(
                f"{host}: {rdma.get('note', 'no RDMA GID carries the fabric address')}; NCCL would fall back to TCP. "
                "Fix the fabric address / RoCE GID table (show_gids), or set train_launch_allow_tcp=true to train "
                "over TCP"
            )
        env["NCCL_IB_DISABLE"] = "1"
    if int(gpus) == 0:
        env.update(DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    elif log_dir:  # to a file: the job's own log stays readable
        env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=f"{log_dir}/nccl.%h.%p.log")
    entries = int(flight or 0)
    if entries < 0:
        raise RuleError(f"train_launch_flight_recorder={flight} must be 0 (off) or a number of entries")
    if entries and log_dir:
        # torch reads TORCH_FR_BUFFER_SIZE for every backend (2.6+), the NCCL name before it.
        env.update(TORCH_FR_BUFFER_SIZE=str(entries), TORCH_NCCL_TRACE_BUFFER_SIZE=str(entries))
        env["RDMA_LLM_FR_REQUEST"] = f"{log_dir}/.fr-request"
        if int(gpus):
            env.update(TORCH_NCCL_DUMP_ON_TIMEOUT="1", TORCH_NCCL_DEBUG_INFO_TEMP_FILE=f"{log_dir}/nccl_trace_rank_")
    return env


def qos_note(qos_env: dict[str, Any] | None, rdma: dict[str, Any]) -> str:
    """What the plan line says of the host's QoS fact (ansible_local.rdma_qos.nccl_env): the NCCL traffic class
    or service level the job gets, or why it gets none. nccl_env applies it only where NCCL uses RDMA."""
    if not qos_env:
        return "none (no rdma_qos fact on the host: NCCL traffic rides the default class)"
    text = " ".join(f"{k}={v}" for k, v in sorted(qos_env.items()))
    return text if rdma.get("hca") else f"{text} unused (NCCL does not use RDMA here)"


# torchrun's elastic agent, when a worker dies: "E1122 22:09:19.425000 4232 torch/.../api.py:1002] failed
# (exitcode: -9) local_rank: 0 (pid: 123) of binary: ..." (the prefix is the log time, month-day and local time;
# the job's environment sets TZ=UTC so every host logs in UTC).
WORKER_FAILED = re.compile(
    r"^(?:[DIWEF](?P<md>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?) .*?)?"
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)",
    re.M,
)


def exit_text(code: int) -> str:
    """A worker's exit code as torchrun reports it (negative: killed by that signal)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def log_time(month_day: str | None, hms: str | None, near: float | None) -> float | None:
    """Epoch of a torch log prefix (MMDD HH:MM:SS.us, UTC, no year): the year that puts it nearest `near`."""
    if not month_day or not hms or near is None:
        return None
    year = datetime.fromtimestamp(float(near), UTC).year
    best = None
    for y in (year - 1, year, year + 1):
        try:
            fmt = "%Y%m%d %H:%M:%S.%f" if "." in hms else "%Y%m%d %H:%M:%S"
            stamp = datetime.strptime(f"{y}{month_day} {hms}", fmt)
        except ValueError:
            continue
        t = stamp.replace(tzinfo=UTC).timestamp()
        if best is None or abs(t - near) < abs(best - near):
            best = t
    return best


# The payload's own last word before it exits on a failure it understood (payload/train.py RunError: a full
# disk, bad data, a corrupt checkpoint), as a worker's stderr line, "[rank1]: " prefixed or not.
PAYLOAD_ERROR = re.compile(r"^(?:\[rank\d+\]:\s*)?error: (?P<error>.+)$", re.M)


# torchrun's agent itself stopped by a signal (its host shutting down, its unit stopped): "W1127 18:01:50.663000
# 5381 torch/.../api.py:753] Received 15 death signal, shutting down workers"; its workers' peers then fail.
AGENT_SIGNAL = re.compile(
    r"^[DIWEF](?P<md>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?) +(?P<pid>\d+) .*?\] "
    r"Received (?P<sig>\d+) death signal, shutting down workers",
    re.M,
)
# What a rejoin unit writes into the job's log at the boot that starts the share again (rejoin_unit_text).
REJOINED = re.compile(r"^=== rejoin after a reboot at (?P<at>\S+) \(node rank \d+\) ===$", re.M)


def worker_failures(text: str, near: float | None = None) -> list[dict[str, Any]]:
    """The worker failures torchrun logged, in order: local rank, pid, exit code, text, the log time as an
    epoch when the line carries it (`near`: any epoch of the same run, to supply the year), and `error`, the
    payload's own error line logged before it, if any. An agent stopped by a signal counts as its host's
    failure (local rank None, the agent's pid, the signal as a negative code), said as a restart of the host where
    a rejoin unit started the share again after it."""
    errors = [(m.start(), m["error"].strip()) for m in PAYLOAD_ERROR.finditer(text)]
    rejoins = [(m.start(), m["at"]) for m in REJOINED.finditer(text)]
    found = []
    for m in WORKER_FAILED.finditer(text):
        found.append((m.start(), m.end(), m, None))
    for m in AGENT_SIGNAL.finditer(text):
        found.append((m.start(), m.end(), m, int(m["sig"])))
    out, seen = [], 0
    for start, end, m, sig in sorted(found, key=lambda f: f[0]):
        before = [e for at, e in errors if seen <= at < start]
        seen = end
        if sig is None:
            failure = {"local_rank": int(m["rank"]), "pid": int(m["pid"]), "code": int(m["code"])}
            failure["text"] = f"local rank {m['rank']} {exit_text(int(m['code']))}"
        else:
            rejoined = next((at for pos, at in rejoins if pos > start), None)
            name = signal.Signals(sig).name if sig in set(signal.Signals) else f"signal {sig}"
            failure = {"local_rank": None, "pid": int(m["pid"]), "code": -sig}
            failure["text"] = (
                f"restarted: torchrun got {name} as the host went down, and rejoined at its boot ({rejoined})"
                if rejoined
                else f"torchrun got {name} (its host shutting down, or its unit stopped)"
            )
            before = []
        out.append(failure | {"time": log_time(m["md"], m["hms"], near), "error": before[-1] if before else None})
    return out


def first_failure(failures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Where a failure started among workers that died together: a worker killed by a signal is a cause (its
    peers then exit with an error when the collective breaks), and within each kind the earliest."""
    if not failures:
        return None
    return min(failures, key=lambda f: (not _is_cause(f), math.inf if f.get("time") is None else f["time"]))


def _is_cause(failure: dict[str, Any]) -> bool:
    """A worker killed by a signal, or one that ended on an error the payload named (its peers only see the
    collective break)."""
    return failure.get("code", 0) < 0 or bool(failure.get("error"))


def systemd_time(value: str) -> float | None:
    """An epoch from `systemctl show --timestamp=us+utc` ("Sun 2026-11-22 20:00:00.123456 UTC") or unix ("@1763...")."""
    value = (value or "").strip()
    if value.startswith("@"):
        try:
            return float(value[1:])
        except ValueError:
            return None
    parts = value.split()
    if len(parts) >= 3:
        try:
            stamp = datetime.strptime(f"{parts[1]} {parts[2]}", "%Y-%m-%d %H:%M:%S.%f")
        except ValueError:
            return None
        return stamp.replace(tzinfo=UTC).timestamp()
    return None


def _exit_text(unit: dict[str, Any]) -> str:
    code, status = unit.get("ExecMainCode", ""), str(unit.get("ExecMainStatus", ""))
    if code in ("2", "killed") or unit.get("Result") == "signal":
        return f"killed by signal {status}"
    if code in ("3", "dumped") or unit.get("Result") == "core-dump":
        return f"dumped core (signal {status})"
    return f"exit code {status}"


def elastic_plan(min_nodes: Any, nodes: int, max_restarts: Any, last_call: Any, engine: str = "ddp") -> dict[str, Any]:
    """torchrun's node count for a launch of `nodes` nodes that may go on with `min_nodes` (0 = all of them).

    Fewer than all makes the rendezvous elastic (`--nnodes=MIN:MAX`): when a node is lost for good, the
    survivors' agents restart their workers (one of `max_restarts`), the rendezvous drops the silent node
    after its heartbeats stop and completes with the survivors once `last_call` seconds have passed, and the
    payload resumes from its latest checkpoint at the new world size. A continuation is a restart, so it
    needs max_restarts >= 1. Only DDP: its checkpoint is whole on every node, while a DeepSpeed or FSDP
    checkpoint holds shards of the lost node that the survivors cannot read."""

    def number(name: str, value: Any) -> int:
        try:
            return int(str(value).strip())
        except ValueError as e:
            raise RuleError(f"{name}={value!r} is not a whole number") from e

    wanted, restarts, wait = (
        number("train_launch_min_nodes", min_nodes),
        number("train_launch_max_restarts", max_restarts),
        number("train_launch_rdzv_last_call", last_call),
    )
    if not 0 <= wanted <= nodes:
        raise RuleError(
            f"train_launch_min_nodes={wanted} must be between 1 and the {nodes} node(s) of this launch"
            " (0 = all of them)"
        )
    least = wanted or nodes
    if least < nodes and restarts < 1:
        raise RuleError(
            f"train_launch_min_nodes={least} below the {nodes} nodes of this launch needs train_launch_max_restarts"
            " >= 1: going on with fewer nodes is a restart of the survivors"
        )
    if least < nodes and engine != "ddp":
        raise RuleError(
            f"train_launch_min_nodes={least} below the {nodes} nodes of this launch needs engine ddp, not {engine}:"
            " a sharded checkpoint keeps part of the state on the node that would be lost"
        )
    if least < nodes and wait < 1:
        raise RuleError(f"train_launch_rdzv_last_call={wait} must be at least 1 second")
    elastic = least < nodes
    return {
        "min_nodes": least,
        "max_nodes": nodes,
        "elastic": elastic,
        "nnodes": f"{least}:{nodes}" if elastic else str(nodes),
        # Once min_nodes have joined, the rendezvous waits this long for the others (all joined: it completes).
        "rdzv_conf": f",last_call_timeout={wait}" if elastic else "",
    }


_LOST = ("unreachable", "missing")
# A host's share that has not ended: training, queued (Slurm), or coming back after its host restarted.
ACTIVE = ("running", "pending", "rejoining")


def _losses(
    jobs: dict[str, dict[str, Any]], nodes: list[str], min_nodes: int, rdzv_host: str = ""
) -> tuple[list[str], str]:
    """The hosts lost for good among `jobs` and why the job cannot go on without them ("" when it can: every
    ended host is lost, not the rendezvous store's host - node 0, or train_launch_rdzv_host where one is named -
    and at least min_nodes are left)."""
    ended = {h: j for h, j in jobs.items() if j.get("state") not in (*ACTIVE, "completed")}
    lost = sorted(h for h, j in ended.items() if j.get("state") in _LOST)
    if not lost or not min_nodes or min_nodes >= len(nodes):
        return lost, "no min_nodes"
    if len(lost) != len(ended):
        return lost, "a unit failed"
    if rdzv_host and rdzv_host in lost:
        return lost, f"{rdzv_host} held the rendezvous store (train_launch_rdzv_host)"
    if not rdzv_host and nodes and nodes[0] in lost:
        return lost, f"{nodes[0]} held the rendezvous (node rank 0)"
    left = len(nodes) - len(lost)
    if left < min_nodes:
        return lost, f"{left} of {len(nodes)} nodes left, train_launch_min_nodes={min_nodes}"
    return lost, ""


def peers_end_watch(
    records: dict[str, dict[str, Any]], host: str, nodes: list[str], min_nodes: int = 0, rdzv_host: str = ""
) -> bool:
    """Whether the peers' records (hosts whose watch ended: a unit that failed or stopped, a host lost) end the
    watch of `host`. Any peer ends it, except hosts lost for good that the job can go on without
    (train_launch_min_nodes): then the survivors keep training and this host keeps watching."""
    peers = {h: r for h, r in records.items() if h != host and r.get("state") != "completed"}
    if not peers:
        return False
    return bool(_losses(peers, nodes, int(min_nodes or 0), rdzv_host)[1])


def stopped_by_request(job: dict[str, Any], stop_at: float | None) -> bool:
    """The unit ran when train_stop.yml asked it to stop (at epoch `stop_at`) and ended then: not a failure.

    A unit that ended before the request failed on its own; one started after it belongs to a later launch (a
    resume). A unit gone (`missing`) after a request was stopped cleanly (systemd drops an inactive transient unit).
    """
    if not stop_at or job.get("state") not in ("failed", "stopped", "missing"):
        return False
    if job.get("state") == "missing":
        return True
    started = systemd_time((job.get("unit") or {}).get("ExecMainStartTimestamp", ""))
    ended = job.get("ended")
    return (started is None or started <= stop_at) and (ended is None or ended >= stop_at - 1)


def job_outcome(
    jobs: dict[str, dict[str, Any]],
    deadline_passed: bool = False,
    nodes: list[str] | None = None,
    min_nodes: int = 0,
    stop_at: float | None = None,
    stopped_hosts: list[str] | None = None,
    rdzv_host: str = "",
) -> dict[str, Any]:
    """Outcome of the job from each host's watch result (unit status as systemd reports it).

    A job failed where a unit failed or a host was lost; the message names the host where it started first
    (earliest exit), not the survivors that failed after it. Each job entry: `state` (running, completed,
    failed, stopped, unreachable, missing), `unit` (systemctl show properties), `ended` (epoch) and `why`.
    With `min_nodes` below the node count (`nodes`, in rank order), hosts lost for good do not fail a job that
    can go on without them: the survivors decide it, and `lost` lists each lost host, when and why."""
    nodes = list(nodes or jobs)
    stop_at = float(stop_at) if stop_at else None
    # train_stop.yml names the hosts it stopped (a subset with train_hosts); None: every host.
    asked = set(jobs if stopped_hosts is None else stopped_hosts)
    stopped = sorted(h for h, j in jobs.items() if h in asked and stopped_by_request(j, stop_at))
    if stopped and all(h in stopped or j.get("state") == "completed" for h, j in jobs.items()):
        when = datetime.fromtimestamp(stop_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return {
            "outcome": "stopped",
            "message": f"stopped by train_stop.yml at {when} on {', '.join(stopped)} (SIGTERM: each rank saved a "
            "checkpoint if it could; continue with -e resume=true)",
            "first_failed": None,
            "lost": [],
        }
    lost, blocked = _losses(jobs, nodes, int(min_nodes or 0), rdzv_host)
    if lost and not blocked:
        gone = [
            {"host": h, "at": jobs[h].get("ended"), "why": jobs[h].get("why") or jobs[h].get("state")} for h in lost
        ]
        rest = {h: j for h, j in jobs.items() if h not in lost}
        decided = job_outcome(rest, deadline_passed)
        left = f"{len(rest)} of {len(jobs)} nodes"
        named = ", ".join(f"{g['host']} ({g['why']})" for g in gone)
        if decided["outcome"] == "completed":
            msg = f"completed on {left} (min_nodes {min_nodes}) after losing {named}"
        elif decided["outcome"] == "running":
            msg = f"goes on with {left} (min_nodes {min_nodes}) after losing {named}"
        else:
            msg = f"{decided['message']}, after losing {named}"
        return decided | {"message": msg, "lost": gone}
    failed = {h: j for h, j in jobs.items() if j.get("state") in ("failed", "unreachable", "missing", "stopped")}
    if failed:
        # Where it started: a worker killed by a signal, a link down or a lost host is a cause; the peers'
        # workers then fail with an exit code. Within each kind, the earliest end.
        def rank(hj):
            job = hj[1]
            killed = any(_is_cause(f) for f in job.get("workers") or [])
            cause = killed or job.get("state") in ("unreachable", "missing") or bool(job.get("why"))
            return (0 if cause else 1, job.get("ended") or math.inf, hj[0])

        order = sorted(failed.items(), key=rank)
        first_host, first = order[0]
        slurm = (first.get("unit") or {}).get("Engine") == "slurm"
        if first.get("why"):
            why = first["why"]
        elif first.get("state") == "unreachable":
            why = "unreachable"
        elif first.get("state") == "stopped":
            why = (
                "its Slurm job was cancelled (train_stop.yml or scancel)"
                if slurm
                else "its unit was stopped (train_stop.yml or systemctl stop)"
            )
        elif first.get("state") == "missing":
            why = (
                "Slurm has no record of its job and the node none of its step (cancelled before it started, or "
                "forgotten MinJobAge after it ended)"
                if slurm
                else "its unit is gone (stopped by train_stop.yml, or the host restarted)"
            )
        else:
            why = f"torchrun {_exit_text(first.get('unit', {}))}"
            if first.get("workers"):
                worker = first["workers"][-1]
                why = f"{worker['text']} ({why})" + (f": {worker['error']}" if worker.get("error") else "")
        others = [h for h, _ in order[1:]]
        msg = f"job failed on {first_host}: {why}" + (f" (then on {', '.join(others)})" if others else "")
        if lost and blocked not in ("no min_nodes", "a unit failed"):
            msg += f"; it cannot go on without {', '.join(lost)}: {blocked}"
        # The steps had stalled before it failed (the watch dumped every rank): the rank(s) the others waited for
        # are where it started, not the host whose collective timed out first.
        stalled = hang.verdict(jobs)
        if stalled:
            msg += f"; it hung first: {stalled['message']}"
            first_host = stalled["culprit_hosts"][0] if stalled["culprit_hosts"] else first_host
        return {"outcome": "failed", "message": msg, "first_failed": first_host, "lost": [], "hang": stalled}
    if jobs and all(j.get("state") == "completed" for j in jobs.values()):
        return {"outcome": "completed", "message": "ok", "first_failed": None, "lost": []}
    if deadline_passed:
        return {"outcome": "timeout", "message": "the deadline passed", "first_failed": None, "lost": []}
    if jobs and all(j.get("state") == "pending" for j in jobs.values()):
        unit = next(iter(jobs.values())).get("unit") or {}
        return {
            "outcome": "pending",
            "message": f"Slurm job {unit.get('JobId', '?')} waits in the queue "
            f"({unit.get('JobState', 'PENDING')}, {unit.get('Reason') or 'no reason given'})",
            "first_failed": None,
            "lost": [],
        }
    return {"outcome": "running", "message": "ok", "first_failed": None, "lost": []}


def _duration(seconds: float) -> str:
    m, s = divmod(max(round(seconds), 0), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_line(elapsed: float, running: int, hosts: int, metrics: dict[str, Any] | None, max_steps: int) -> str:
    """One progress line from rank 0's latest metrics record (elapsed counts from this launch only)."""
    head = f"[{max(float(elapsed), 0.0):5.0f} s] {running}/{hosts} hosts running | "
    m = metrics or {}
    kind = m.get("kind")
    if kind == "train":
        step = int(m.get("step") or 0)
        pct = f" ({step / max_steps:.0%})" if max_steps else ""
        # rank 0's ETA is the job's: every rank steps together
        eta = f" | eta {_duration(float(m['eta_s']))}" if isinstance(m.get("eta_s"), int | float) else ""
        return head + "step {}/{}{}{} | loss {} | {:.0f} tok/s | lr {:.2e}".format(
            step, max_steps, pct, eta, m.get("loss_global"), float(m.get("tokens_per_s") or 0), float(m.get("lr") or 0)
        )
    if kind == "eval":
        return head + f"step {m.get('step')} | val loss {m.get('val_loss')}"
    if kind == "result":
        done = m.get("status") == "completed"
        return head + f"step {m.get('final_step')} {m.get('status')}" + (", saving and exporting" if done else "")
    return head + "starting"


def preflight_problems(nodes: list[dict[str, Any]], min_free_mb: int, rdzv_port: int) -> list[str]:
    """Every reason not to launch, all hosts at once, each naming its host: too little free space where the
    checkpoints go, the rendezvous port already taken on node 0, a peer's fabric address that does not answer
    from this host's fabric NIC (or only below the NIC's MTU: a path with a smaller MTU drops full frames).

    Each node: `host`, `rank`, `ckpt_dir`, `df` (stdout of `df --output=avail -m`), `listeners` (stdout of
    `ss -Htln sport = :port`, node 0), `fabric_if`, `mtu`, `peers` (stdout of the peer probe: one line
    `<host> <ip> ok|small|none` per peer, see tasks/check.yml)."""
    out = []
    for node in nodes:
        host = node["host"]
        lines = [x.strip() for x in str(node.get("df") or "").splitlines() if x.strip()]
        try:
            free = int(lines[-1])
        except (IndexError, ValueError):
            out.append(f"{host}: free space in {node.get('ckpt_dir')} unknown (df said {' '.join(lines)[:120]!r})")
        else:
            if free < int(min_free_mb):
                out.append(
                    f"{host}: {free} MiB free in {node.get('ckpt_dir')} "
                    f"(need train_launch_min_free_mb={min_free_mb} for checkpoints)"
                )
        listeners = str(node.get("listeners") or "").strip()
        if int(node.get("rank", 1)) == 0 and listeners:
            out.append(f"{host}: rendezvous port {rdzv_port} is in use ({' '.join(listeners.split())[:160]})")
        for line in str(node.get("peers") or "").splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[2] == "ok":
                continue
            peer, ip, how = parts
            if how == "noping":
                out.append(f"{host}: ping is not installed: the fabric addresses cannot be checked (iputils-ping)")
            elif how == "small":
                out.append(
                    f"{host}: {peer} ({ip}) answers on {node.get('fabric_if')} only below its MTU {node.get('mtu')}"
                    " (a smaller MTU on the path drops full-size frames)"
                )
            else:
                out.append(f"{host}: {peer} ({ip}) does not answer on {node.get('fabric_if')}")
    return out


def gate_verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The payload's evaluation gate over the collected result.json files (one per node that wrote one):
    `fail` if any says fail, `pass` if one passed and none failed, else `off` (no gate asked, or no result)."""
    gates = [r.get("gate") for r in results if isinstance(r, dict) and isinstance(r.get("gate"), dict)]
    failed = [g for g in gates if g.get("status") == "fail"]
    if failed:
        checks = [c for c in failed[0].get("checks", []) if not c.get("pass")]
        why = "; ".join(f"{c.get('check')}: val loss {c.get('value')} > {c.get('limit'):.4f}" for c in checks)
        return {"status": "fail", "message": f"the evaluation gate failed ({why})"}
    if any(g.get("status") == "pass" for g in gates):
        return {"status": "pass", "message": "the evaluation gate passed"}
    return {"status": "off", "message": "no evaluation gate"}


def peer_args(nodes: list[str], me: str, hostvars: Any) -> list[str]:
    """The peer probe's arguments on host `me` (tasks/check.yml): `host address` for every other launch node,
    flat, in rank order."""
    out = []
    for host in nodes:
        if host != me:
            out += [host, str(hostvars.get(host, {}).get("__train_launch_fabric_ip") or "")]
    return out


def preflight_nodes(hosts: list[str], hostvars: Any) -> list[dict[str, Any]]:
    """What preflight_problems judges, from each host's registered checks in tasks/check.yml."""
    out = []
    for host in hosts:
        hv = hostvars.get(host, {})
        fabric_if = hv.get("__train_launch_fabric_if")
        facts = (hv.get("ansible_facts") or {}).get(str(fabric_if).replace("-", "_")) or {}
        out.append(
            {
                "host": host,
                "rank": int(hv.get("__train_launch_node_rank")),
                "ckpt_dir": f"{hv.get('__train_launch_run_dir')}/out/checkpoints",
                "df": (hv.get("__train_launch_reg_df") or {}).get("stdout", ""),
                "listeners": (hv.get("__train_launch_reg_rdzv_port") or {}).get("stdout", ""),
                "fabric_if": fabric_if,
                "mtu": facts.get("mtu"),
                "peers": (hv.get("__train_launch_reg_peers") or {}).get("stdout", ""),
            }
        )
    return out


def allreduce_results(hosts: list[str], hostvars: Any) -> list[dict[str, Any]]:
    """Each host's pre-flight all-reduce from its registered command (`__train_launch_reg_allreduce`): `ok`
    (rc 0) and, for a failure, `detail`: the check's own error (its last JSON line on stdout), else the
    module's message, its stderr, or "no output"; `text` is "host: detail"."""
    out = []
    for host in hosts:
        reg = hostvars.get(host, {}).get("__train_launch_reg_allreduce") or {}
        ok = reg.get("rc", 1) == 0
        record = None
        for line in reg.get("stdout_lines") or []:
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
        if isinstance(record, dict) and record.get("error"):
            detail = str(record["error"])
        elif ok:
            detail = None
        else:
            detail = str(reg.get("msg") or reg.get("stderr") or "no output")[:300]
        out.append({"host": host, "ok": ok, "detail": detail, "text": f"{host}: {detail}"})
    return out


def manifest_nodes(nodes: list[str], play_hosts_all: list[str], hostvars: Any) -> list[dict[str, Any]]:
    """The manifest's node entries, in rank order, for the launch's nodes that were in the play: what each
    node was given (rank, fabric, environment, command), what ran (unit, job) and what it kept (checkpoints)."""
    out = []
    for host in nodes:
        if host not in play_hosts_all:
            continue
        hv = hostvars.get(host, {})
        watch = hv.get("__train_launch_reg_watch") or {}
        stop = hv.get("__train_launch_reg_stop") or {}
        ckpts = hv.get("__train_launch_reg_ckpt_list") or {}
        out.append(
            {
                "host": host,
                "node_rank": int(hv.get("__train_launch_node_rank")),
                "fabric_interface": hv.get("__train_launch_fabric_if"),
                "fabric_address": hv.get("__train_launch_fabric_ip"),
                "nproc_per_node": hv.get("__train_launch_nproc"),
                "gpus": hv.get("__train_launch_gpus"),
                "rdma": hv.get("__train_launch_rdma"),
                "environment": hv.get("__train_launch_env") or {},
                "command": hv.get("__train_launch_command") or [],
                "versions": hv.get("__train_launch_versions") or {},
                "unit": hv.get("__train_launch_unit"),
                "slurm_node": hv.get("__train_launch_slurm_node"),
                "job": watch.get("job"),
                "stopped": bool(stop.get("changed", False)),
                "checkpoints": sorted(f["path"] for f in ckpts.get("files") or []),
            }
        )
    return out


_STEP = re.compile(r"step_(\d+)$")


def common_checkpoint(per_host: list[list[str]]) -> str:
    """The newest checkpoint (`step_<n>` directory name) present on every host, by step number; "" when
    no checkpoint is on all of them (or there are no hosts)."""
    if not per_host:
        return ""
    common = set(per_host[0]).intersection(*per_host[1:])
    steps = [(int(m[1]), name) for name in common if (m := _STEP.search(name))]
    return max(steps)[1] if steps else ""


# Read by the watch action (plugins/action/train_launch_watch.py); here so pytest needs no ansible import.
PROPS = (
    "LoadState,ActiveState,SubState,Result,ExecMainCode,ExecMainStatus,ExecMainStartTimestamp,"
    "ExecMainExitTimestamp,NRestarts"
)


def poll_script(
    unit: str,
    run_dir: str,
    fabric_if: str,
    launch_id: str,
    engine: str = "systemd",
    job_id: str = "",
    nodrop_prio: int = 3,
) -> str:
    """The watch's one shell command per poll (parse_poll splits its output): the host's share of the job (the
    systemd engine: its unit's properties, read from the record saved beside its logs, logs/unit.show, once the unit
    was released after collection; the Slurm engine: slurm_launch.poll_head), then poll_tail."""
    if engine == "slurm":
        head = slurm_launch.poll_head(job_id, run_dir)
    else:
        q, saved = shlex.quote(unit), shlex.quote(run_dir + "/logs/unit.show")
        rejoin = shlex.quote(rejoin_unit_name(unit))
        watched = shlex.quote(f"{run_dir}/{WATCHED}")
        head = (
            # When the watch last read this host: a rejoin after a reboot starts only soon after (rejoin_check).
            f"touch {watched} 2>/dev/null; "
            f"p=$(systemctl show {q} --timestamp=us+utc -p {PROPS}); "
            f"if printf '%s\\n' \"$p\" | grep -qx LoadState=not-found && [ -s {saved} ]; then cat {saved}; "
            "else printf '%s\\n' \"$p\"; fi; "
            # The unit that brings the share back after a reboot (rejoin_unit_text), its keys prefixed `Rejoin`.
            f"systemctl show {rejoin} -p {REJOIN_PROPS} | sed 's/^/Rejoin/'; "
        )
    return head + poll_tail(run_dir, fabric_if, launch_id, nodrop_prio=nodrop_prio)


# The NIC counters every poll samples for the run's fabric account (train_fabric.py): rdma-node-check's error
# counters and the congestion counters it reports (CNPs, ECN marks, out-of-buffer drops).
SAMPLED_COUNTERS = (*node_check.DEFAULTS["error_counters"], *node_check.DEFAULTS["report_counters"])
_COUNTER_LINE = re.compile(r"/class/infiniband/([^/]+)/ports/(\d+)/(?:hw_)?counters/(\w+) (\d+)$")


def poll_tail(
    run_dir: str, fabric_if: str, launch_id: str, sysfs: str = "/sys", nodrop_prio: int = 3, ethtool: str = "ethtool"
) -> str:
    """What both engines' polls read after the host's share: the fabric link state, rank 0's latest metrics, the
    worker failures torchrun logged in this launch (after its marker in logs/torchrun.log), the RDMA ports'
    SAMPLED_COUNTERS (none without an RDMA device) and the fabric interface's PFC pause counters of the no-drop
    priority (`ethtool -S`: the pauses its switch port sent and received; none where the driver has no such
    counters). `sysfs`, `ethtool`: another root and a stand-in, for the tests."""
    marker = f"=== launch {launch_id} ==="
    names = " ".join(SAMPLED_COUNTERS)
    pause = node_check.PAUSE_COUNTER.format(prio=int(nodrop_prio))
    return (
        "echo @@link; "
        f"cat /sys/class/net/{shlex.quote(fabric_if)}/operstate 2>/dev/null; echo @@metrics; "
        f"tail -n 20 {shlex.quote(run_dir + '/out/metrics.jsonl')} 2>/dev/null; echo @@failures; "
        f"awk -v m={shlex.quote(marker)} '$0 == m {{f = 1; next}} "
        "f && (/failed \\(exitcode: / || /^(\\[rank[0-9]+\\]: *)?error: /)' "
        f"{shlex.quote(run_dir + '/logs/torchrun.log')} 2>/dev/null | tail -n 10; echo @@counters; "
        f"for d in {shlex.quote(sysfs)}/class/infiniband/*/ports/*; do for g in counters hw_counters; do "
        f'for n in {names}; do f=$d/$g/$n; [ -r $f ] && echo "$f $(cat $f)"; done; done; done; '
        # ethtool lives in sbin, which a non-login shell's PATH may lack.
        f"echo @@pause; PATH=$PATH:/usr/sbin:/sbin {shlex.quote(ethtool)} -S {shlex.quote(fabric_if)} 2>/dev/null "
        f"| grep -E {shlex.quote('^ *' + pause + ':')}; true"
    )


def parse_poll_counters(stdout: str, fabric_if: str = "") -> dict[str, dict[str, int]]:
    """The poll's `@@counters` section: {"mlx5_0:1": {counter: value}}, and its `@@pause` section under the fabric
    interface's name: {"rdma0": {"rx_prio3_pause": value}} ({} without an RDMA device or pause counters)."""
    out: dict[str, dict[str, int]] = {}
    counters, _, pause = stdout.partition("@@counters\n")[2].partition("@@pause\n")
    for line in counters.splitlines():
        m = _COUNTER_LINE.search(line.strip())
        if m:
            out.setdefault(f"{m.group(1)}:{m.group(2)}", {})[m.group(3)] = int(m.group(4))
    for line in pause.splitlines():
        name, _, value = line.strip().partition(":")
        if value.strip().isdigit():
            out.setdefault(fabric_if or "fabric", {})[name] = int(value)
    return out


def unit_state(props: dict[str, str]) -> str:
    """running | completed | failed | stopped | missing | rejoining, from `systemctl show` (the unit has
    RemainAfterExit); a Slurm share (props of slurm_launch.share_props, `Engine=slurm`) by
    slurm_launch.share_state, which adds `pending` while the job waits in the queue. `rejoining`: the host
    restarted (the transient unit went with the boot) and its rejoin unit has not run yet in this boot."""
    if props.get("Engine") == "slurm":
        return slurm_launch.share_state(props)
    if props.get("LoadState") == "not-found":
        # Not yet run in this boot (its condition never checked: systemd keeps that per boot), or running now. A
        # rejoin its condition skipped (the run ended, or counted the host lost: rejoin_check) leaves it missing.
        unchecked = props.get("RejoinConditionTimestampMonotonic", "0") in ("", "0")
        rejoin = props.get("RejoinActiveState")
        waiting = rejoin == "activating" or (rejoin == "inactive" and unchecked)
        return "rejoining" if props.get("RejoinLoadState") == "loaded" and waiting else "missing"
    active = props.get("ActiveState")
    if active == "failed":
        return "failed"
    if active == "active" and props.get("SubState") == "exited":
        return "completed"
    if active in ("active", "activating", "deactivating", "reloading"):
        return "running"
    return "stopped"


def parse_poll(stdout: str) -> tuple[dict[str, str], str, dict | None, list[dict]]:
    """Split the poll command's output: the host's share (systemd's unit properties, or the Slurm engine's
    `@@step`/`@@job` head read by slurm_launch.share_props), the fabric link state, rank 0's latest metrics, and
    the worker failures torchrun logged in this launch."""
    props_text, _, rest = stdout.partition("@@link\n")
    link, _, rest = rest.partition("@@metrics\n")
    metrics_text, _, failures_text = rest.partition("@@failures\n")
    failures_text = failures_text.partition("@@counters\n")[0]
    if props_text.startswith("@@step\n"):
        props = slurm_launch.share_props(props_text)
    else:
        props = dict(line.split("=", 1) for line in props_text.splitlines() if "=" in line)
    metrics = None
    for line in metrics_text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("rank") == 0:
            metrics = record
    return props, link.strip(), metrics, worker_failures(failures_text)


def rdzv_host_problems(rdzv_host: str, inventory_hosts: list[str], scheduler: str) -> list[str]:
    """What is wrong with train_launch_rdzv_host (the rendezvous store's own host; "" keeps it in node rank 0's
    agent), before anything is staged."""
    if not rdzv_host:
        return []
    out = []
    if rdzv_host not in inventory_hosts:
        out.append(f"train_launch_rdzv_host={rdzv_host} is not a host of the inventory")
    if scheduler == "slurm":
        out.append(
            "train_launch_rdzv_host (a rendezvous that outlives any node) is not offered through Slurm: Slurm ends the "
            "whole job when one of its nodes fails; use train_launch_scheduler=systemd"
        )
    return out


REJOIN_PROPS = "LoadState,ActiveState,Result,ConditionResult,ConditionTimestampMonotonic"
WATCHED = "logs/.watched"  # under the run's directory: touched by every poll of the watch
_EXECUTABLE = re.compile(r"[A-Za-z0-9/][A-Za-z0-9_./+-]*")  # no systemd prefix (-, @, !, ...)


def rejoin_unit_name(unit: str) -> str:
    """The unit that starts `unit` (a host's transient share of a run) again after the host restarted."""
    return f"{unit}-rejoin.service"


def systemd_quote(arg: str) -> str:
    """`arg` as one word of a unit file's command line (systemd.service(5) "Command lines"): in double quotes,
    backslash and double quote escaped, `%` (a specifier) and `$` (a variable) doubled."""
    text = str(arg)
    if any(c in text for c in "\n\r\0"):
        raise RuleError(f"{text!r}: a command line word cannot hold a line break or NUL")
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{text}"'


def rejoin_check(run_dir: str, until: Any, fresh: Any, store: str, port: Any, python: str, wait: Any = 60) -> str:
    """The rejoin unit's ExecCondition, a sh script: whether this boot may start the share again. Only before the
    launch's deadline (`until`, epoch), only while the watch read this host less than `fresh` seconds ago (each poll
    touches WATCHED: a host back later has been counted lost, or the run has ended without it), and only when the
    rendezvous store answers at `store`:`port` (gone once the run ended; tried for up to `wait` seconds while the
    fabric comes up, with `python`, the training venv's). Exit 1 with the reason otherwise: systemd skips the unit."""
    until, fresh, wait, port = int(float(until)), int(float(fresh)), int(float(wait)), int(port)
    q = shlex.quote
    watched = q(f"{run_dir}/{WATCHED}")
    probe = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()"
    return "\n".join(
        [
            "#!/bin/sh",
            "# Written by the launch (train_launch's rejoin unit): may this boot start the run's share again?",
            "now=$(date +%s)",
            f'[ "$now" -lt {until} ] || {{ echo "rejoin: skipped, the launch\'s deadline has passed"; exit 1; }}',
            f"seen=$(stat -c %Y {watched} 2>/dev/null) || "
            '{ echo "rejoin: skipped, no watch read this host"; exit 1; }',
            f'[ $((now - seen)) -lt {fresh} ] || {{ echo "rejoin: skipped, the watch last read this host '
            '$((now - seen)) s ago (the run counted it lost, or ended)"; exit 1; }',
            "i=0",
            f"while [ $i -lt {wait} ]; do",
            f"  {q(python)} -c {q(probe)} {q(store)} {port} 2>/dev/null && exit 0",
            "  i=$((i + 2)); sleep 2",
            "done",
            f'echo "rejoin: skipped, the rendezvous store {store}:{port} does not answer (the run has ended)"',
            "exit 1",
            "",
        ]
    )


def rejoin_unit_text(argv: list[str], run_id: str, node_rank: Any, log: str, check: str) -> str:
    """The unit file that brings a host's share of run `run_id` back after the host restarted: at boot, when the
    script `check` (rejoin_check, on the host) allows it, it marks the rejoin in the job's log and runs `argv`
    again (the systemd-run command line that started the share: the same transient unit, environment and torchrun
    command; torchrun's agent joins the rendezvous the survivors' agents wait in, or that they open once they see
    it waiting). The role removes it when the share ends or is stopped, and reset.yml any left behind."""
    rank = int(node_rank)
    if not argv or not _EXECUTABLE.fullmatch(str(argv[0])):
        raise RuleError(f"the rejoin unit's command must start with a plain executable, got {argv[:1]!r}")
    words = " ".join([str(argv[0]), *(systemd_quote(a) for a in argv[1:])])
    mark = 'echo "=== rejoin after a reboot at $(date -u +%FT%TZ) (node rank ' + str(rank) + ') ==="'
    return (
        "[Unit]\n"
        f"Description=rdma-llm training run {run_id} node rank {rank}: rejoin the run after a reboot\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"StandardOutput=append:{log}\n"
        f"StandardError=append:{log}\n"
        # A boot after the deadline, long after the watch last read the host, or once the store is gone starts nothing.
        f"ExecCondition=/bin/sh {systemd_quote(check)}\n"
        f"ExecStartPre=/bin/sh -c {systemd_quote(mark)}\n"
        f"ExecStart={words}\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def stage_packs(payload_src: str, data_src: str = "", model_src: str = "") -> list[dict[str, str]]:
    """What the launch packs on the controller and stages on every host: the payload always, the corpus and the
    model directory where they come from the controller (absolute paths; empty: not staged). `top` is the
    directory's name inside its pack."""
    packs = [("payload", payload_src), ("data", data_src), ("model", model_src)]
    for name, src in packs:
        if src and not str(src).startswith("/"):
            raise RuleError(f"stage: the {name} source must be an absolute path on the controller, got {src!r}")
    top = posixpath.basename
    return [{"name": name, "src": str(src), "top": top(str(src).rstrip("/"))} for name, src in packs if src]


def staged_packs(packs: list[dict[str, str]], checksums: list[str], root: str) -> dict[str, dict[str, str]]:
    """Each pack's place on the hosts, named by its checksum (a re-run copies nothing; a changed source is a new
    directory): name -> {sha, dir, path (dir/top, what the payload reads)} plus the pack's own keys."""
    if len(packs) != len(checksums) or not all(checksums):
        raise RuleError(f"stage: {len(packs)} packs but checksums {checksums!r}")
    out = {}
    for pack, sha in zip(packs, checksums, strict=True):
        folder = f"{root}/stage/{pack['name']}-{sha[:16]}"
        out[pack["name"]] = {**pack, "sha": sha, "dir": folder, "path": f"{folder}/{pack['top']}"}
    return out


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_rank_order": rank_order,
    "train_launch_payload_values": payload_values,
    "train_launch_nccl_env": nccl_env,
    "train_launch_qos_note": qos_note,
    "train_launch_worker_failures": worker_failures,
    "train_launch_job_outcome": job_outcome,
    "train_launch_elastic_plan": elastic_plan,
    "train_launch_progress_line": progress_line,
    "train_launch_gate_verdict": gate_verdict,
    "train_launch_allreduce_results": allreduce_results,
    "train_launch_peer_args": peer_args,
    "train_launch_preflight_nodes": preflight_nodes,
    "train_launch_manifest_nodes": manifest_nodes,
    "train_launch_common_checkpoint": common_checkpoint,
    "train_launch_preflight_problems": preflight_problems,
    "train_launch_rdzv_host_problems": rdzv_host_problems,
    "train_launch_rejoin_unit_text": rejoin_unit_text,
    "train_launch_rejoin_unit_name": rejoin_unit_name,
    "train_launch_rejoin_check": rejoin_check,
    "train_launch_stage_packs": stage_packs,
    "train_launch_staged_packs": staged_packs,
}
