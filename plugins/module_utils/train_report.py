"""Summarise one collected run: artifacts/<run_id>/{manifest.json, <host>/out/metrics.jsonl, result.json}.

Writes report.json, report.md, loss.png and throughput.png beside the manifest and returns a short summary
(action rdma_llm.cluster.train_report, on the controller).
Rank 0's records carry the global numbers (loss averaged over ranks, tokens/s of the whole job).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

# The launch's rules (one place for how torchrun reports a dead worker).
from ansible_collections.rdma_llm.cluster.plugins.module_utils import train_launch as filters


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
        before = [r["step"] for r in events[:i] if r.get("kind") == "train"]
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
    # A shared out_dir puts the same records in every host's copy: count each once.
    seen, rank0 = set(), []
    for r in records:
        key = json.dumps({k: v for k, v in r.items() if k != "host"}, sort_keys=True)
        if r.get("rank") == 0 and key not in seen:
            seen.add(key)
            rank0.append(r)
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
            rank0,
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
    summary["nccl"] = nccl_transport(run, manifest["nodes"])
    return summary


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
        ax.legend()
        fig.tight_layout()
        fig.savefig(run / name, dpi=110)
        plt.close(fig)
    return list(charts)


def _clock(epoch) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(float(epoch))) if epoch else "?"


def fmt(v, spec=".4f"):
    return "-" if v is None else format(v, spec) if isinstance(v, float) else str(v)


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


def write(run: Path) -> list[str]:
    """Write report.json, report.md and the plots into the run folder `run`; the summary lines for people."""
    lines: list[str] = []
    summary = summarise(run)
    made = plot(summary, run)
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
    for line in transport_lines(summary["nccl"]):
        lines.append(f"nccl:   {line}")
    lines.append(f"report: {run / 'report.md'}")
    for name in made:
        lines.append(f"plot:   {run / name}")
    return lines
