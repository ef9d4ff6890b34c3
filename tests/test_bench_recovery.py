"""bench/bench_recovery.py on artifacts laid out as the launch writes them: an automatic restart (its report's
goodput timeline), a failed launch continued by a resume (rank 0's records and the two launches' manifests), a
stall that needed no recovery, and runs that are no fault test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("bench_recovery", ROOT / "bench" / "bench_recovery.py")
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)


def run(root: Path, run_id: str, launches: list[dict], records: list[dict], report: dict) -> None:
    d = root / run_id
    (d / "n1" / "out").mkdir(parents=True)
    for m in launches:
        manifest = {"run_id": run_id, "nodes": [{"host": "n1"}], **m}
        (d / f"manifest-{m['launch_id']}.json").write_text(json.dumps(manifest))
        (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "report.json").write_text(json.dumps(report))
    (d / "n1" / "out" / "metrics.jsonl").write_text("".join(json.dumps({"rank": 0, **r}) + "\n" for r in records))


def steps(times: dict[int, float]) -> list[dict]:
    return [{"kind": "train", "step": s, "time": t} for s, t in times.items()]


def test_rows_of_each_kind_of_recovery(tmp_path: Path) -> None:
    auto = {"detect_s": 0.7, "to_first_step_s": 20.9, "lost_s": 32.8, "steps_recomputed": 2}
    run(tmp_path, "fault-restart-1", [{"launch_id": "A", "outcome": "completed", "timings": {"launched_epoch": 0}}],
        steps({5: 10.0, 10: 12.0}), {"outcome": "completed", "run_goodput": {"failures": 1},
                                     "goodput": {"failures": [auto]}})  # fmt: skip
    run(
        tmp_path, "fault-disk-2",
        [{"launch_id": "A", "outcome": "failed", "timings": {"launched_epoch": 100, "ended_epoch": 150}},
         {"launch_id": "B", "outcome": "completed", "timings": {"launched_epoch": 160, "ended_epoch": 300}}],
        [*steps({5: 110.0, 15: 120.0}), {"kind": "resume", "step": 10, "time": 170.0}, *steps({11: 180.0, 60: 290.0})],
        {"outcome": "completed", "run_goodput": {"failures": 0}},
    )  # fmt: skip
    run(tmp_path, "fault-link-3", [{"launch_id": "A", "outcome": "completed", "timings": {"launched_epoch": 0}}],
        steps({1: 1.0, 2: 2.0, 3: 32.5, 4: 33.0}), {"outcome": "completed"})  # fmt: skip
    run(tmp_path, "e2e-ddp-4", [{"launch_id": "A", "outcome": "completed", "timings": {"launched_epoch": 0}}],
        steps({1: 1.0}), {"outcome": "completed"})  # fmt: skip
    rows = {r["run"]: r for r in B.rows(tmp_path)}
    assert sorted(rows) == ["fault-disk-2", "fault-link-3", "fault-restart-1"]  # a plain run is no fault
    r = rows["fault-restart-1"]
    assert (r["how"], r["detect_s"], r["recover_s"], r["lost_s"], r["steps_again"]) == ("automatic", 0.7, 20.9, 32.8, 2)
    r = rows["fault-disk-2"]
    # last step 15 at 120 s, the play ended at 150 s; the resume launched at 160 s trained again at 180 s from step 10.
    assert (r["how"], r["detect_s"], r["recover_s"], r["lost_s"], r["steps_again"]) == (
        "resume (-e resume=true)",
        30.0,
        20.0,
        60.0,
        5,
    ), r
    r = rows["fault-link-3"]
    assert (r["how"], r["lost_s"], r["detect_s"]) == ("none needed", 30.5, None), r


def test_the_table_says_when_there_is_nothing_to_show(tmp_path: Path, capsys) -> None:
    assert B.main(["bench_recovery.py", str(tmp_path)]) == 1
    assert "no fault runs" in capsys.readouterr().out
