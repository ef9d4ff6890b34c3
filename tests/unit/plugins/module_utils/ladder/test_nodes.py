"""The node rungs (ladder/nodes.py): reachability and path MTU per rail, node health from each node's
rdma-node-check and the fleet's stack, the NIC counters around the stress rungs."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.nodes import (
    evaluate_nic_counters,
    evaluate_node_health,
    evaluate_path_mtu,
    evaluate_reachability,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import resolve
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import evaluate, summary

# ------------------------------------------------------------------------------------ reachability and path MTU


def test_reachability_and_path_mtu_name_the_rail_and_blame_the_node() -> None:
    ok = {"peer": "n2", "address": "10.0.0.2", "ok": True, "detail": "3/3 replies"}
    lost = {"peer": "n2/rdma1", "address": "10.0.1.2", "ok": False, "detail": "0/3 replies"}
    reach = evaluate_reachability({"n1": {"pings": [ok, lost]}, "n2": {"pings": []}}, ["n1", "n2"])
    assert reach["status"] == "fail" and reach["bad_pairs"] == [["n1", "n2"]]
    assert "fabric ping to n2/rdma1 (10.0.1.2): 0/3 replies" in reach["reason"]
    big = {"peer": "n2/rdma1", "address": "10.0.1.2", "ok": False, "mtu": 9000, "detail": "0/3 (message too long)"}
    pmtu = evaluate_path_mtu({"n1": {"pings": [ok | {"mtu": 4200}, big]}}, ["n1", "n2"])
    assert pmtu["status"] == "fail" and pmtu["bad_pairs"] == [["n1", "n2"]] and pmtu["value"] == 4200
    assert "9000-byte don't-fragment ping to n2/rdma1" in pmtu["reason"]


# ------------------------------------------------------------------------------------ node health

# The rung gathers each node's rdma-node-check result (module rdma_llm.cluster.node_check, whose checks and their
# verdicts are tested in tests/unit/plugins/module_utils/node/): here, how a node's checks become the rung's.
NODE = {"interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}], "modules": ["ib_core"]}


def _node_result(nic=None, **facts) -> dict:
    veth = {"exists": True, "operstate": "up", "carrier": 1, "mtu": 9000, "speed_mbps": 10000, "virtual": True}
    j = evaluate({"time": 0, "groups": ["fabric"], "nic": {"rdma0": veth | (nic or {})}, "rdma": [],
                  "modules": None} | facts, resolve(NODE))  # fmt: skip
    status, reason = summary(j.checks)
    return {"status": status, "reason": reason, "checks": j.checks, "notes": j.notes, "rail_speeds": j.rates}


def test_node_health_rung_names_each_hosts_checks() -> None:
    results = {"n1": _node_result(), "n2": _node_result({"mtu": 1500}), "n3": None}
    rung = evaluate_node_health(results, ["n1", "n2", "n3"])
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2", "n3"]
    assert (rung["value"], rung["threshold"]) == (1, 3)
    assert "n2: rdma0: MTU 1500 (configured 9000)" in rung["reason"]
    assert "n3: no node check result (host failed or unreachable)" in rung["reason"]
    assert {c["host"] for c in rung["checks"]} == {"n1", "n2", "n3"} and rung["speeds"] == {"n1": None, "n2": None}
    # The lab's node: veth, no RDMA, no /proc/modules: passes, and says what it skipped.
    lab = evaluate_node_health({"n1": _node_result()}, ["n1"])
    assert lab["status"] == "pass" and lab["unit"] == "hosts"
    assert "no RDMA device found" in lab["reason"] and "kernel without loadable modules" in lab["reason"]
    assert "nominal 10000 Mb/s ignored" in lab["reason"]


def test_node_health_rung_passes_a_warning_and_notes_it() -> None:
    res = _node_result()
    res["checks"].append(check("gpu persistence", "warn", "GPU 0: persistence mode disabled"))
    res["notes"].append("rdma0 is an SR-IOV virtual function")
    rung = evaluate_node_health({"n1": res}, ["n1"])
    assert rung["status"] == "pass" and rung["bad_hosts"] == []
    assert rung["notes"] == ["n1: warning: GPU 0: persistence mode disabled", "n1: rdma0 is an SR-IOV virtual function"]
    assert {"host": "n1", "check": "gpu persistence", "status": "warn"}.items() <= rung["checks"][-1].items()


def test_node_health_rung_keeps_each_rail_speed_for_the_pair_tests() -> None:
    res = _node_result() | {"rail_speeds": {"rdma0": 25.0, "rdma1": 100.0}}
    rung = evaluate_node_health({"n1": res}, ["n1"])
    assert rung["rail_speeds"] == {"n1": {"rdma0": 25.0, "rdma1": 100.0}} and rung["speeds"] == {"n1": 25.0}


def _with_stack(res: dict, **versions) -> dict:
    stack = {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002", "torch": "2.9.1"} | versions
    return res | {"groups": ["fabric", "stack"], "stack": {k: v for k, v in stack.items() if v}}


def test_node_health_rung_names_the_node_whose_stack_differs_from_the_fleet() -> None:
    results = {h: _with_stack(_node_result()) for h in ("n1", "n2", "n4")} | {
        "n3": _with_stack(_node_result(), **{"nic firmware": "28.40.1000"})
    }
    rung = evaluate_node_health(results, ["n1", "n2", "n3", "n4"])
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n3"], rung["reason"]
    assert "n3: nic firmware 28.40.1000, 3 of 4 hosts run 28.39.1002" in rung["reason"]
    assert rung["stack"] == {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002", "torch": "2.9.1"}
    assert [c["check"] for c in rung["checks"] if c["host"] == "n1"][-1] == "stack consistency"
    # warn passes the rung and says it; report only records the versions.
    warned = evaluate_node_health(results, ["n1", "n2", "n3", "n4"], stack_mismatch="warn")
    assert warned["status"] == "pass" and warned["notes"] == [
        "n3: warning: nic firmware 28.40.1000, 3 of 4 hosts run 28.39.1002"
    ]
    assert evaluate_node_health(results, ["n1", "n2", "n3", "n4"], stack_mismatch="report")["status"] == "pass"
    with pytest.raises(RuleError, match="cluster_validate_stack_mismatch must be fail, warn or report"):
        evaluate_node_health(results, ["n1"], stack_mismatch="maybe")


def test_a_key_one_node_lacks_or_a_tie_names_the_nodes() -> None:
    # A node without the venv's torch differs like a node with another one.
    results = {"n1": _with_stack(_node_result()), "n2": _with_stack(_node_result()),
               "n3": _with_stack(_node_result(), torch=None)}  # fmt: skip
    rung = evaluate_node_health(results, ["n1", "n2", "n3"])
    assert rung["bad_hosts"] == ["n3"] and "n3: torch none, 2 of 3 hosts run 2.9.1" in rung["reason"]
    # Two nodes, two kernels: no majority, both named.
    two = {"n1": _with_stack(_node_result()), "n2": _with_stack(_node_result(), kernel="6.8.0-91-generic")}
    rung = evaluate_node_health(two, ["n1", "n2"])
    assert rung["bad_hosts"] == ["n1", "n2"] and "kernel" not in rung["stack"]
    assert "n1: kernel: no majority (n1 6.8.0-90-generic, n2 6.8.0-91-generic)" in rung["reason"]
    # One node, or nodes whose check ran without the stack group: nothing compared.
    assert evaluate_node_health({"n1": _with_stack(_node_result())}, ["n1"])["status"] == "pass"
    assert evaluate_node_health({"n1": _node_result(), "n2": _node_result()}, ["n1", "n2"])["stack"] == {}


# ------------------------------------------------------------------------------------ NIC counters


def test_nic_counters_rung_names_host_device_port_and_counter() -> None:
    def result(*checks, deltas=None, pause=None):
        return {"checks": list(checks), "counters": {"deltas": deltas or {}, "pause": pause or {}}}

    quiet = check("port counters", "pass", "no error counter grew on 2 port(s) since 2025-11-17T08:00:00Z")
    grew = check("port counters", "fail", "mlx5_0 port 1: symbol_error +3 (since 2025-11-17T08:00:00Z)")
    pause = {"rdma0": {"rx_prio3_pause": 41927}}
    rung = evaluate_nic_counters(
        {"n1": result(quiet, deltas={"mlx5_0:1": {"np_cnp_sent": 12}}, pause=pause), "n2": result(grew)}, ["n1", "n2"]
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"] and rung["value"] == 1
    assert rung["reason"] == "n2: mlx5_0 port 1: symbol_error +3 (since 2025-11-17T08:00:00Z)"
    assert rung["deltas"] == {"n1": {"mlx5_0:1": {"np_cnp_sent": 12}}} and rung["pause"] == {"n1": pause}
    ok = evaluate_nic_counters({"n1": result(quiet)}, ["n1"])
    assert ok["status"] == "pass" and ok["reason"] == "no NIC error counter grew across the stress rungs"
    # The lab: no RDMA device, no pause counters: the rung skips and says why.
    none = check("port counters", "skip", "no RDMA port counters (no RDMA device)")
    lab = evaluate_nic_counters({"n1": result(none)}, ["n1"])
    assert lab["status"] == "skip" and lab["reason"] == "no RDMA port counters (no RDMA device)"
    assert evaluate_nic_counters({"n1": None}, ["n1"])["bad_hosts"] == ["n1"]
