"""A run's evaluation in its report: what `train.py eval` wrote on node rank 0 (out/eval: summary.json, gate.json,
collected into <run>/<host>/out/eval/), as the newest model's line, a table in report.md and eval.png, each
checkpoint's perplexities and suite score over its step (the trend the payload leaves to the controller).
"""

from __future__ import annotations

import json
from pathlib import Path


def find(run: Path) -> dict | None:
    """{"host", "results" (one per model, checkpoints by step first), "gate"} of the first host that has one."""
    for summary in sorted(run.glob("*/out/eval/summary.json")):
        try:
            results = json.loads(summary.read_text())
            gate_file = summary.with_name("gate.json")
            gate = json.loads(gate_file.read_text()) if gate_file.exists() else None
        except (OSError, ValueError):
            continue
        if isinstance(results, list) and results:
            return {"host": summary.parents[2].name, "results": results, "gate": gate}
    return None


def _suite(r: dict) -> str:
    s = r.get("suite") or {}
    return f"{s['passed']}/{s['items']}" if s else "-"


def _ppl(r: dict) -> str:
    return ", ".join(f"{name} ppl {c['perplexity']:.2f}" for name, c in sorted(r.get("corpora", {}).items()))


def lines(ev: dict) -> list[str]:
    """The newest checkpoint's (else the last model's) numbers and the gate, for the play's summary."""
    results = ev["results"]
    checkpoints = [r for r in results if r.get("step") is not None]
    newest = checkpoints[-1] if checkpoints else results[-1]
    step = f" step {newest['step']}" if newest.get("step") is not None else ""
    out = [f"eval:   {newest['name']}{step}: {_ppl(newest) or 'no perplexity'}, suite {_suite(newest)} "
           f"({len(results)} model(s) evaluated on {ev['host']})"]  # fmt: skip
    gate = ev.get("gate") or {}
    if gate.get("status") in ("pass", "fail"):
        out.append(f"eval:   {gate.get('message') or 'gate ' + gate['status']} [{gate.get('model')}]")
    return out


def markdown(ev: dict) -> list[str]:
    corpora = sorted({c for r in ev["results"] for c in r.get("corpora", {})})
    rows = [
        "",
        f"## Evaluation (`train.py eval` on {ev['host']})",
        "",
        "| model | step | " + " | ".join(f"perplexity {c}" for c in corpora) + " | suite passed | mean log-prob |",
        "|---|---|" + "---|" * len(corpora) + "---|---|",
    ]
    for r in ev["results"]:
        suite = r.get("suite") or {}
        ppl = [f"{r['corpora'][c]['perplexity']:.2f}" if c in r.get("corpora", {}) else "-" for c in corpora]
        lp = suite.get("mean_logprob")
        rows.append(
            f"| {r['name']} | {'-' if r.get('step') is None else r['step']} | " + " | ".join(ppl)
            + f" | {_suite(r)} | {'-' if lp is None else f'{lp:.3f}'} |"
        )  # fmt: skip
    gate = ev.get("gate") or {}
    if gate.get("status") in ("pass", "fail"):
        rows += ["", f"Evaluation gate on {gate.get('model')}: **{gate['status']}** ({gate.get('message', '')})"]
    return rows


def plot(ev: dict, path: Path) -> bool:
    """eval.png: each corpus's perplexity (log scale) and the suite's score over the checkpoints' steps; False when
    fewer than one checkpoint was evaluated (exports have no step)."""
    points = sorted((r for r in ev["results"] if r.get("step") is not None), key=lambda r: r["step"])
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["step"] for r in points]
    for name in sorted({c for r in points for c in r.get("corpora", {})}):
        ys = [r["corpora"].get(name, {}).get("perplexity") for r in points]
        ax.plot(steps, [float("nan") if y is None else y for y in ys], "o-", label=f"perplexity {name}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("perplexity")
    ax.grid(alpha=0.3)
    scored = [(r["step"], r["suite"]["score"]) for r in points if r.get("suite")]
    if scored:
        twin = ax.twinx()
        twin.plot(*zip(*scored, strict=True), "s--", color="tab:green", label="suite score")
        twin.set_ylim(0, 1)
        twin.set_ylabel("suite score (fraction passed)")
        twin.legend(loc="upper right")
    if ax.lines:
        ax.legend(loc="upper left")
    ax.set_title(f"evaluation over the checkpoints ({ev['host']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
