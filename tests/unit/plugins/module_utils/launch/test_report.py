"""The run report written (plugins/module_utils/launch/report.py): report.json, report.md and the play's summary
lines."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R

from tests.unit.plugins.module_utils.launch.run_records import RESTART, rec


def _run(tmp_path, records=RESTART, **manifest_extra):
    """A collected run of one host (n1) with these records, reported (R.write): the play's summary lines."""
    manifest = {
        "run_id": "r1", "outcome": "completed", "message": "", "engine": "ddp", "model": "tiny", "launch_id": "A",
        "nodes": [{"host": "n1"}], "timings": {"started_epoch": 90, "launched_epoch": 100, "ended_epoch": 150},
        **manifest_extra,
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "n1" / "out").mkdir(parents=True, exist_ok=True)
    (tmp_path / "n1" / "out" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return R.write(tmp_path)


def test_report_names_quarantined_checkpoints(tmp_path) -> None:
    """report.json, report.md and the play's summary lines of a run whose restart fell back (R.write)."""
    bad = {"checkpoint": "step_0000015", "why": "n1: model.pt has 1000 bytes, 9000 when saved"}
    records = [*RESTART[:6], rec(135, "resume", step=10, quarantined=[bad]), *RESTART[7:]]
    lines = _run(tmp_path, records)
    said = "step_0000015 at 00:02:15 UTC (n1: model.pt has 1000 bytes, 9000 when saved): resumed from step 10"
    assert f"quarantined: {said}" in lines
    assert f"- {said}" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["quarantined"] == [
        {"time": 135, "resumed_at_step": 10, **bad}
    ]


def test_with_a_monitoring_host_the_report_links_the_run_on_prometheus(tmp_path) -> None:
    """The run's time range (the play's start 90 to its end 150, a minute either side) and its queries."""
    import urllib.parse

    lines = _run(tmp_path, monitoring={"prometheus": ["http://10.0.0.5:9090", "http://10.0.0.6:9090"]})
    text = (tmp_path / "report.md").read_text()
    assert "On the cluster's Prometheus (http://10.0.0.5:9090), 00:01:30 UTC to 00:02:30 UTC" in text
    links = [line for line in text.splitlines() if line.startswith("- [") and "/graph?" in line]
    assert [line.split("]")[0][3:] for line in links] == [what for what, _ in R.RUN_QUERIES]
    first = urllib.parse.parse_qs(urllib.parse.urlsplit(links[0].split("](")[1].rstrip(")")).query)
    assert first == {
        "g0.expr": ['rdma_llm_train_tokens_per_second{run_id="r1"}'],
        "g0.tab": ["0"],
        "g0.range_input": ["180s"],
        "g0.end_input": ["1970-01-01 00:03:30"],
    }
    assert links[0].split("](")[1].startswith("http://10.0.0.5:9090/graph?")
    assert [line for line in lines if line.startswith("prometheus: http://10.0.0.5:9090/graph?")], lines
    assert json.loads((tmp_path / "report.json").read_text())["time_range"] == [90.0, 150.0]


def test_without_a_monitoring_host_no_link(tmp_path) -> None:
    lines = _run(tmp_path)
    assert "Prometheus" not in (tmp_path / "report.md").read_text()
    assert not [line for line in lines if line.startswith("prometheus:")]
    assert R.monitoring_links({"run_id": "r", "prometheus": ["http://h:9090"], "time_range": []}) == []
