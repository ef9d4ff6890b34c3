"""The run report's time accounting and straggler rule, from rank 0's (and every rank's) metrics records: each
automatic restart with its cause and the steps it lost, the segments between the workers' starts, the goodput of a
launch and of a run over its launches (ETTR), the checkpoints a resume quarantined, the hosts lost for good, and the
ranks that were persistently slower than their peers."""

from __future__ import annotations

import itertools
import math

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.failures import first_failure


def restarts(
    rank0: list[dict], launched: float | None, failures: list[dict], lost: list[dict] | None = None
) -> list[dict]:
    """Every automatic restart of this launch: rank 0 started again and resumed from a checkpoint.

    Steps lost = the last step rank 0 logged before the restart minus the checkpoint step it resumed at.
    `failures` are the worker failures torchrun logged on every host (worker_failures); the cause of a restart
    is the one where it started (first_failure) among those logged since the previous start. A restart
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
        first = first_failure(window)
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
