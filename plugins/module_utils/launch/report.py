"""Summarise one collected run: artifacts/<run_id>/{manifest.json, <host>/out/metrics.jsonl, result.json}.

Writes report.json, report.md, loss.png and throughput.png beside the manifest and returns a short summary
(action rdma_llm.cluster.train_report, on the controller).
Rank 0's records carry the global numbers (loss averaged over ranks, tokens/s of the whole job).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
from pathlib import Path

# The launch's rules (one place for how torchrun reports a dead worker).
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import fabric as train_fabric
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import train as filters


def read_jsonl(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def restarts(
    rank0: list[dict], launched: float | None, failures: list[dict], lost: list[dict] | None = None
) -> list[dict]:
    """Every automatic restart of this launch: rank 0 started again and resumed from a checkpoint.

    Steps lost = the last step rank 0 logged before the restart minus the checkpoint step it resumed at.
    `failures` are the worker failures torchrun logged on every host (worker_failures); the cause of a restart
    is the one where it started (filters.first_failure) among those logged since the previous start. A restart
    on fewer ranks (the world size of rank 0's start records shrank) after hosts were lost for good (`lost`,
    the manifest's lost_nodes) names those hosts as its cause: their logs are not collected."""
    events = sorted((r for r in rank0 if not launched or r["time"] >= float(launched)), key=lambda r: r["time"])
    starts = [i for i, r in enumerate(events) if r.get("kind") == "start"]
    out = []
    for n, i in enumerate(starts[1:]):
        # The last step reached: a failed result record's final_step may be past the last logged interval.
        before = sorted(
            [r["step"] for r in events[starts[n] : i] if r.get("kind") == "train"]
            + [r["final_step"] for r in events[starts[n] : i] if r.get("kind") == "result" and r.get("final_step")]
        )
        resumed = next((r["step"] for r in events[i:] if r.get("kind") == "resume"), None)
        since, until = events[starts[n]]["time"], events[i]["time"]
        # Untimed lines (no log prefix) count for every restart; a timed one for the restart that follows it.
        window = [f for f in failures if f.get("time") is None or since - 1 <= f["time"] <= until + 1]
        first = filters.first_failure(window)
        world = events[starts[n]].get("world_size"), events[i].get("world_size")
        gone = [g for g in lost or [] if g.get("at") is None or float(g["at"]) <= until]
        cause = (
            f"{first['host']}: {first['text']} (pid {first['pid']})"
            + (f": {first['error']}" if first.get("error") else "")
            if first
            else "unknown (see the hosts' torchrun logs)"
        )
        if gone and None not in world and world[1] < world[0]:
            cause = "; ".join(f"{g['host']} lost ({g.get('why')})" for g in gone)
        out.append(
            {
                "time": events[i]["time"],
                "last_step_before": before[-1] if before else None,
                "resumed_at_step": resumed,
                "steps_lost": max(before[-1] - resumed, 0) if before and resumed is not None else None,
                "world_size_before": world[0],
                "world_size_after": world[1],
                "cause": cause,
            }
        )
    return out


def segments(rank0: list[dict], since: float | None, until: float | None = None) -> list[dict]:
    """Rank 0's records between `since` and `until` cut at each `start` record: one segment per start of the
    workers (the launch's first, then one per automatic restart), each with the step it started from (its
    `resume` record's, else 0), the last step it reached (its train records' and a failed `result` record's
    final_step: a worker may step past its last logged interval), its `first_step` record's time and its
    train records."""
    events = sorted(
        (r for r in rank0 if (not since or r["time"] >= float(since)) and (not until or r["time"] <= float(until))),
        key=lambda r: r["time"],
    )
    out: list[dict] = []
    for r in events:
        if r.get("kind") == "start":
            out.append({"start": r["time"], "start_step": 0, "last_step": None, "first_step_at": None,
                        "last_record": r["time"], "failed_at": None, "train": []})  # fmt: skip
            continue
        if not out:
            continue
        seg = out[-1]
        kind = r.get("kind")
        if not (kind == "result" and r.get("status") == "failed"):  # rank 0's last progress, not its failure
            seg["last_record"] = r["time"]
        if kind == "resume":
            seg["start_step"] = r["step"]
        elif kind == "first_step" and seg["first_step_at"] is None:
            seg["first_step_at"] = r["time"]
        elif kind == "train":
            seg["train"].append(r)
        elif kind == "result" and r.get("status") == "failed":
            seg["failed_at"] = r["time"]
        step = r.get("final_step") if kind == "result" else r.get("step") if kind == "train" else None
        if step is not None:
            seg["last_step"] = max(seg["last_step"] or 0, int(step))
    return out


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _kept_at(seg: dict, step: int) -> float | None:
    """When rank 0 finished `step` in segment `seg`: the train record that logged it, else the first one after it
    less its steps' time at that interval's step_ms (None when no record reaches it)."""
    for r in seg["train"]:
        if r["step"] >= step:
            return r["time"] - (r["step"] - step) * float(r.get("step_ms") or 0) / 1000
    return None


def goodput(rank0: list[dict], since: float | None, until: float | None, failures: list[dict]) -> dict:
    """The time accounting of one launch (rank 0's records from `since` to `until`, the launch's epochs).

    productive_s: the step time (each train record's step_ms times the steps of its interval) of the steps that
    were kept: a step a restart went back behind (it resumed from an earlier checkpoint) was trained again and
    counts once, in the segment that kept it. Each restart: `kept_until`, when rank 0 finished the checkpoint
    step it resumed from; `last_progress`, rank 0's last record before it; `detected`, the first worker failure
    torchrun logged on any host (its log time; `failures` as worker_failures gives them) or rank 0's own failed
    result record, whichever came first; `restarted`, rank 0's next start record; `first_step_at`, its
    first_step record (the first train record when an older payload wrote none); `lost_s` from kept_until to
    first_step_at; `steps_recomputed` from the last step reached to the one resumed at. ettr = productive /
    wall (Llama 3's "effective training time"); `other_s` is the rest: start-up, evaluations, checkpoints,
    shutdown."""
    segs = segments(rank0, since, until)
    productive = 0.0
    for i, seg in enumerate(segs):
        keep = segs[i + 1]["start_step"] if i + 1 < len(segs) else math.inf
        prev = seg["start_step"]
        for r in seg["train"]:
            n = min(r["step"], keep) - prev
            if n > 0 and r.get("step_ms"):
                productive += n * float(r["step_ms"]) / 1000
            prev = r["step"]
    events = []
    for before, after in itertools.pairwise(segs):
        window = [
            f["time"]
            for f in failures
            if f.get("time") is not None and before["start"] - 1 <= f["time"] <= after["start"]
        ]
        detected = min([*window, *([before["failed_at"]] if before["failed_at"] else [])], default=None)
        first = after["first_step_at"] or (after["train"][0]["time"] if after["train"] else None)
        kept = _kept_at(before, after["start_step"]) if after["start_step"] else before["start"]
        reached = before["last_step"]
        events.append(
            {
                "kept_until": _round(kept),
                "last_progress": _round(before["last_record"]),
                "detected": _round(detected),
                "restarted": _round(after["start"]),
                "first_step_at": _round(first),
                "detect_s": _round(detected - before["last_record"] if detected else None),
                "restart_s": _round(after["start"] - detected if detected else None),
                "to_first_step_s": _round(first - after["start"] if first else None),
                "lost_s": _round(first - kept if first and kept else None),
                "steps_recomputed": max(reached - after["start_step"], 0) if reached is not None else None,
            }
        )
    wall = float(until) - float(since) if since and until else None
    lost = sum(e["lost_s"] or 0 for e in events)
    return {
        "wall_s": _round(wall, 3),
        "productive_s": _round(productive, 3),
        "failures_s": _round(lost),
        "other_s": _round(wall - productive - lost if wall is not None else None),
        "ettr": round(productive / wall, 4) if wall else None,
        "steps_recomputed": sum(e["steps_recomputed"] or 0 for e in events),
        "failures": events,
    }


def _round(v: float | None, digits: int = 1) -> float | None:
    return None if v is None else round(float(v), digits)


def run_goodput(launches: list[dict]) -> dict:
    """The accounting over every launch of a run id (each launch's goodput with its `launch_id`, `launched`
    and `ended` epochs, in any order): the run's wall time from the first launch to the last one's end, the
    time between launches (the run was down: a failed launch waiting for its resume) and the steps a resume
    trained again (`resume_recomputed`, the last step the earlier launch reached less the step resumed at)."""
    launches = sorted(launches, key=lambda g: g["launched"])
    if not launches:
        return {}
    wall = launches[-1]["ended"] - launches[0]["launched"]
    between = sum(max(b["launched"] - a["ended"], 0.0) for a, b in itertools.pairwise(launches))
    productive = sum(g["productive_s"] or 0 for g in launches)
    return {
        "launches": len(launches),
        "wall_s": _round(wall, 3),
        "productive_s": _round(productive, 3),
        "failures_s": _round(sum(g["failures_s"] or 0 for g in launches)),
        "between_launches_s": _round(between),
        "ettr": round(productive / wall, 4) if wall > 0 else None,
        "failures": sum(len(g["failures"]) for g in launches),
        "steps_recomputed": sum(g["steps_recomputed"] + (g.get("resume_recomputed") or 0) for g in launches),
    }


# The straggler rule: NVIDIA's straggler detection (nvidia-resiliency-ext, as Megatron's
# NVRxStragglerDetectionConfig sets it: gpu_relative_perf_threshold = 0.7) calls a rank a straggler when its
# performance relative to the reference falls below 0.7, i.e. its section takes more than 1/0.7 = 1.43 x as long.
# Its reference is the best rank; this one takes the median of the rank's peers at the same step (one unusually
# fast rank does not make the others stragglers, and with two ranks the peer is the other one). "Persistently":
# in more than half of the intervals the rank logged, and at least 3 of them (ours: one slow interval, a
# checkpoint write or a garbage collection, is no straggler).
STRAGGLER_MIN_INTERVALS = 3


def stragglers(records: list[dict], since: float | None, threshold: float | None) -> dict:
    """Per-rank forward time (`fwd_ms` of every rank's train records since `since`; every rank writes its own
    records) against the median of its peers at the same step. A rank whose median ratio exceeds 1/threshold in
    more than half of its intervals (at least STRAGGLER_MIN_INTERVALS) is named. `threshold` 0 or None: not
    judged."""
    by_step: dict[int, dict[int, float]] = {}
    for r in records:
        if r.get("kind") == "train" and r.get("fwd_ms") is not None and (not since or r["time"] >= float(since)):
            by_step.setdefault(int(r["step"]), {})[int(r["rank"])] = float(r["fwd_ms"])
    ratios: dict[int, list[float]] = {}
    for per_rank in by_step.values():
        for rank, ms in per_rank.items():
            mid = _median([v for r, v in per_rank.items() if r != rank])
            if mid:
                ratios.setdefault(rank, []).append(ms / mid)
    hosts = {int(r["rank"]): r.get("host") for r in records if r.get("kind") == "start" and "rank" in r}
    limit = 1 / float(threshold) if threshold else None
    ranks, slow = [], []
    for rank, rs in sorted(ratios.items()):
        over = sum(1 for x in rs if limit and x > limit)
        entry = {
            "rank": rank,
            "host": hosts.get(rank),
            "intervals": len(rs),
            "median_ratio": round(_median(rs), 3),
            "intervals_over": over,
        }
        ranks.append(entry)
        if limit and len(rs) >= STRAGGLER_MIN_INTERVALS and over * 2 > len(rs):
            slow.append(entry)
    return {
        "threshold": threshold,
        "slower_than": round(limit, 3) if limit else None,
        "ranks": ranks,
        "stragglers": slow,
    }


def worker_failures(run: Path, nodes: list[dict], launch_id: str | None, near: float | None = None) -> list[dict]:
    """Worker failures torchrun logged in this launch on every host (filters.worker_failures, with `host`)."""
    out = []
    for node in nodes:
        log = run / node["host"] / "logs" / "torchrun.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        # The log grows over the launches of a run; the role marks where each begins.
        if launch_id:
            text = text.rpartition(f"=== launch {launch_id} ===")[2].partition("=== launch ")[0]
        out.extend({**f, "host": node["host"]} for f in filters.worker_failures(text, near))
    return out


def nccl_transport(run: Path, nodes: list[dict]) -> dict:
    """What NCCL said of the transport it used on each host, judged by the validation ladder's rules
    (rdma_stack_nccl.transport_checks): RDMA where the launch gave NCCL an HCA (not where the user chose TCP,
    train_launch_allow_tcp), not the TCP-socket fall-back, and there GPUDirect RDMA. The launch has NCCL write
    its INIT/NET log to logs/nccl.<host>.<pid>.log on GPUs (one file a process, every launch of the run); hosts
    without one (gloo on CPUs) are left out."""
    rules = filters.nccl_rules
    out = {}
    for node in nodes:
        files = sorted((run / node["host"] / "logs").glob("nccl.*.log"))
        if not files:
            continue
        nccl = rules.parse_nccl_log([line for f in files for line in f.read_text(errors="replace").splitlines()])
        expected = bool((node.get("rdma") or {}).get("hca"))
        checks = [{"check": c, "status": s, "detail": d} for c, s, d in rules.transport_checks(nccl, expected)]
        keep = ("version", "network", "devices", "channels", "gdr_channels", "socket_channels")
        out[node["host"]] = {k: nccl[k] for k in keep} | {"warnings": nccl["warnings"][:5], "checks": checks}
    return out


def lineage(records: list[dict]) -> list[dict]:
    """The records of the process that is rank 0 at the end, back through the ranks its host had before: an elastic
    restart numbers the ranks again, and when node rank 0 is lost for good (the rendezvous store elsewhere) a
    survivor becomes rank 0 while the lost node's records are not collected. Per start of that host's local rank 0,
    the records of the lowest rank the host had then. Where rank 0 never moved this is rank 0's records."""
    rank0 = [r for r in records if r.get("rank") == 0]
    starts = [r for r in rank0 if r.get("kind") == "start"]
    if not starts:
        return rank0
    host = max(starts, key=lambda r: r["time"])["host"]
    own = sorted((r for r in records if r.get("host") == host), key=lambda r: r["time"])
    out: list[dict] = []
    generation: list[dict] = []
    for r in [*own, None]:
        if r is None or (r.get("kind") == "start" and r.get("local_rank", 0) == 0 and generation):
            ranks = [g["rank"] for g in generation if g.get("kind") == "start" and "rank" in g]
            lowest = min(ranks) if ranks else 0
            out.extend(g for g in generation if g.get("rank") == lowest)
            generation = []
        if r is not None:
            generation.append(r)
    return out


def _unique(records: list[dict]) -> list[dict]:
    """A shared out_dir puts the same records in every host's copy: each once (the first host that has it)."""
    seen, out = set(), []
    for r in records:
        key = json.dumps({k: v for k, v in r.items() if k != "host"}, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def run_accounting(run: Path, manifest: dict, rank0: list[dict]) -> tuple[dict, dict]:
    """This launch's goodput and the run's over every launch whose manifest-<launch_id>.json is in `run`
    (this one's manifest wins for its own id): each launch's window from its manifest's timings, its
    restarts' causes from the torchrun log lines of that launch."""
    manifests = {}
    for path in sorted(run.glob("manifest-*.json")):
        with contextlib.suppress(OSError, ValueError):
            m = json.loads(path.read_text())
            manifests[m.get("launch_id") or path.stem] = m
    manifests[manifest.get("launch_id")] = manifest
    launches, this = [], {}
    for launch_id, m in manifests.items():
        t = m.get("timings") or {}
        if not t.get("launched_epoch") or not t.get("ended_epoch"):
            continue  # a launch that failed before its units started trained nothing
        since, until = float(t["launched_epoch"]), float(t["ended_epoch"])
        g = goodput(rank0, since, until, worker_failures(run, m.get("nodes") or [], launch_id, since))
        segs = segments(rank0, since, until)
        earlier = segments(rank0, None, since)
        if segs and segs[0]["start_step"] and earlier and earlier[-1]["last_step"] is not None:
            g["resume_recomputed"] = max(earlier[-1]["last_step"] - segs[0]["start_step"], 0)
        launches.append({**g, "launch_id": launch_id, "launched": since, "ended": until})
        if launch_id == manifest.get("launch_id"):
            this = g
    return this, run_goodput(launches)


def summarise(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text())
    records, results = [], {}
    for node in manifest["nodes"]:
        host_dir = run / node["host"]
        for rec in read_jsonl(host_dir / "out" / "metrics.jsonl"):
            records.append({**rec, "host": node["host"]})
        res = host_dir / "out" / "result.json"
        if res.exists():
            results[node["host"]] = json.loads(res.read_text())
    everyone = _unique(records)
    rank0 = [r for r in everyone if r.get("rank") == 0]
    # Restarts and goodput follow the process that is rank 0 at the end, through the ranks it had before.
    line = lineage(everyone)
    train = sorted((r for r in rank0 if r.get("kind") == "train"), key=lambda r: (r["time"], r["step"]))
    evals = sorted((r for r in rank0 if r.get("kind") == "eval"), key=lambda r: (r["time"], r["step"]))
    result = next((r for r in results.values() if r.get("final_val_loss") is not None), None)
    launched = manifest["timings"].get("launched_epoch")
    # Timings and throughput belong to this launch; the loss curves keep the run's whole history.
    this_launch = [r for r in train if not launched or r["time"] >= float(launched)]
    first_step = this_launch[0]["time"] if this_launch else None
    tps = [r["tokens_per_s"] for r in this_launch if r.get("tokens_per_s")]
    summary = {
        "run_id": manifest["run_id"],
        "outcome": manifest["outcome"],
        "message": manifest["message"],
        "engine": manifest["engine"],
        "model": manifest["model"],
        "nodes": len(manifest["nodes"]),
        "world_size": result["world_size"] if result else None,
        "final_step": train[-1]["step"] if train else None,
        "initial_val_loss": evals[0]["val_loss"] if evals else None,
        "final_val_loss": evals[-1]["val_loss"] if evals else None,
        "final_train_loss": train[-1].get("loss_global") if train else None,
        "tokens_per_s_median": sorted(tps)[len(tps) // 2] if tps else None,
        "tokens_per_s_per_rank_median": (sorted(tps)[len(tps) // 2] / result["world_size"])
        if tps and result and result.get("world_size")
        else None,
        "launch_id": manifest.get("launch_id"),
        "launch_to_first_step_s": round(max(first_step - float(launched), 0.0), 1) if first_step and launched else None,
        "launch_to_end_s": round(max(float(manifest["timings"]["ended_epoch"]) - float(launched), 0.0), 1)
        if launched
        else None,
        "total_s": round(
            max(float(manifest["timings"]["ended_epoch"]) - float(manifest["timings"]["started_epoch"]), 0.0), 1
        ),
        "restarts": restarts(
            line,
            launched,
            worker_failures(run, manifest["nodes"], manifest.get("launch_id"), launched),
            manifest.get("lost_nodes"),
        ),
        "results": results,
        "curves": {
            "train": [[r["step"], r.get("loss_global")] for r in train],
            "eval": [[r["step"], r["val_loss"]] for r in evals],
            "tokens_per_s": [[r["step"], r.get("tokens_per_s")] for r in this_launch],
        },
    }
    summary["lost_nodes"] = lost_nodes(manifest.get("lost_nodes") or [], summary["restarts"])
    summary["goodput"], summary["run_goodput"] = run_accounting(run, manifest, line)
    threshold = (manifest.get("limits") or {}).get("straggler_threshold")
    summary["stragglers"] = stragglers(everyone, launched, threshold)
    summary["nccl"] = nccl_transport(run, manifest["nodes"])
    summary["quarantined"] = quarantines(rank0, launched)
    # The launch's watch saw the steps stall and dumped every rank (module_utils/launch/hang.py's verdict).
    summary["hang"] = manifest.get("hang")
    # The fabric's counters over the job (module_utils/launch/fabric.py): fabric.json, when the launch read them.
    fabric = run / "fabric.json"
    summary["fabric"] = json.loads(fabric.read_text()) if fabric.exists() else None
    return summary


def quarantines(rank0: list[dict], since: float | None) -> list[dict]:
    """The checkpoints this launch's resumes found corrupt and quarantined (the `quarantined` of rank 0's
    `resume` records, payload/ckpt_verify.py: renamed quarantine-<name>-<time> on the hosts), each with the step
    the run went back to instead: the steps between were trained again (goodput's steps recomputed)."""
    resumes = sorted(
        (r for r in rank0 if r.get("kind") == "resume" and (not since or r["time"] >= float(since))),
        key=lambda r: r["time"],
    )
    return [
        {"time": r["time"], "checkpoint": q.get("checkpoint"), "why": q.get("why"), "resumed_at_step": r.get("step")}
        for r in resumes
        for q in r.get("quarantined") or []
    ]


def quarantine_lines(found: list[dict]) -> list[str]:
    """One line per quarantined checkpoint: which, when, why, and the step the run went back to."""
    return [
        f"{q['checkpoint']} at {_clock(q['time'])} ({q['why']}): resumed from step {fmt(q['resumed_at_step'])}"
        for q in found
    ]


def transport_lines(nccl: dict) -> list[str]:
    """One line per host: `n1: NCCL 2.27.5 over IB (mlx5_0:1): pass; GPUDirect RDMA on all 8 network channel(s):
    pass`; a failed check is marked so the eye finds it."""
    out = []
    for host, t in sorted(nccl.items()):
        checks = "; ".join(
            f"{c['detail']}: {c['status'].upper() if c['status'] == 'fail' else c['status']}" for c in t["checks"]
        )
        out.append(f"{host}: NCCL {t['version'] or '?'}: {checks}")
    return out


def lost_nodes(lost: list[dict], restarts: list[dict]) -> list[dict]:
    """Each host lost for good with the restart that went on without it: the step rank 0 had logged, the step
    the survivors resumed at, and the world size before and after."""
    out = []
    for g in lost:
        after = [r for r in restarts if g["host"] in r["cause"] and r["world_size_after"] is not None]
        r = after[0] if after else {}
        out.append(
            {
                "host": g["host"],
                "at": g.get("at"),
                "why": g.get("why"),
                "last_step_before": r.get("last_step_before"),
                "resumed_at_step": r.get("resumed_at_step"),
                "world_size_before": r.get("world_size_before"),
                "world_size_after": r.get("world_size_after"),
            }
        )
    return out


def plot(summary: dict, run: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = summary["curves"]
    title = f"{summary['run_id']} · {summary['engine']} · {summary['model']} · {summary['nodes']} node(s)"
    charts = {
        # file: (y label, [(curve, line style, legend)])
        "loss.png": ("loss", [("train", "-", "train loss (all ranks)"), ("eval", "o-", "validation loss")]),
        "throughput.png": ("tokens/s", [("tokens_per_s", "-", "tokens/s (whole job)")]),
    }
    for name, (ylabel, lines) in charts.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        for curve, style, label in lines:
            if curves[curve]:
                ax.plot(*zip(*curves[curve], strict=True), style, label=label)
        ax.set_ylim(bottom=0)  # a throughput or loss axis that starts at zero shows the real proportions
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        if ax.lines:  # a run without metrics has no curve to name
            ax.legend()
        fig.tight_layout()
        fig.savefig(run / name, dpi=110)
        plt.close(fig)
    return list(charts)


def _clock(epoch) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(float(epoch))) if epoch else "?"


def fmt(v, spec=".4f"):
    return "-" if v is None else format(v, spec) if isinstance(v, float) else str(v)


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


def goodput_lines(s: dict) -> list[str]:
    """report.md's time accounting: this launch, each failure's timeline, and the run over its launches."""
    g, run = s.get("goodput") or {}, s.get("run_goodput") or {}
    if not g:
        return []
    out = [
        "Time accounting (goodput) of this launch: productive = the step time of the steps kept; a failure costs",
        "from the end of the checkpoint step it went back to until the first step again.",
        "",
        "| wall (launch → end) | productive training | effective training time ratio | lost to failures | "
        "steps recomputed | other (start-up, evaluation, checkpoints, shutdown) |",
        "|---|---|---|---|---|---|",
        f"| {fmt(g['wall_s'], '.1f')} s | {fmt(g['productive_s'], '.1f')} s | {_pct(g['ettr'])} | "
        f"{fmt(g['failures_s'], '.1f')} s | {fmt(g['steps_recomputed'])} | {fmt(g['other_s'], '.1f')} s |",
        "",
    ]
    if g["failures"]:
        out += [
            "| failure | last progress | detected (+s) | restarted (+s) | first step again (+s) | lost | "
            "steps recomputed |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {n} | {_clock(e['last_progress'])} | {_clock(e['detected'])} ({fmt(e['detect_s'], '.1f')}) | "
                f"{_clock(e['restarted'])} ({fmt(e['restart_s'], '.1f')}) | {_clock(e['first_step_at'])} "
                f"({fmt(e['to_first_step_s'], '.1f')}) | {fmt(e['lost_s'], '.1f')} s | {fmt(e['steps_recomputed'])} |"
                for n, e in enumerate(g["failures"], 1)
            ),
            "",
        ]
    if run.get("launches", 0) > 1:
        out += [
            f"Over the run's {run['launches']} launches: {fmt(run['wall_s'], '.1f')} s from the first launch to "
            f"this end, {fmt(run['productive_s'], '.1f')} s productive ({_pct(run['ettr'])}), "
            f"{fmt(run['failures_s'], '.1f')} s lost to {run['failures']} automatic restart(s), "
            f"{fmt(run['between_launches_s'], '.1f')} s between launches, {fmt(run['steps_recomputed'])} steps "
            "recomputed.",
            "",
        ]
    return out


def straggler_lines(st: dict) -> list[str]:
    """report.md's straggler verdict: each rank named with its host, or that none was (or why not judged)."""
    if not st.get("threshold"):
        return ["Stragglers: not judged (no straggler threshold in the manifest).", ""]
    if not st["ranks"]:
        return ["Stragglers: not judged (no rank logged its forward time beside a peer's).", ""]
    rule = (
        f"forward time over {st['slower_than']} x its peers' median (relative performance below "
        f"{st['threshold']}) in most intervals"
    )
    if not st["stragglers"]:
        return [f"Stragglers: none ({rule}; {len(st['ranks'])} ranks compared).", ""]
    named = "; ".join(
        f"**rank {r['rank']} on {r['host'] or '?'}** ({r['median_ratio']} x its peers' median, "
        f"{r['intervals_over']} of {r['intervals']} intervals)"
        for r in st["stragglers"]
    )
    return [f"Stragglers ({rule}): {named}.", ""]


def markdown(s: dict) -> str:
    lines = [
        f"# Run {s['run_id']}: {s['outcome']}",
        "",
        f"{s['engine']} · model {s['model']} · {s['nodes']} node(s) · world size {fmt(s['world_size'])}"
        + (f"\n\n**{s['message']}**" if s["outcome"] != "completed" or s["lost_nodes"] else ""),
        "",
        "| metric | value |",
        "|---|---|",
        f"| final step | {fmt(s['final_step'])} |",
        f"| validation loss, first → last | {fmt(s['initial_val_loss'])} → {fmt(s['final_val_loss'])} |",
        f"| final train loss (all ranks) | {fmt(s['final_train_loss'])} |",
        f"| tokens/s, whole job (median) | {fmt(s['tokens_per_s_median'], ',.0f')} |",
        f"| tokens/s per rank (median) | {fmt(s['tokens_per_s_per_rank_median'], ',.0f')} |",
        f"| launch → first logged step | {fmt(s['launch_to_first_step_s'], '.1f')} s |",
        f"| launch → end | {fmt(s['launch_to_end_s'], '.1f')} s |",
        f"| playbook start → end | {fmt(s['total_s'], '.1f')} s |",
        f"| automatic restarts | {len(s['restarts'])} |",
        "",
        *(
            f"Lost for good: **{g['host']}**, last answered {_clock(g.get('at'))} ({g['why']}), after step "
            f"{fmt(g['last_step_before'])}; the job went on from step {fmt(g['resumed_at_step'])} with world size "
            f"{fmt(g['world_size_before'])} → {fmt(g['world_size_after'])}.\n"
            for g in s["lost_nodes"]
        ),
        *(
            [
                "| restart at | last step before | resumed at step | steps lost | world size | cause |",
                "|---|---|---|---|---|---|",
                *(
                    f"| {time.strftime('%H:%M:%S', time.gmtime(r['time']))} UTC | {fmt(r['last_step_before'])} | "
                    f"{fmt(r['resumed_at_step'])} | {fmt(r['steps_lost'])} | "
                    f"{fmt(r['world_size_before'])} → {fmt(r['world_size_after'])} | {r['cause']} |"
                    for r in s["restarts"]
                ),
                "",
            ]
            if s["restarts"]
            else []
        ),
        *goodput_lines(s),
        *(
            [
                "Checkpoints that failed verification at a resume (renamed quarantine-<name>-<time> on the hosts, "
                "kept for a post-mortem):",
                "",
                *(f"- {line}" for line in quarantine_lines(s["quarantined"])),
                "",
            ]
            if s.get("quarantined")
            else []
        ),
        *straggler_lines(s.get("stragglers") or {}),
        *hang_lines(s.get("hang")),
        *(train_fabric.markdown(s["fabric"]) if s.get("fabric") else []),
        *(
            [
                "NCCL's transport, from its own log on each host (logs/nccl.*.log):",
                "",
                *(f"- {line}" for line in transport_lines(s["nccl"])),
                "",
            ]
            if s["nccl"]
            else []
        ),
        "Scaling: tokens/s per rank compared with a one-node run of the same model and batch gives the scaling",
        "efficiency; on the lab all ranks share one machine's cores, so the lab proves correctness, not speed.",
        "",
        "![loss](loss.png)",
        "",
        "![throughput](throughput.png)",
        "",
        "Per-host logs, metrics.jsonl and result.json are in the host folders; manifest.json has ranks,",
        "environment, command lines, package versions and checkpoint paths.",
    ]
    return "\n".join(lines) + "\n"


def hang_lines(hang: dict | None) -> list[str]:
    """report.md's account of a hang: each rank's state and frame when the steps stalled (stacks in
    <host>/logs/hang-<launch_id>.json)."""
    if not hang:
        return []
    return [
        f"The steps stalled at {_clock(hang.get('at'))}: {hang['message']}.",
        "",
        "| rank | host | state | reading | frame (training code) |",
        "|---|---|---|---|---|",
        *(
            f"| {r['rank']} | {r.get('host') or '-'} | {r.get('state') or '-'} | {r['why']} | "
            f"{r.get('where') or r.get('frame') or '-'} |"
            for r in hang.get("ranks") or []
        ),
        "",
        "Every rank's threads, as py-spy read them, are in <host>/logs/hang-<launch_id>.json.",
        "",
    ]


def write(run: Path) -> list[str]:
    """Write report.json, report.md and the plots into the run folder `run`; the summary lines for people."""
    lines: list[str] = []
    summary = summarise(run)
    made = plot(summary, run)
    if summary.get("fabric") and train_fabric.plot(summary["fabric"], run / "fabric.png"):
        made.append("fabric.png")
    report = json.dumps({k: v for k, v in summary.items() if k != "curves"}, indent=1) + "\n"
    (run / "report.json").write_text(report)
    if summary.get("launch_id"):  # each launch of a run (the first, every resume) keeps its own report
        (run / f"report-{summary['launch_id']}.json").write_text(report)
    (run / "report.md").write_text(markdown(summary))
    lines.append(
        f"run {summary['run_id']}: {summary['outcome']} — step {fmt(summary['final_step'])}, "
        f"val loss {fmt(summary['initial_val_loss'])} -> {fmt(summary['final_val_loss'])}, "
        f"{fmt(summary['tokens_per_s_median'], ',.0f')} tokens/s"
    )
    if summary["lost_nodes"]:  # the job went on without them (min_nodes): say so first
        lines.append(summary["message"])
    for g in summary["lost_nodes"]:
        lines.append(
            f"lost: {g['host']} at {_clock(g.get('at'))} ({g['why']}) after step {fmt(g['last_step_before'])}; "
            f"went on from step {fmt(g['resumed_at_step'])} with world size {fmt(g['world_size_before'])} -> "
            f"{fmt(g['world_size_after'])}"
        )
    for r in summary["restarts"]:
        lines.append(
            f"restart: after step {fmt(r['last_step_before'])}, resumed at {fmt(r['resumed_at_step'])} "
            f"({fmt(r['steps_lost'])} steps lost): {r['cause']}"
        )
    g = summary.get("goodput") or {}
    if g:
        lines.append(
            f"goodput: {fmt(g['productive_s'], '.1f')} s productive of {fmt(g['wall_s'], '.1f')} s "
            f"({_pct(g['ettr'])}), {fmt(g['failures_s'], '.1f')} s lost to {len(g['failures'])} failure(s), "
            f"{g['steps_recomputed']} steps recomputed"
        )
    for r in (summary.get("stragglers") or {}).get("stragglers", []):
        lines.append(
            f"straggler: rank {r['rank']} on {r['host']}: forward {r['median_ratio']} x its peers' median in "
            f"{r['intervals_over']} of {r['intervals']} intervals"
        )
    for line in quarantine_lines(summary["quarantined"]):
        lines.append(f"quarantined: {line}")
    if summary.get("hang"):
        lines.append(f"hang:   {summary['hang']['message']}")
    fabric = summary.get("fabric")
    if fabric:
        lossless = {True: "yes", False: "NO", None: "unknown"}[fabric.get("lossless")]
        lines.append(f"fabric: lossless during this run: {lossless} ({fabric.get('reason')})"[:400])
    for line in transport_lines(summary["nccl"]):
        lines.append(f"nccl:   {line}")
    lines.append(f"report: {run / 'report.md'}")
    for name in made:
        lines.append(f"plot:   {run / name}")
    return lines
