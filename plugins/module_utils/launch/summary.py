"""One collected run read into the report's summary (artifacts/<run_id>/{manifest.json, <host>/out/metrics.jsonl,
result.json, <host>/logs}): the records of every host, the lineage of rank 0, this launch's worker failures from the
hosts' torchrun logs, NCCL's transport from its own logs, the goodput of this launch and of the run, the stragglers,
the hang and the fabric's account. report.py writes it out."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import failures
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.goodput import (
    goodput,
    lost_nodes,
    quarantines,
    restarts,
    run_goodput,
    segments,
    stragglers,
)


def read_jsonl(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def worker_failures(run: Path, nodes: list[dict], launch_id: str | None, near: float | None = None) -> list[dict]:
    """Worker failures torchrun logged in this launch on every host (failures.worker_failures, with `host`)."""
    out = []
    for node in nodes:
        log = run / node["host"] / "logs" / "torchrun.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        # The log grows over the launches of a run; the role marks where each begins.
        if launch_id:
            text = text.rpartition(f"=== launch {launch_id} ===")[2].partition("=== launch ")[0]
        out.extend({**f, "host": node["host"]} for f in failures.worker_failures(text, near))
    return out


def nccl_transport(run: Path, nodes: list[dict]) -> dict:
    """What NCCL said of the transport it used on each host, judged by the validation ladder's rules
    (rdma_stack_nccl.transport_checks): RDMA where the launch gave NCCL an HCA (not where the user chose TCP,
    train_launch_allow_tcp), not the TCP-socket fall-back, and there GPUDirect RDMA. The launch has NCCL write
    its INIT/NET log to logs/nccl.<host>.<pid>.log on GPUs (one file a process, every launch of the run); hosts
    without one (gloo on CPUs) are left out."""
    out = {}
    for node in nodes:
        files = sorted((run / node["host"] / "logs").glob("nccl.*.log"))
        if not files:
            continue
        nccl = nccl_rules.parse_nccl_log([line for f in files for line in f.read_text(errors="replace").splitlines()])
        expected = bool((node.get("rdma") or {}).get("hca"))
        checks = [{"check": c, "status": s, "detail": d} for c, s, d in nccl_rules.transport_checks(nccl, expected)]
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
    # Where the run is on the monitoring's timeline: the play's start and end, and each monitoring host's Prometheus.
    summary["time_range"] = [float(manifest["timings"]["started_epoch"]), float(manifest["timings"]["ended_epoch"])]
    summary["prometheus"] = list((manifest.get("monitoring") or {}).get("prometheus") or [])
    # The fabric's counters over the job (module_utils/launch/fabric.py): fabric.json, when the launch read them.
    fabric = run / "fabric.json"
    summary["fabric"] = json.loads(fabric.read_text()) if fabric.exists() else None
    return summary
