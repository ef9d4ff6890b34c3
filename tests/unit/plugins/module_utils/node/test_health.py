"""rdma-node-check's config from the inventory and the baseline from the last passing verdict
(plugins/module_utils/node/health.py): what the node_health role installs and the ladder's node_health rung uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import CONFIG_SCHEMA, DEFAULTS, resolve
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.health import (
    node_health_baseline,
    node_health_config,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import evaluate

INTERFACES = [
    {"name": "rdma0", "addresses": ["10.0.0.1/24"], "mtu": 9000},
    {"name": "rdma1", "addresses": ["fd00::1/64", "10.0.1.1/24"], "mtu": 4200},
    {"name": "ib2", "addresses": []},
]


def test_config_from_the_inventory() -> None:
    cfg = node_health_config(INTERFACES, "n1", "ethernet", ["mlx5_0"], ["ib_core"], 8, 400, {"xid_window_s": 3600})
    assert cfg["schema"] == CONFIG_SCHEMA and cfg["host"] == "n1"
    # The same interfaces, addresses and MTUs as the ladder's rails (one reading of cluster_fabric_interfaces).
    assert [(i["name"], i["address"], i["mtu"]) for i in cfg["interfaces"]] == [
        (r["interface"], r["address"], r["mtu"]) for r in pairing.fabric_rails(INTERFACES)
    ]
    assert (cfg["devices"], cfg["modules"], cfg["gpus"], cfg["line_rate_gbps"]) == (["mlx5_0"], ["ib_core"], 8, 400.0)
    # Every threshold is written out: the file says what the node is held to.
    assert cfg["thresholds"] == DEFAULTS | {"xid_window_s": 3600}
    assert resolve(json.loads(json.dumps(cfg))) == resolve(cfg)  # the command reads it back as written


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"thresholds": {"xid_windows": 5}}, "n1: config: unknown thresholds xid_windows"),
        ({"link_layer": "roce"}, "n1: config: link_layer must be ethernet or infiniband (got 'roce')"),
        ({"thresholds": {"persistence_mode": "fail"}}, "n1: config: thresholds.persistence_mode must be one of"),
    ],
)
def test_a_config_the_command_would_refuse_is_refused_here(kw, message) -> None:
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        node_health_config(INTERFACES, "n1", **kw)


def verdict(status="pass", finished="2025-11-17T08:00:00Z", speeds=None, gpus=8, hosts=("n1", "n2")) -> dict:
    """A verdict.json as the ladder writes it (the keys the baseline reads)."""
    return {
        "schema": ladder.SCHEMA,
        "status": status,
        "finished": finished,
        "hosts": list(hosts),
        "rungs": [
            {"name": "node_health", "status": "pass",
             "rail_speeds": {"n1": speeds or {"rdma0": 400.0, "rdma1": None}},
             "stack": {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002"},
             "checks": [{"host": "n1", "check": "gpus", "status": "pass", "value": gpus}]},
            {"name": "rdma_bw", "status": "pass",
             "pairs": [{"pair": ["n1", "n2"], "rail": "rdma0", "gbps": 371.2},
                       {"pair": ["n1", "n2"], "rail": "rdma1", "gbps": 362.0},
                       {"pair": ["n2", "n3"], "rail": "rdma0", "gbps": 12.0}]},
        ],
    }  # fmt: skip


def write(base: Path, stamp: str, data: dict | str) -> None:
    (base / stamp).mkdir(parents=True)
    (base / stamp / "verdict.json").write_text(data if isinstance(data, str) else json.dumps(data))


def test_baseline_from_the_newest_passing_verdict(tmp_path: Path) -> None:
    assert node_health_baseline(tmp_path / "none", "n1") == {}
    write(tmp_path, "20251110-080000", verdict(finished="2025-11-10T08:10:00Z", speeds={"rdma0": 200.0}, gpus=7))
    write(tmp_path, "20251117-080000", verdict(finished="2025-11-17T08:10:00Z"))
    write(tmp_path, "20251118-080000", verdict(status="fail", finished="2025-11-18T08:10:00Z", gpus=1))
    write(tmp_path, "20251119-080000", "{not json")
    assert node_health_baseline(tmp_path, "n1") == {
        "verdict": "20251117-080000/verdict.json",
        "finished": "2025-11-17T08:10:00Z",
        "rail_gbps": {"rdma0": 400.0},  # a rail of unknown rate holds nothing
        "gpus": 8,
        "measured_gbps": {"rdma0": 371.2, "rdma1": 362.0},
        "stack": {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002"},
    }
    # A node the passing verdict did not validate has no baseline.
    assert node_health_baseline(tmp_path, "n9") == {}
    # No GPU counted (a CPU node): no GPU baseline.
    write(tmp_path, "20251120-080000", verdict(finished="2025-11-20T08:10:00Z", gpus=0))
    assert "gpus" not in node_health_baseline(tmp_path, "n1")


def test_the_baseline_holds_a_node_to_what_it_passed_with(tmp_path: Path) -> None:
    write(tmp_path, "20251117-080000", verdict())
    cfg = node_health_config(INTERFACES[:1], "n1", baseline=node_health_baseline(tmp_path, "n1"))
    j = evaluate(
        {"time": 0, "groups": ["fabric", "gpu"], "rdma": [], "modules": None, "nic": {"rdma0": {
            "exists": True, "operstate": "up", "carrier": 1, "mtu": 9000, "speed_mbps": 200000, "virtual": False}},
         "gpus_proc": {"count": 7}, "nvidia_smi": None, "log": {"error": "none"}},
        resolve(cfg),
    )  # fmt: skip
    failed = {c["check"]: c["detail"] for c in j.checks if c["status"] == "fail"}
    assert failed == {
        "nic speed": "rdma0 200 Gb/s, below the rate it passed the ladder at, 400 Gb/s (trained down?)",
        "gpus": "7 GPU(s) (expected 8), driver none",
    }
