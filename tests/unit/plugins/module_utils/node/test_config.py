"""rdma-node-check's config (plugins/module_utils/node/config.py): what it cannot check against."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import ConfigError

from tests.unit.plugins.module_utils.node.helpers import config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"link_layer": "roce"}, "link_layer must be ethernet or infiniband"),
        ({"thresholds": {"xid_window": 1}}, "unknown thresholds xid_window"),
        ({"thresholds": {"sw_power_cap": "fail"}}, "thresholds.sw_power_cap must be one of report, warn"),
        ({"thresholds": {"flap_max": -1}}, "thresholds.flap_max must be an integer >= 0"),
        ({"interfaces": [{"mtu": 9000}]}, "every interface needs a name"),
        ({"thresholds": {"firmware_minimum": {"MT4129": "28.39"}}}, "firmware_minimum must map an hca_type"),
        ({"thresholds": {"firmware_minimum": ["28.39.1002"]}}, "firmware_minimum must map an hca_type"),
    ],
)
def test_config_it_cannot_check_against(change, message) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**change)


def test_node_check_json_holds_no_slurm_value_and_moves_only_with_a_newer_passing_verdict(tmp_path) -> None:
    """/etc/rdma-llm/node-check.json (roles/node_health) is node_health_config(): the node's fabric values, devices,
    modules, GPUs, line rate, thresholds, venv and baseline; no Slurm value, so a run that changed only a Slurm
    variable leaves it as it was. What rewrites it on such a run is a newer passing verdict of the ladder (its
    baseline: the rates, GPUs and stack the node is held to); a failing verdict changes nothing."""
    import json

    from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.health import (
        node_health_baseline,
        node_health_config,
    )

    from tests.unit.plugins.module_utils.node.test_health import INTERFACES, verdict, write

    def rendered() -> str:
        cfg = node_health_config(INTERFACES[:1], "n1", gpus=8, baseline=node_health_baseline(tmp_path, "n1"))
        return json.dumps(cfg, sort_keys=True)

    write(tmp_path, "20251117-080000", verdict())
    first = rendered()
    keys = {"schema", "host", "link_layer", "interfaces", "devices", "modules", "gpus", "line_rate_gbps", "thresholds"}
    assert set(json.loads(first)) == keys | {"baseline", "venv"}
    assert "slurm" not in first.lower()
    write(tmp_path, "20251118-080000", verdict(status="fail", finished="2025-11-18T08:10:00Z", gpus=7))
    assert rendered() == first, "a failing verdict is no baseline"
    write(tmp_path, "20251119-080000", verdict(finished="2025-11-19T08:10:00Z"))
    assert rendered() != first
    assert json.loads(rendered())["baseline"]["verdict"] == "20251119-080000/verdict.json"
