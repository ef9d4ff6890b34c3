"""The ladder's report (ladder/report.py): report.md and the bandwidth heatmap from verdict.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import report
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairs import evaluate_pairs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import make_rung

from tests.unit.plugins.module_utils.ladder.ladder_helpers import links, rail_results, sample_ladder, unreachable_ladder


def test_report_writes_markdown_and_heatmap(tmp_path: Path) -> None:
    v = ladder.verdict(sample_ladder(fail=True), ["n1", "n2", "n3"], cluster="lab")
    (tmp_path / "verdict.json").write_text(json.dumps(v))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| tcp_bw | fail |" in md and "n3" in md
    png = tmp_path / "bandwidth.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_heatmap_keeps_every_label_on_the_canvas(n: int) -> None:
    """The title, the host names and the colour bar fit the figure whatever the host count (at 2 hosts the title
    was cut off at both sides)."""
    import matplotlib.pyplot as plt

    hosts = [f"lab-node{i}" for i in range(1, n + 1)]
    values = [[None if i == j else 10.0 + i + j for j in range(n)] for i in range(n)]
    matrix = {
        "hosts": hosts,
        "values": values,
        "unit": "Gb/s",
        "failed": [hosts[:2]],
        "rails": [f"rdma{r}" for r in range(8)],
    }
    fig = report.heatmap_figure(matrix)
    try:
        fig.canvas.draw()
        renderer, canvas = fig.canvas.get_renderer(), fig.bbox
        # The title, the host names and the colour bar's label (its numbers are drawn only inside its range).
        wanted = {*hosts, "Gb/s"}
        texts = [
            t
            for t in fig.findobj(plt.Text)
            if t.get_visible() and (t.get_text() in wanted or "Pairwise" in t.get_text())
        ]
        assert {t.get_text() for t in texts} >= wanted and any("Pairwise" in t.get_text() for t in texts), texts
        outside = []
        for text in texts:
            box = text.get_window_extent(renderer)
            if box.x0 < canvas.x0 - 1 or box.x1 > canvas.x1 + 1 or box.y0 < canvas.y0 - 1 or box.y1 > canvas.y1 + 1:
                outside.append(text.get_text())
        assert outside == [], f"{n} hosts: cut off: {outside}"
    finally:
        plt.close(fig)


def test_report_lists_every_rail(tmp_path: Path) -> None:
    speeds = {"n1": 100.0, "n2": 100.0}
    values = [(("n1", "n2"), "rdma0", 95.0), (("n1", "n2"), "rdma1", 20.0)]
    rung = evaluate_pairs(rail_results(values), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    v = ladder.verdict([make_rung("inventory", "pass"), rung], ["n1", "n2"], cluster="lab")
    (tmp_path / "verdict.json").write_text(json.dumps(v))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| n1-n2 | rdma0 | 95 | 90 | pass |" in md and "| n1-n2 | rdma1 | 20 | 90 | fail |" in md, md
    assert (tmp_path / "bandwidth.png").stat().st_size > 2000


def test_report_names_the_left_out_host(tmp_path: Path) -> None:
    (tmp_path / "verdict.json").write_text(json.dumps(unreachable_ladder(keep_going=False)))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "First failing rung: **inventory** (the ladder stopped there)" in md
    assert "Bad host(s): n3;" in md
    assert "(unreachable over SSH): n3 (ssh: connect to host 10.77.0.13 port 22: No route to host)" in md
    assert "| reachability | skip |" in md and "- FAIL n3 ssh: unreachable over SSH" in md
