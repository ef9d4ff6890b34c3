"""rdma-node-check's result as metrics (monitoring/node_health.py): the verdict and each check on one 0-3 scale,
the measured values and thresholds, and when it ran. Samples: `node_check/node_check_gpu_h200.json`, what the
command printed on a real H200 machine (tests/fixtures/node_check/README.md); a failing or warning result is that
file with one check's status changed, as the node tests make their faults."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import node_health
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import EXIT_ERROR, SCHEMA

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import fixture, names, series, value

H200 = json.loads(fixture("node_check/node_check_gpu_h200.json"))


def changed(check: str, status: str) -> dict:
    result = copy.deepcopy(H200)
    next(c for c in result["checks"] if c["check"] == check)["status"] = status
    result["status"] = status
    return result


def test_a_passing_node_reads_0_and_its_skipped_checks_3() -> None:
    text = node_health.textfile(H200)
    assert value(text, "rdma_llm_node_check_verdict") == 0
    statuses = series(text, "rdma_llm_node_check_status")
    assert len(statuses) == len(H200["checks"])
    for check in H200["checks"]:
        code = {"pass": 0, "skip": 3}[check["status"]]
        assert statuses[(("check", check["check"]), ("index", "0"))] == code, check["check"]
    assert value(text, "rdma_llm_node_check_status", check="nvlink", index=0) == 3  # no NVLink: skipped
    assert value(text, "rdma_llm_node_check_status", check="gpu ecc", index=0) == 0


@pytest.mark.parametrize(("status", "code"), [("warn", 1), ("fail", 2)])
def test_a_warning_and_a_failure_read_1_and_2(status: str, code: int) -> None:
    text = node_health.textfile(changed("gpu ecc", status))
    assert value(text, "rdma_llm_node_check_verdict") == code
    assert value(text, "rdma_llm_node_check_status", check="gpu ecc", index=0) == code
    assert value(text, "rdma_llm_node_check_status", check="gpu pcie", index=0) == 0


def test_the_command_that_could_not_check_reads_3_and_nothing_else() -> None:
    # What node/cli.py prints on a bad config (exit 3).
    error = {"schema": SCHEMA, "status": "error", "exit": EXIT_ERROR, "reason": "config: interfaces must be ..."}
    text = node_health.textfile(error, now=1800000000)
    assert value(text, "rdma_llm_node_check_verdict") == 3
    assert value(text, "rdma_llm_node_check_timestamp_seconds") == 1800000000
    assert names(text) == {"rdma_llm_node_check_verdict", "rdma_llm_node_check_timestamp_seconds"}
    assert value(node_health.textfile(None, now=1), "rdma_llm_node_check_verdict") == 3


def test_the_values_thresholds_and_time_a_check_gave() -> None:
    text = node_health.textfile(H200)
    gpus = next(c for c in H200["checks"] if c["check"] == "gpus")
    assert value(text, "rdma_llm_node_check_value", check="gpus", index=0, unit="") == gpus["value"] == 1
    assert value(text, "rdma_llm_node_check_threshold", check="gpus", index=0, unit="") == gpus["threshold"]
    # Checks without a number have no value sample.
    assert len(series(text, "rdma_llm_node_check_value")) == sum(c["value"] is not None for c in H200["checks"])
    when = datetime.strptime(H200["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert value(text, "rdma_llm_node_check_timestamp_seconds") == when


def test_a_check_run_per_interface_is_numbered_and_keeps_its_unit() -> None:
    result = copy.deepcopy(H200)
    mtu = {"check": "mtu", "status": "pass", "detail": "", "value": 9000, "threshold": None, "unit": "bytes"}
    result["checks"] += [mtu, {**mtu, "status": "fail", "value": 1500}]
    result["status"] = "fail"
    text = node_health.textfile(result)
    assert value(text, "rdma_llm_node_check_status", check="mtu", index=0) == 0
    assert value(text, "rdma_llm_node_check_status", check="mtu", index=1) == 2
    assert value(text, "rdma_llm_node_check_value", check="mtu", index=1, unit="bytes") == 1500


def test_a_boolean_value_is_no_number() -> None:
    result = copy.deepcopy(H200)
    result["checks"][0]["value"] = True
    assert ("check", "gpus") not in {k[0] for k in series(node_health.textfile(result), "rdma_llm_node_check_value")}


def test_the_commands_output_is_read_past_a_stray_line() -> None:
    stdout = "warning: something the command's tools printed\n" + json.dumps(H200)
    assert node_health.parse_result(stdout) == H200
    assert node_health.parse_result("not json") is None
    assert node_health.parse_result(json.dumps({**H200, "schema": "other/1"})) is None
