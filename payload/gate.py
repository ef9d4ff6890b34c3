"""The evaluation gate: is a finished run's result usable? Pure functions, stdlib only.

A run passes when its final validation loss is at most `max_val_loss` (if set) and at most
`baseline * (1 + max_regression)` where the baseline is another run's result.json (if given). The verdict
goes into result.json as `gate`; the launch playbook's report and exit code follow it. `train.py eval` judges a
model with the same checks on its re-measured validation loss, plus its prompt suite's score against a floor.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def read_baseline(path: str) -> float:
    """The final validation loss of a baseline run's result.json; ValueError/OSError name the file."""
    result = json.loads(Path(path).read_text())
    loss = result.get("final_val_loss") if isinstance(result, dict) else None
    if not isinstance(loss, int | float) or not math.isfinite(loss):
        raise ValueError(f"{path}: no final_val_loss in this result.json (status {result.get('status')!r})")
    return float(loss)


def evaluate(
    val_loss: float | None,
    max_val_loss: float,
    baseline: float | None,
    max_regression: float,
    suite_score: float | None = None,
    min_suite_score: float = 0.0,
) -> dict:
    """{"status": "off" | "pass" | "fail", "checks": [{check, value, limit, pass}, ...]}."""
    checks = []
    if max_val_loss > 0:
        checks.append({"check": "max_val_loss", "limit": max_val_loss})
    if baseline is not None:
        checks.append({"check": "max_regression", "baseline": baseline, "limit": baseline * (1 + max_regression)})
    for c in checks:
        c["value"] = val_loss
        c["pass"] = val_loss is not None and math.isfinite(val_loss) and val_loss <= c["limit"]
    if min_suite_score > 0:  # a score is a fraction passed: at least the floor
        ok = suite_score is not None and suite_score >= min_suite_score
        checks.append({"check": "min_suite_score", "limit": min_suite_score, "value": suite_score, "pass": ok})
    status = "off" if not checks else "pass" if all(c["pass"] for c in checks) else "fail"
    return {"status": status, "checks": checks}


def describe(gate: dict) -> str:
    """One line for the log: `gate: fail (val loss 5.3100 > 5.2000 max_val_loss)`."""
    if gate["status"] == "off":
        return "gate: off"
    parts = []
    for c in gate["checks"]:
        if c["check"] == "min_suite_score":
            value = "none" if c["value"] is None else f"{c['value']:.2f}"
            parts.append(f"suite score {value} {'>=' if c['pass'] else '<'} {c['limit']:.2f} min_suite_score")
            continue
        value = "none" if c["value"] is None else f"{c['value']:.4f}"
        op = "<=" if c["pass"] else ">"
        extra = f" = baseline {c['baseline']:.4f} + {c['limit'] / c['baseline'] - 1:.0%}" if "baseline" in c else ""
        parts.append(f"val loss {value} {op} {c['limit']:.4f} {c['check']}{extra}")
    return f"gate: {gate['status']} ({'; '.join(parts)})"
