"""The rolling change's decisions (plugins/module_utils/lifecycle/rolling.py) on recorded Slurm 22.05 outputs
(tests/fixtures/slurm/README.md says where each was recorded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_nodes import node_map
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle import rolling

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("value", "total", "size"),
    [(1, 8, 1), ("2", 8, 2), (3, 2, 2), ("25%", 8, 2), ("20%", 3, 1), ("20%", 32, 6), ("100%", 5, 5), ("1%", 4, 1),
     ("50%", 0, 0)],
)  # fmt: skip
def test_batch_size_reads_a_count_or_a_percentage_as_serial_does(value, total, size) -> None:
    assert rolling.batch_size(value, total) == size


@pytest.mark.parametrize(
    ("value", "why"),
    [(0, "a count of nodes"), ("0%", "a count of nodes"), ("101%", "at most 100%"), (True, "a count of nodes"),
     ("-1", "a count of nodes"), ("2 nodes", "a count of nodes"), (None, "a count of nodes")],
)  # fmt: skip
def test_batch_size_refuses_what_is_not_a_batch(value, why) -> None:
    with pytest.raises(RuleError, match=why):
        rolling.batch_size(value, 8)


def test_jobs_by_node_reads_the_jobs_that_hold_nodes() -> None:
    # squeue_name.txt has two more columns; the rollout's own format (%i|%T|%N) recorded on the lab below.
    # A pending job holds no node, even where squeue names one (the nodes it asked for).
    squeue = "7|PENDING|\n8|PENDING|n5\n6|RUNNING|mol-slurm-[1-2]\n9|COMPLETING|n3\n10|COMPLETED|n4\n"
    assert rolling.jobs_by_node(squeue) == {"mol-slurm-1": ["6"], "mol-slurm-2": ["6"], "n3": ["9"]}


def test_jobs_on_the_lab_recording() -> None:
    squeue = fixture("squeue_rolling.txt")
    assert rolling.jobs_by_node(squeue) == {"lab-node3": [squeue.split("|", 1)[0]]}
    assert rolling.jobs_left(squeue, ["lab-node1", "lab-node3"]) == [f"job {squeue.split('|', 1)[0]} on lab-node3"]
    assert rolling.jobs_left(squeue, ["lab-node1"]) == []


def test_plan_puts_idle_nodes_first_and_never_mixes_idle_and_busy() -> None:
    hosts = ["n1", "n2", "n3", "n4", "n5"]
    assert rolling.plan(hosts, {"n2": ["6"]}, 2) == [["n1", "n3"], ["n4", "n5"], ["n2"]]
    assert rolling.plan(hosts, {}, 2) == [["n1", "n2"], ["n3", "n4"], ["n5"]]
    assert rolling.plan(hosts, {"n1": ["6"], "n5": ["7"]}, 5) == [["n2", "n3", "n4"], ["n1", "n5"]]
    assert rolling.plan(["n1", "n2", "n3"], {"n3": ["6"]}, 1) == [["n1"], ["n2"], ["n3"]]
    with pytest.raises(RuleError):
        rolling.plan(hosts, {}, 0)


def test_host_jobs_reads_each_host_as_its_slurm_node() -> None:
    found = node_map(fixture("scontrol_show_nodes_idle.txt"), {"h1": ["mol-slurm-1"], "h2": ["mol-slurm-2"]})
    assert rolling.host_jobs(["h1", "h2"], found, "6|RUNNING|mol-slurm-2\n") == {"h2": ["6"]}


def test_in_service_and_out_of_service_follow_the_state_words() -> None:
    idle = fixture("scontrol_show_nodes_idle.txt")
    drained = fixture("scontrol_show_node_drained_by_check.txt")
    found = node_map(idle, {"h1": ["mol-slurm-1"], "h2": ["mol-slurm-2"]})
    assert rolling.in_service(["h1", "h2", "h9"], found) == ["h1", "h2"]
    found = node_map(drained, {"h2": ["mol-slurm-2"]})
    assert rolling.in_service(["h2"], found) == []
    assert rolling.nodes_out_of_service(idle, ["mol-slurm-1", "mol-slurm-2"]) == []
    out = rolling.nodes_out_of_service(drained, ["mol-slurm-2", "nosuch"])
    assert out[0].startswith("mol-slurm-2 IDLE+DRAIN (rdma-node-check: ") and out[1] == "nosuch unknown to Slurm"


def test_refusals_name_nodes_drained_by_others_but_not_by_the_rollout() -> None:
    found = node_map(fixture("scontrol_show_node_drained_by_check.txt"), {"h2": ["mol-slurm-2"]})
    (why,) = rolling.refusals(["h2", "h7"], found, True)[:1]
    assert why.startswith("h2: Slurm node mol-slurm-2 is drained by the node check (rdma-node-check: ")
    assert rolling.refusals(["h7"], found, True) == [
        "h7: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of its names)"
    ]
    by_hand = node_map(fixture("scontrol_show_node_drain.txt"), {"h2": ["mol-slurm-2"]})
    assert "is drained by hand (maintenance by hand" in rolling.refusals(["h2"], by_hand, True)[0]
    # A node the repair loop holds or failed is its, not an operator's.
    for reason in ("repair: node-check: rdma0 MTU 1500", "repair: failed: proof failed: FAIL at pair"):
        held = node_map(fixture("scontrol_show_node_drain.txt").replace("maintenance by hand", reason),
                        {"h2": ["mol-slurm-2"]})  # fmt: skip
        assert f"is drained by the repair loop ({reason}" in rolling.refusals(["h2"], held, True)[0]
    # A node a rollout drained (recorded while its job still ran: MIXED+DRAIN) may be rolled again.
    recorded = fixture("scontrol_show_nodes_rolling_drain.txt")
    ours = node_map(recorded, {h: [h] for h in ("lab-node1", "lab-node2", "lab-node3")})
    assert rolling.refusals(list(ours), ours, True) == []
    assert rolling.in_service(list(ours), ours) == ["lab-node1", "lab-node2"]
    assert rolling.nodes_out_of_service(recorded, ["lab-node3"]) == [
        "lab-node3 MIXED+DRAIN (rolling: qos-strict [root@2026-12-03T07:30:36])"
    ]
    assert rolling.refusals(["h2", "h7"], {}, False) == []


def test_reference_prefers_a_proven_node_then_one_in_service_outside_the_batch() -> None:
    assert rolling.reference(["n3"], ["n1"], ["n2", "n1"]) == "n1"
    assert rolling.reference(["n1"], [], ["n1", "n2"]) == "n2"
    assert rolling.reference(["n1", "n2"], [], ["n1", "n2"]) is None


def test_drain_reason_names_the_change_and_leaves_out_what_scontrol_would_split() -> None:
    assert rolling.drain_reason("qos profile") == "rolling: qos profile"
    reason = rolling.drain_reason("qos", 'proof failed: verdict: FAIL at "reachability"\nx')
    assert reason == "rolling: qos: proof failed: verdict: FAIL at  reachability  x"
    assert len(rolling.drain_reason("qos", "y" * 500)) == 240
    # The nested run's log is the report's: the repair's reason keeps the node check's finding after it.
    why = rolling.run_outcome(2, "proof", "", "/srv/artifacts/rolling/20261203-repair/batch-1", {"status": "fail",
                              "first_failure": "node health", "bad_hosts": ["n2"]})  # fmt: skip
    assert rolling.drain_reason("failed", f"{why} (node check: rdma0 MTU 1500)", rolling.REPAIR_REASON) == (
        "repair: failed: proof failed: FAIL at node health; bad host(s): n2 (node check: rdma0 MTU 1500)"
    )
    for bad in ("", "a'b", "a;b", "x" * 65, None, "torch: 2.5"):
        with pytest.raises(RuleError, match="rolling_change"):
            rolling.change_name(bad)
    assert rolling.change_name("torch=2.5:cu124") == "torch=2.5:cu124"


@pytest.mark.parametrize(
    ("reason", "owner"),
    [
        ("rdma-node-check: rdma0 MTU 1500 [root@2026-11-26T13:06:53]", "node_check"),
        ("rolling: qos-strict [root@2026-12-03T07:30:36]", "rolling"),
        ("rolling: torch=2.5:cu124", "rolling"),  # a colon without a space is the change's
        ("rolling: qos: proof failed: FAIL at reachability (log b1.log)", "rolling_failed"),
        ("repair: node-check: rdma0 MTU 1500", "repair"),
        ("repair: failed: proof failed: FAIL at pair (node check: rdma0 MTU 1500)", "repair_failed"),
        ("maintenance by hand [root@2026-11-26T11:48:04]", "other"),
        ("rollingstock", "other"),
        ("", "other"),
    ],
)
def test_drain_owner_reads_who_set_the_reason(reason: str, owner: str) -> None:
    assert rolling.drain_owner(reason) == owner
    assert owner in rolling.DRAIN_OWNERS


def test_the_reasons_the_role_sets_are_read_back_as_its_own() -> None:
    assert rolling.drain_owner(rolling.drain_reason("qos profile")) == "rolling"
    assert rolling.drain_owner(rolling.drain_reason("qos", "proof failed: FAIL at reachability")) == "rolling_failed"
    held = rolling.drain_reason("node-check", "rdma-node-check: rdma0 MTU 1500", rolling.REPAIR_REASON)
    assert rolling.drain_owner(held) == "repair"
    failed = rolling.drain_reason("failed", "proof failed: FAIL at pair (node check: x)", rolling.REPAIR_REASON)
    assert rolling.drain_owner(failed) == "repair_failed"


def test_run_outcome_quotes_the_proofs_verdict_or_the_first_fatal_task() -> None:
    assert rolling.run_outcome(0, "proof", "anything", "l.log") == ""
    verdict = {"status": "fail", "first_failure": "reachability", "bad_hosts": ["lab-node2"]}
    assert rolling.run_outcome(2, "proof", "", "b1-proof.log", verdict) == (
        "proof failed: FAIL at reachability; bad host(s): lab-node2 (log b1-proof.log)"
    )
    # Ansible's default callback, then the YAML one (the lab's ansible.cfg) with the message on its own line.
    change = 'fatal: [lab-node2]: FAILED! => {"changed": false, "msg": "No package matching x"}\n'
    assert (
        rolling.run_outcome(2, "change", change, "c.log")
        == "change failed: lab-node2: No package matching x (log c.log)"
    )
    yaml = "ok: [lab-node1]\nfatal: [lab-node2]: FAILED! => \n    changed: false\n    msg: No package matching x\n"
    assert (
        rolling.run_outcome(2, "change", yaml, "c.log") == "change failed: lab-node2: No package matching x (log c.log)"
    )
    assert rolling.run_outcome(4, "change", "", "c.log") == "change failed: exit status 4 (log c.log)"
    # A run that failed after a passing verdict is not blamed on a rung.
    assert rolling.run_outcome(2, "proof", "", "p.log", {"status": "pass"}) == "proof failed: exit status 2 (log p.log)"


def test_report_passes_only_when_every_batch_was_done() -> None:
    done = rolling.batch_record(1, ["n1"], "done", ref="n2", seconds=31.4)
    skipped = rolling.batch_record(2, ["n3"], "skipped", why="still running after 60 s: job 6 on n3 (never killed)")
    failed = rolling.batch_record(2, ["n3"], "failed", ref="n1", why="proof failed: FAIL at reachability")
    untouched = rolling.batch_record(3, ["n4"], "untouched")
    assert rolling.report([done], "qos")["status"] == "passed"
    partial = rolling.report([done, skipped], "qos")
    assert partial["status"] == "partial" and "n3 (still running after 60 s" in partial["verdict"]
    stopped = rolling.report([done, failed, untouched], "qos")
    assert stopped["status"] == "failed" and stopped["done"] == ["n1"]
    assert stopped["verdict"] == "stopped at batch 2 (n3): proof failed: FAIL at reachability"
    lines = rolling.console_lines(stopped)
    assert lines[0] == "batch 1 n1: done against n2 (31 s)"
    assert lines[-1] == "rolling qos: FAILED: stopped at batch 2 (n3): proof failed: FAIL at reachability"
    with pytest.raises(RuleError):
        rolling.batch_record(1, ["n1"], "maybe")


def test_repair_plan_takes_the_node_checks_drains_without_a_job_only() -> None:
    check = fixture("scontrol_show_node_drained_by_check.txt")
    found = node_map(check, {"h2": ["mol-slurm-2"]})
    plan = rolling.repair_plan(["h2"], found, {})
    assert plan["repair"] == ["h2"] and plan["left"] == []
    assert plan["was"]["h2"].startswith(found["h2"]["Reason"].split(" [")[0][:20])
    assert not plan["was"]["h2"].endswith("]")  # Slurm's [user@time] left out
    busy = rolling.repair_plan(["h2"], found, {"h2": ["41"]})
    assert busy["repair"] == [] and busy["left"] == [
        "h2: drained by the node check but job(s) 41 still run there: left for later"
    ]
    # Drained by hand, by a rollout, or in service: not the loop's.
    by_hand = node_map(fixture("scontrol_show_node_drain.txt"), {"h2": ["mol-slurm-2"]})
    rolled = node_map(fixture("scontrol_show_nodes_rolling_drain.txt"), {"h3": ["lab-node3"], "h1": ["lab-node1"]})
    assert rolling.repair_plan(["h2"], by_hand, {})["repair"] == []
    assert rolling.repair_plan(["h1", "h3"], rolled, {})["repair"] == []
    # A node an earlier repair left drained is taken again, the node check's finding kept.
    failed = {
        "h2": {
            "NodeName": "n2",
            "State": "IDLE+DRAIN",
            "Reason": "repair: failed: proof failed [root@2026-12-03T08:00:00]",
        }
    }
    again = rolling.repair_plan(["h2"], failed, {})
    assert again["repair"] == ["h2"] and again["was"] == {"h2": "proof failed"}


def test_earlier_reason_strips_the_repairs_own_prefixes() -> None:
    assert (
        rolling.earlier_reason({"Reason": "rdma-node-check: rdma0 MTU 1500 [root@t1]"})
        == "rdma-node-check: rdma0 MTU 1500"
    )
    held = rolling.drain_reason("node-check", "rdma-node-check: rdma0 MTU 1500", rolling.REPAIR_REASON)
    assert held == "repair: node-check: rdma-node-check: rdma0 MTU 1500"
    assert rolling.earlier_reason({"Reason": held + " [root@t2]"}) == "rdma-node-check: rdma0 MTU 1500"
    # A failed repair's reason gives back the node check's finding (with its own parentheses), so a second failure
    # does not nest the first one's reason in its own.
    was = "rdma-node-check: rdma0: MTU 1500 (configured 9000)"
    failed = rolling.drain_reason(
        "failed", f"proof failed: FAIL at node_health (node check: {was})", rolling.REPAIR_REASON
    )
    assert rolling.earlier_reason({"Reason": failed + " [root@t3]"}) == was
    kept = rolling.earlier_reason({"Reason": failed})
    again = rolling.drain_reason("failed", f"proof failed: FAIL at pair (node check: {kept})", rolling.REPAIR_REASON)
    assert again == f"repair: failed: proof failed: FAIL at pair (node check: {was})"
