"""The run report written (plugins/module_utils/launch/report.py): report.json, report.md and the play's summary
lines."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R

from tests.unit.plugins.module_utils.launch.run_records import RESTART, rec


def test_report_names_quarantined_checkpoints(tmp_path) -> None:
    """report.json, report.md and the play's summary lines of a run whose restart fell back (R.write)."""
    bad = {"checkpoint": "step_0000015", "why": "n1: model.pt has 1000 bytes, 9000 when saved"}
    records = [*RESTART[:6], rec(135, "resume", step=10, quarantined=[bad]), *RESTART[7:]]
    manifest = {
        "run_id": "r1", "outcome": "completed", "message": "", "engine": "ddp", "model": "tiny", "launch_id": "A",
        "nodes": [{"host": "n1"}], "timings": {"started_epoch": 90, "launched_epoch": 100, "ended_epoch": 150},
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "n1" / "out").mkdir(parents=True)
    (tmp_path / "n1" / "out" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = R.write(tmp_path)
    said = "step_0000015 at 00:02:15 UTC (n1: model.pt has 1000 bytes, 9000 when saved): resumed from step 10"
    assert f"quarantined: {said}" in lines
    assert f"- {said}" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["quarantined"] == [
        {"time": 135, "resumed_at_step": 10, **bad}
    ]
