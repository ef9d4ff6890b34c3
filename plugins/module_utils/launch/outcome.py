"""The job's outcome from each host's watch result (tasks/decide.yml): failed where it started, stopped on
request, going on without hosts lost for good (train_launch_min_nodes), completed, timed out or queued; whether the
peers' records end a host's watch; the watch's progress line; the payload's evaluation gate; the manifest's node
entries."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.failures import is_cause


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
    # No exit status recorded (a share read without it): say so, never an empty code.
    return f"exit code {status or 'unknown'}"


_LOST = ("unreachable", "missing")
# A host's share that has not ended: training, queued (Slurm), coming back after its host restarted, or unknown
# while Slurm's controller does not answer (the job runs on without it: the watch keeps polling).
ACTIVE = ("running", "pending", "rejoining", "unknown")


def unknown_outcome(jobs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """`unknown` when some share could not be read because Slurm's controller did not answer (slurm_state's
    `Unknown`: the tool's own words), naming those hosts; None when every share was read."""
    hosts = sorted(h for h, j in jobs.items() if j.get("state") == "unknown")
    if not hosts:
        return None
    said = sorted({(jobs[h].get("unit") or {}).get("Unknown") or "controller unreachable" for h in hosts})
    return {
        "outcome": "unknown",
        "message": f"{'; '.join(said)}: the job's state on {', '.join(hosts)} is unknown until Slurm answers again "
        "(a controller outage does not stop a running job)",
        "first_failed": None,
        "lost": [],
    }


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
    can go on without them: the survivors decide it, and `lost` lists each lost host, when and why. A share whose
    state Slurm's controller could not tell (`unknown`) makes the outcome `unknown`, never failed or finished,
    unless another host failed for a reason of its own."""
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
            killed = any(is_cause(f) for f in job.get("workers") or [])
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
    unknown = unknown_outcome(jobs)
    if unknown:
        return unknown
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
        return head + f"step {m.get('step')}/{max_steps} | val loss {m.get('val_loss')}"
    if kind == "result":
        done = m.get("status") == "completed"
        return head + f"step {m.get('final_step')} {m.get('status')}" + (", saving and exporting" if done else "")
    return head + "starting"


def _failed_check(c: dict[str, Any]) -> str:
    if c.get("check") == "min_suite_score":
        model = c.get("model") or "the newest model"
        return f"min_suite_score: suite score {c.get('value')} < {c.get('limit')} ({model})"
    return f"{c.get('check')}: val loss {c.get('value')} > {c.get('limit'):.4f}"


def gate_verdict(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The payload's evaluation gate over the collected result.json files (one per node that wrote one) and the
    gate.json of `train.py eval` (its verdict on the newest model, the same shape): `fail` if any says fail, `pass`
    if one passed and none failed, else `off` (no gate asked, or no result)."""
    gates = [
        r if "checks" in r else r.get("gate")
        for r in results
        if isinstance(r, dict) and (isinstance(r.get("gate"), dict) or isinstance(r.get("checks"), list))
    ]
    failed = [g for g in gates if g.get("status") == "fail"]
    if failed:
        checks = [dict(c, model=failed[0].get("model")) for c in failed[0].get("checks", []) if not c.get("pass")]
        why = "; ".join(_failed_check(c) for c in checks)
        return {"status": "fail", "message": f"the evaluation gate failed ({why})"}
    if any(g.get("status") == "pass" for g in gates):
        return {"status": "pass", "message": "the evaluation gate passed"}
    return {"status": "off", "message": "no evaluation gate"}


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


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_job_outcome": job_outcome,
    "train_launch_progress_line": progress_line,
    "train_launch_gate_verdict": gate_verdict,
    "train_launch_manifest_nodes": manifest_nodes,
}
