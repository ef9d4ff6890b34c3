"""report.md and bandwidth.png beside a ladder's verdict.json, on the controller.

Run by the action rdma_llm.cluster.validate_report.
"""

from __future__ import annotations

import json
from pathlib import Path


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value).replace("|", "\\|")


def markdown(verdict: dict) -> str:
    lines = [
        f"# Cluster validation: {verdict['status'].upper()}",
        "",
        f"Cluster `{verdict.get('cluster') or '?'}`, {len(verdict['hosts'])} host(s): {', '.join(verdict['hosts'])}.",
        f"Started {verdict.get('started')}, finished {verdict.get('finished')}.",
        "",
    ]
    if verdict["status"] == "fail":
        lines += [
            f"First failing rung: **{verdict['first_failure']}**"
            + (" (the ladder stopped there)" if verdict.get("stopped_early") else ""),
            f"Bad host(s): {', '.join(verdict['bad_hosts']) or '—'}; "
            f"bad pair(s): {', '.join('-'.join(p) for p in verdict['bad_pairs']) or '—'}",
            "",
        ]
    if verdict.get("left_out"):
        lines += [
            "Left out of the rungs after `inventory` (unreachable over SSH): "
            + "; ".join(f"{h} ({why})" for h, why in verdict["left_out"].items()),
            "",
        ]
    lines += ["| rung | status | value | threshold | unit | reason |", "|---|---|---|---|---|---|"]
    for rung in verdict["rungs"]:
        lines.append(
            f"| {rung['name']} | {rung['status']} | {_cell(rung.get('value'))} | {_cell(rung.get('threshold'))} "
            f"| {_cell(rung.get('unit'))} | {_cell(rung.get('reason'))} |"
        )
    for rung in verdict["rungs"]:
        notes = rung.get("notes") or []
        failed = [c for c in rung.get("checks") or [] if c["status"] == "fail"]
        if not notes and not failed and not rung.get("pairs") and not rung.get("sweep") and not rung.get("sweeps"):
            continue
        lines += ["", f"## {rung['name']}", ""]
        lines += [f"- note: {n}" for n in notes]
        lines += [f"- FAIL {c['host']} {c['check']}: {c['detail']}" for c in failed]
        if rung.get("pairs"):
            # One row per rail of a pair where the nodes have several fabric NICs.
            rails = len(rung.get("rails") or []) > 1
            lines += [""] if lines[-1] else []
            lines += ["| pair |" + (" rail |" if rails else "") + " Gb/s | threshold | status |"]
            lines += ["|---|" + ("---|" if rails else "") + "---|---|---|"]
            lines += [
                f"| {p['pair'][0]}-{p['pair'][1]} |"
                + (f" {p.get('rail')} |" if rails else "")
                + f" {_cell(p['gbps'])} | {_cell(p['threshold'])} | {p['status']} |"
                for p in rung["pairs"]
            ]
        if rung.get("sweep"):
            lines += ["", "| bytes | algbw Gb/s | busbw Gb/s | correct |", "|---|---|---|---|"]
            lines += [
                f"| {r['bytes']} | {_cell(r['algbw_gbps'])} | {_cell(r['busbw_gbps'])} | {r['correct']} |"
                for r in rung["sweep"]
            ]
        if rung.get("sweeps"):
            lines += ["", "| collective | bytes | algbw Gb/s | busbw Gb/s | correct |", "|---|---|---|---|---|"]
            lines += [
                f"| {name} | {r['bytes']} | {_cell(r['algbw_gbps'])} | {_cell(r['busbw_gbps'])} | {r['correct']} |"
                for name, sweep in rung["sweeps"].items()
                for r in sweep
            ]
        if rung.get("bisection"):
            b = rung["bisection"]
            lines += [
                "",
                f"Bisection of {b['collective']} at {b['bytes']} bytes (floor {b['floor_gbps']:g} Gb/s): "
                f"suspects {', '.join(rung.get('suspects') or [])}" + (f" ({b['reason']})" if b.get("reason") else ""),
            ]
    if verdict.get("matrix"):
        lines += ["", "![bandwidth matrix](bandwidth.png)"]
    return "\n".join(lines) + "\n"


def heatmap_figure(matrix: dict):
    """The pair matrix as a heatmap (the figure, for heatmap() to save and the tests to measure). The figure
    grows with the host count from a floor that leaves room for the colour bar, and the title is wrapped to the
    figure's width, so every label stays on the canvas from 2 hosts to tens."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    hosts = matrix["hosts"]
    n = len(hosts)
    data = np.array([[np.nan if v is None else v for v in row] for row in matrix["values"]], dtype=float)
    width, height = max(6.4, 1.2 + 0.9 * n), max(5.0, 1.6 + 0.8 * n)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(data, cmap="viridis")
    fig.colorbar(image, ax=ax, label=matrix.get("unit", "Gb/s"))
    ax.set_xticks(range(n), hosts, rotation=45, ha="right")
    ax.set_yticks(range(n), hosts)
    failed = {tuple(p) for p in matrix.get("failed") or []} | {tuple(reversed(p)) for p in matrix.get("failed") or []}
    for i in range(n):
        for j in range(n):
            if np.isnan(data[i, j]):
                continue
            bad = (hosts[i], hosts[j]) in failed
            ax.text(j, i, f"{data[i, j]:.3g}" + ("\nFAIL" if bad else ""), ha="center", va="center",
                    color="red" if bad else "white", fontsize=8, fontweight="bold" if bad else "normal")  # fmt: skip
            if bad:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    slowest = ", slowest of rails " + ", ".join(matrix["rails"]) if len(matrix.get("rails") or []) > 1 else ""
    title = f"Pairwise bandwidth ({matrix.get('unit', 'Gb/s')}{slowest}), failing pairs in red"
    # About 11 characters of 10-point text per inch of figure.
    fig.suptitle("\n".join(textwrap.wrap(title, int(width * 11))), fontsize=10)
    fig.tight_layout()
    return fig


def heatmap(matrix: dict, out: Path) -> None:
    import matplotlib.pyplot as plt

    fig = heatmap_figure(matrix)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def write(folder: Path) -> list[str]:
    """report.md (and bandwidth.png where pairs were measured) beside `folder`/verdict.json; the files written."""
    verdict = json.loads((folder / "verdict.json").read_text())
    (folder / "report.md").write_text(markdown(verdict))
    made = ["report.md"]
    if verdict.get("matrix"):
        heatmap(verdict["matrix"], folder / "bandwidth.png")
        made.append("bandwidth.png")
    return made
