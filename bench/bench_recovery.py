"""Time to recover from each fault the lab tests, from the runs they left in artifacts/ (no new run).

    .venv/bin/python bench/bench_recovery.py [artifacts]

For every run with a fault (an automatic restart in its report's goodput, a node lost for good, or a failed launch
that a resume continued) one row: the fault (by the lab test's run id), the last progress before it (rank 0's last
step record), when it was detected (torchrun's first failure line, or the end of the failed launch's play: stop and
collection included), when the job trained again (its first step after the restart or the resume), the steps trained
twice (at least: steps between rank 0's last logged step and the fault are not counted) and the wall time the fault
cost. "Failure seen" is torchrun's first failure line for an automatic restart, the end of the failed launch's play
(stop and collection included) for a resume; "training again" counts from the restart, or from the resumed launch's
start (its pre-flight checks included). Times come from the reports (train_report's goodput) and from rank 0's
metrics; the fault itself is not recorded, so "last progress" stands for it (at most one step earlier).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

# The lab's fault tests by the prefix of their run id (tests/test_lab_3_train.py, tests/test_lab_4_faults.py).
FAULTS = {
    "fault-restart-": "rank killed (SIGKILL), automatic restart (max_restarts=1)",
    "fault-elastic0-": "node rank 0 stopped for good, min_nodes=1",
    "fault-elastic-": "node stopped for good, min_nodes=1: the survivor goes on",
    "fault-node-": "node stopped (podman stop), then resume",
    "fault-reboot-": "node restarted mid-run (podman stop, start): rejoins at its boot (max_restarts=1)",
    "fault-disk-": "checkpoint disk full, then resume",
    "fault-link-": "fabric link down 20 s",
    "e2e-kill-": "rank killed (SIGKILL), then resume",
    "e2e-hang-": "rank stopped (SIGSTOP): hang named, then resume",
}


def label(run_id: str) -> str | None:
    return next((text for prefix, text in FAULTS.items() if run_id.startswith(prefix)), None)


def rank0(run: Path, host: str, kind: str) -> list[dict]:
    """Rank 0's records of one kind (train, resume) in time order."""
    path = run / host / "out" / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("rank") == 0 and rec.get("kind") == kind:
            out.append(rec)
    return sorted(out, key=lambda r: r["time"])


def rows(root: Path) -> list[dict]:
    out = []
    for run in sorted(p for p in root.iterdir() if (p / "manifest.json").exists()):
        fault = label(run.name)
        if fault is None:
            continue
        manifests = sorted(
            (json.loads(p.read_text()) for p in run.glob("manifest-*.json")),
            key=lambda m: m["timings"].get("launched_epoch") or 0,
        )
        first = manifests[0]
        host0 = first["nodes"][0]["host"] if first.get("nodes") else None
        steps = rank0(run, host0, "train") if host0 else []
        report = json.loads((run / "report.json").read_text()) if (run / "report.json").exists() else {}
        row = {"run": run.name, "fault": fault, "outcome": report.get("outcome") or first.get("outcome")}
        failures = ((report.get("run_goodput") or {}).get("failures") or 0) and (report.get("goodput") or {}).get(
            "failures"
        )
        if failures:  # an automatic restart (or an elastic continuation) inside one launch
            f = failures[0]
            row.update(
                detect_s=f.get("detect_s"), recover_s=f.get("to_first_step_s"), lost_s=f.get("lost_s"),
                steps_again=f.get("steps_recomputed"), how="automatic",
            )  # fmt: skip
        elif len(manifests) > 1 and first.get("outcome") != "completed":
            ended = first["timings"]["ended_epoch"]
            before = [r for r in steps if r["time"] <= ended]
            resumed = manifests[1]["timings"]["launched_epoch"]
            after = [r for r in steps if r["time"] >= resumed]
            last = before[-1] if before else None
            again = after[0] if after else None
            resume = next((r for r in rank0(run, host0, "resume") if r["time"] >= resumed), None)
            row.update(
                detect_s=round(ended - last["time"], 1) if last else None,
                recover_s=round(again["time"] - resumed, 1) if again else None,
                lost_s=round(again["time"] - last["time"], 1) if last and again else None,
                steps_again=(last["step"] - resume["step"]) if last and resume else None,
                how="resume (-e resume=true)",
            )
        else:  # no failure to recover from: the largest gap between two steps is what the fault cost
            gaps = [(b["time"] - a["time"], a) for a, b in itertools.pairwise(steps)]
            gap = max(gaps, key=lambda g: g[0]) if gaps else None
            row.update(
                detect_s=None, recover_s=None, lost_s=round(gap[0], 1) if gap else None, steps_again=0,
                how="none needed" if first.get("outcome") == "completed" else f"none: {first.get('outcome')}",
            )  # fmt: skip
        out.append(row)
    return out


def fmt(value, unit: str = " s") -> str:
    return "-" if value is None else f"{value}{unit}"


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "artifacts")
    table = rows(root)
    if not table:
        print(f"no fault runs in {root}")
        return 1
    print("| fault | recovery | outcome | last step -> failure seen | -> training again | time lost | steps again |")
    print("|---|---|---|---|---|---|---|")
    for r in table:
        print(
            f"| {r['fault']} | {r['how']} | {r['outcome']} | {fmt(r['detect_s'])} | {fmt(r['recover_s'])} | "
            f"{fmt(r['lost_s'])} | {fmt(r['steps_again'], '')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
