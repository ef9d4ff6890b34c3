"""Write the report of one collected run (summary.py reads it): report.json, report.md, loss.png and throughput.png
beside the manifest, and a short summary for people (action rdma_llm.cluster.train_report, on the controller).
Rank 0's records carry the global numbers (loss averaged over ranks, tokens/s of the whole job).
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import evals
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import fabric as train_fabric
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.summary import summarise


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
        *monitoring_lines(s),
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
        *(evals.markdown(s["eval"]) if s.get("eval") else []),
        *(["", "![evaluation](eval.png)"] if (s.get("eval") or {}).get("plotted") else []),
        "",
        "Per-host logs, metrics.jsonl and result.json are in the host folders; manifest.json has ranks,",
        "environment, command lines, package versions and checkpoint paths.",
    ]
    return "\n".join(lines) + "\n"


# The run's series on Prometheus's graph page (its 2.x UI reads g<N>.expr, .tab, .range_input, .end_input), over the
# play's start to end with a minute either side; the switch ports' counters on the same time axis.
RUN_QUERIES = (
    ("tokens/s per rank", "rdma_llm_train_tokens_per_second{{run_id={run}}}"),
    ("step and loss per rank", "rdma_llm_train_step{{run_id={run}}}"),
    ("ranks alive", "sum(rdma_llm_train_rank_alive{{run_id={run}}})"),
    ("switch ports' PFC pauses/s", "rate(rdma_llm_switch_port_pfc_pause_frames_total[1m])"),
    ("switch ports' drops/s by qos-group", "rate(rdma_llm_switch_port_drops_total[1m])"),
)


def monitoring_links(s: dict) -> list[tuple[str, str]]:
    """[(what, URL)] of the run's queries on the first monitoring host's Prometheus; none without one."""
    urls, span = s.get("prometheus") or [], s.get("time_range") or []
    if not urls or len(span) != 2:
        return []
    start, end = math.floor(span[0]) - 60, math.ceil(span[1]) + 60
    run = json.dumps(str(s["run_id"]))  # a PromQL string, quoted as Go reads it
    out = []
    for what, expr in RUN_QUERIES:
        query = urllib.parse.urlencode({
            "g0.expr": expr.format(run=run), "g0.tab": "0", "g0.range_input": f"{end - start}s",
            "g0.end_input": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(end)),
        })  # fmt: skip
        out.append((what, f"{urls[0]}/graph?{query}"))
    return out


def monitoring_lines(s: dict) -> list[str]:
    links = monitoring_links(s)
    if not links:
        return []
    start, end = s["time_range"]
    return [
        f"On the cluster's Prometheus ({s['prometheus'][0]}), {_clock(start)} to {_clock(end)} and a minute either "
        "side:",
        "",
        *(f"- [{what}]({url})" for what, url in links),
        "",
    ]


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
    summary["eval"] = evals.find(run)
    made = plot(summary, run)
    if summary.get("fabric") and train_fabric.plot(summary["fabric"], run / "fabric.png"):
        made.append("fabric.png")
    if summary["eval"] and evals.plot(summary["eval"], run / "eval.png"):
        made.append("eval.png")
        summary["eval"]["plotted"] = True
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
    if summary["eval"]:
        lines += evals.lines(summary["eval"])
    for what, url in monitoring_links(summary)[:1]:
        lines.append(f"prometheus: {url} ({what}; report.md has the rest)")
    lines.append(f"report: {run / 'report.md'}")
    for name in made:
        lines.append(f"plot:   {run / name}")
    return lines
