"""The dashboards (monitoring/dashboards.py): Grafana's JSON model of each, every panel's query over metrics that exist
(the package's catalogue and node_exporter's), the inventory's fabric interfaces in the queries, docs/monitoring.md's
table. promtool parses every query as a rule expression; the lab test runs them against the lab's Prometheus."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import catalogue, dashboards

from tests.conftest import ROOT
from tests.promtool import promtool

ALL = [(uid, p) for uid in dashboards.DASHBOARDS for p in dashboards.panels(uid)]
# node_exporter 1.5's names the dashboards read beside the rules' (collector/cpu_linux.go, meminfo.go, netdev_linux.go).
NODE_EXPORTER = {
    "up", "node_network_up", "node_network_carrier_down_changes_total", "node_filesystem_avail_bytes",
    "node_filesystem_size_bytes", "node_cpu_seconds_total", "node_memory_MemAvailable_bytes",
    "node_network_receive_bytes_total", "node_network_transmit_bytes_total",
    "node_infiniband_port_errors_received_total",
}  # fmt: skip


def test_the_six_dashboards_the_issue_names() -> None:
    assert set(dashboards.DASHBOARDS) == {
        "rdma-llm-cluster", "rdma-llm-node", "rdma-llm-fabric", "rdma-llm-gpu", "rdma-llm-slurm", "rdma-llm-training"
    }  # fmt: skip


def test_every_query_reads_known_metrics_only() -> None:
    ours = {m.name for m in catalogue.metrics()}
    for uid, panel in ALL:
        expr = re.sub(r'"[^"]*"', '""', panel.expr)
        names = set(re.findall(r"\b(?:rdma_llm|node)_[A-Za-z0-9_]+\b", expr)) | ({"up"} if "up{" in expr else set())
        assert names and names <= ours | NODE_EXPORTER, (uid, panel.title, names - ours - NODE_EXPORTER)


def test_promtool_parses_every_query(tmp_path) -> None:
    """Each query (its variables as the lab test gives them) as a recording rule: `promtool check rules` parses it."""
    values = {"instance": ".+", "run_id": ".+"}
    group = {"name": "dashboards", "rules": [
        {"record": f"dashboard:{i}", "expr": dashboards.lab_query(p.expr, values)} for i, (_, p) in enumerate(ALL)
    ]}  # fmt: skip
    path = tmp_path / "dashboards.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [group]}))
    done = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALL)} rules found" in done.stdout


def test_every_variable_a_query_uses_is_the_dashboards_own() -> None:
    for uid, board in dashboards.DASHBOARDS.items():
        own = {name for name, _ in board.variables} | {"__rate_interval"}
        for p in board.panels:
            # ($1 is label_replace's group, not a variable.)
            assert set(re.findall(r"\$([A-Za-z_]\w*)", p.expr)) <= own, (uid, p.title)
        filled = [(p.title, dashboards.lab_query(p.expr, dict.fromkeys(own, ".+"))) for p in board.panels]
        left = [title for title, expr in filled if re.search(r"\$[A-Za-z_{]", expr)]
        assert left == [], (uid, left)


def test_the_fabric_interfaces_go_into_the_queries() -> None:
    default = {p.title: p.expr for p in dashboards.panels("rdma-llm-fabric")}
    assert default["Fabric links up"] == 'node_network_up{device=~".+"}'
    lab = {p.title: p.expr for p in dashboards.panels("rdma-llm-fabric", {"fabric_interfaces": [{"name": "rdma0"}]})}
    assert lab["Fabric links up"] == 'node_network_up{device=~"^(?:rdma0)$"}'
    with pytest.raises(RuleError, match="fabric_interfaces"):
        dashboards.panels("rdma-llm-fabric", {"fabric_interfaces": ['eth0"}) or vector(1']})


def test_an_unknown_dashboard_is_refused_by_name() -> None:
    with pytest.raises(RuleError, match=r"no dashboard 'rdma-llm-nope' \(known: rdma-llm-cluster, "):
        dashboards.dashboard("rdma-llm-nope")


def test_the_grafana_model() -> None:
    board = dashboards.dashboard("rdma-llm-training", {"fabric_interfaces": ["rdma0"]})
    json.dumps(board)  # JSON as it is
    assert board["uid"] == "rdma-llm-training" and board["schemaVersion"] == 37
    names = [v["name"] for v in board["templating"]["list"]]
    assert names == ["datasource", "run_id"]
    panels = board["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    assert {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels[:3]} == {(0, 0), (12, 0), (0, 8)}
    assert all(p["targets"][0]["datasource"]["uid"] == "${datasource}" for p in panels)
    first = panels[0]
    assert first["targets"][0]["expr"] == 'rdma_llm_train_step{run_id=~"$run_id"}' and first["type"] == "timeseries"
    assert dashboards.dashboard("rdma-llm-slurm")["panels"][0]["type"] == "stat"


def test_lab_query_fills_the_variables() -> None:
    expr = 'rate(rdma_llm_train_step{run_id=~"$run_id"}[$__rate_interval])'
    assert dashboards.lab_query(expr, {"run_id": "e2e-1"}) == 'rate(rdma_llm_train_step{run_id=~"e2e-1"}[1m])'


def test_every_panel_says_what_its_series_need() -> None:
    assert {p.needs for _, p in ALL} - {None} <= set(dashboards.NEEDS)
    # GPU series exist only where a GPU does; the count of GPUs exists everywhere (0 without one).
    gpu = {p.title: p.needs for p in dashboards.panels("rdma-llm-gpu")}
    assert gpu.pop("GPUs present") is None and set(gpu.values()) == {"gpu"}


def test_the_docs_table_is_the_dashboards() -> None:
    text = (ROOT / "docs" / "monitoring.md").read_text()
    start = text.index("<!-- Generated by plugins/module_utils/monitoring/dashboards.py markdown()")
    table = text[text.index("\n", start) + 1 : text.index("<!-- end of the dashboards -->")]
    assert table == dashboards.markdown(), "regenerate the table with dashboards.markdown()"


def test_the_filter_is_the_dashboard_function() -> None:
    from ansible_collections.rdma_llm.cluster.plugins.filter.monitoring import FilterModule

    assert FilterModule().filters()["monitoring_dashboard"]("rdma-llm-gpu")["uid"] == "rdma-llm-gpu"
