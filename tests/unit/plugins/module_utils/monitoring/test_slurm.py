"""Slurm as metrics (monitoring/slurm.py). Samples: tests/fixtures/slurm/ (recorded on the lab's Slurm 22.05.8,
see its README): `scontrol show nodes --oneliner` with two idle nodes, the node states recorded one by one (down,
drained by hand while not responding, drained by rdma-node-check), three nodes with one drained by a rollout,
`squeue` in the launch's format with one job running and one pending; SDIAG below."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import parse_fields
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle.rolling import DRAIN_OWNERS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import slurm

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import fixture, names, parse, series, value

# Not recorded here (no sdiag was kept from the lab): the lines and their order as Slurm's src/sdiag/sdiag.c prints
# them (the 22.05 series: `Agent thread count`, `Job states ts`, tab-indented sections, the RPC tables), values
# ours. Both sections have a `Last cycle` and a `Mean cycle`.
SDIAG = """\
*******************************************************
sdiag output at Thu Nov 26 13:15:00 2026 (1795698900)
Data since      Thu Nov 26 00:00:00 2026 (1795651200)
*******************************************************
Server thread count:  3
Agent queue size:     0
Agent count:          0
Agent thread count:   0
DBD Agent queue size: 12

Jobs submitted: 7
Jobs started:   6
Jobs completed: 4
Jobs canceled:  1
Jobs failed:    1

Job states ts:  Thu Nov 26 13:14:48 2026 (1795698888)
Jobs pending:   1
Jobs running:   1

Main schedule statistics (microseconds):
\tLast cycle:   52
\tMax cycle:    362
\tTotal cycles: 40
\tMean cycle:   101
\tMean depth cycle:  1
\tCycles per minute: 1
\tLast queue length: 1

Backfilling stats
\tTotal backfilled jobs (since last slurm start): 2
\tTotal backfilled jobs (since last stats cycle start): 0
\tTotal backfilled heterogeneous job components: 0
\tTotal cycles: 26
\tLast cycle when: Thu Nov 26 13:14:30 2026 (1795698870)
\tLast cycle: 1942890
\tMax cycle:  5933334
\tMean cycle: 1960820
\tLast depth cycle: 2
\tLast depth cycle (try sched): 2
\tLast queue length: 1
\tLast table size: 4

Latency for 1000 calls to gettimeofday(): 21 microseconds

Remote Procedure Call statistics by message type
\tREQUEST_PARTITION_INFO                  ( 2009) count:91     ave_time:96     total_time:8770
\tMESSAGE_NODE_REGISTRATION_STATUS        ( 1002) count:12     ave_time:143    total_time:1716

Remote Procedure Call statistics by user
\troot            (       0) count:103    ave_time:102    total_time:10486

Pending RPC statistics
\tNo pending RPCs
"""
NODES = fixture("slurm/scontrol_show_nodes_idle.txt")
SQUEUE = fixture("slurm/squeue_name.txt")


def state_of(name: str) -> str:
    return slurm.node_state(parse_fields(fixture(f"slurm/{name}").strip()))


def test_two_idle_nodes_and_a_running_and_a_pending_job() -> None:
    text = slurm.textfile(0, NODES, SQUEUE, SDIAG)
    assert value(text, "rdma_llm_slurm_up") == 1
    assert value(text, "rdma_llm_slurm_nodes", state="idle") == 2
    assert sum(series(text, "rdma_llm_slurm_nodes").values()) == 2  # one state per node
    for node in ("mol-slurm-1", "mol-slurm-2"):
        assert value(text, "rdma_llm_slurm_node_state", node=node, state="idle") == 1
        assert value(text, "rdma_llm_slurm_node_state", node=node, state="down") == 0
        assert len([k for k in series(text, "rdma_llm_slurm_node_state") if ("node", node) in k]) == len(slurm.STATES)
    assert value(text, "rdma_llm_slurm_jobs", state="running") == 1
    assert value(text, "rdma_llm_slurm_jobs", state="pending") == 1
    assert value(text, "rdma_llm_slurm_jobs", state="suspended") == 0
    assert series(text, "rdma_llm_slurm_pending_jobs") == {(("reason", "Resources"),): 1}


@pytest.mark.parametrize(
    ("recording", "state"),
    [
        ("scontrol_show_node_idle.txt", "idle"),
        ("scontrol_show_node_down.txt", "down"),
        ("scontrol_show_node_drained_by_check.txt", "drained"),  # IDLE+DRAIN
        ("scontrol_show_node_drain.txt", "not_responding"),  # IDLE+DRAIN+NOT_RESPONDING: not heard from first
    ],
)
def test_each_recorded_node_state(recording: str, state: str) -> None:
    assert state_of(recording) == state


@pytest.mark.parametrize(
    ("state_field", "state"),
    [
        ("ALLOCATED+DRAIN", "draining"),  # jobs still run on it
        ("MIXED+DRAIN", "draining"),
        ("IDLE+DRAIN+COMPLETING", "draining"),
        ("DOWN+DRAIN", "down"),
        ("IDLE*", "not_responding"),  # sinfo's short form
        ("ALLOCATED", "allocated"),
        ("MIXED", "mixed"),
        ("IDLE+COMPLETING", "completing"),
        ("IDLE+MAINTENANCE", "maint"),
        ("IDLE+REBOOT_REQUESTED", "reboot"),
        ("IDLE+FAIL", "fail"),
        ("FUTURE", "future"),
        ("SOMETHING_NEW", "unknown"),
    ],
)
def test_the_state_words_slurm_combines(state_field: str, state: str) -> None:
    # The recorded idle node with its State= changed.
    line = fixture("slurm/scontrol_show_node_idle.txt").replace("State=IDLE ", f"State={state_field} ")
    assert slurm.node_state(parse_fields(line.strip())) == state
    assert state in slurm.STATES


@pytest.mark.parametrize(
    ("recording", "by"),
    [
        ("scontrol_show_node_drained_by_check.txt", "node_check"),  # Reason=rdma-node-check: test failure [root@...]
        ("scontrol_show_node_drain.txt", "other"),  # Reason=maintenance by hand [root@...]
        ("scontrol_show_node_idle.txt", None),  # not drained: every owner 0
        ("scontrol_show_node_down.txt", None),  # DOWN with a reason: not a drain
    ],
)
def test_who_drained_each_recorded_node(recording: str, by: str | None) -> None:
    text = slurm.textfile(0, fixture(f"slurm/{recording}"))
    drained = series(text, "rdma_llm_slurm_node_drained_by")
    assert {dict(k)["by"] for k in drained} == set(DRAIN_OWNERS)
    assert {dict(k)["by"] for k, v in drained.items() if v == 1} == ({by} if by else set())


def test_a_rollouts_drain_is_its_own_while_its_job_still_runs() -> None:
    # Recorded on the lab: lab-node3 MIXED+DRAIN with `rolling: qos-strict [root@...]`, its job still running.
    text = slurm.textfile(0, fixture("slurm/scontrol_show_nodes_rolling_drain.txt"))
    assert value(text, "rdma_llm_slurm_node_state", node="lab-node3", state="draining") == 1
    assert value(text, "rdma_llm_slurm_node_drained_by", node="lab-node3", by="rolling") == 1
    assert value(text, "rdma_llm_slurm_node_drained_by", node="lab-node1", by="rolling") == 0
    # The same node left drained by its failed proof, and held or failed by the repair loop.
    for reason, by in (
        ("rolling: qos-strict: proof failed: FAIL at reachability (log b1.log)", "rolling_failed"),
        ("repair: node-check: rdma0 MTU 1500", "repair"),
        ("repair: failed: proof failed: FAIL at reachability (node check: rdma0 MTU 1500)", "repair_failed"),
    ):
        line = fixture("slurm/scontrol_show_nodes_rolling_drain.txt").replace("rolling: qos-strict", reason)
        found = series(slurm.textfile(0, line), "rdma_llm_slurm_node_drained_by")
        assert [dict(k) for k, v in found.items() if v == 1] == [{"node": "lab-node3", "by": by}]


def test_only_pending_jobs_count_by_reason() -> None:
    # The recorded queue with its running job still configuring (its reason `None`): active, not pending.
    configuring = SQUEUE.replace("|RUNNING|", "|CONFIGURING|")
    text = slurm.textfile(0, NODES, configuring)
    assert value(text, "rdma_llm_slurm_jobs", state="configuring") == 1
    assert series(text, "rdma_llm_slurm_pending_jobs") == {(("reason", "Resources"),): 1}


def test_an_unanswered_controller_is_up_0_and_nothing_else() -> None:
    down = "slurm_load_node error: Unable to contact slurm controller (connect failure)"
    assert parse(slurm.textfile(1, down, SQUEUE, SDIAG)) == {("rdma_llm_slurm_up", ()): 0}
    assert parse(slurm.textfile(124, "", SQUEUE, SDIAG)) == {("rdma_llm_slurm_up", ()): 0}  # timed out
    assert value(slurm.textfile(0, NODES), "rdma_llm_slurm_up") == 1


def test_the_scheduler_statistics_each_from_its_section() -> None:
    stats = slurm.parse_sdiag(SDIAG)
    assert stats == {
        "rdma_llm_slurm_server_threads": 3,
        "rdma_llm_slurm_agent_queue_size": 0,
        "rdma_llm_slurm_dbd_agent_queue_size": 12,
        "rdma_llm_slurm_scheduler_jobs_submitted_total": 7,
        "rdma_llm_slurm_scheduler_jobs_started_total": 6,
        "rdma_llm_slurm_scheduler_jobs_completed_total": 4,
        "rdma_llm_slurm_scheduler_jobs_canceled_total": 1,
        "rdma_llm_slurm_scheduler_jobs_failed_total": 1,
        "rdma_llm_slurm_scheduler_last_cycle_seconds": 52e-6,
        "rdma_llm_slurm_scheduler_mean_cycle_seconds": 101e-6,
        "rdma_llm_slurm_scheduler_queue_length": 1,
        "rdma_llm_slurm_backfill_last_cycle_seconds": 1.94289,
        "rdma_llm_slurm_backfilled_jobs_total": 2,
    }
    text = slurm.textfile(0, NODES, SQUEUE, SDIAG)
    assert value(text, "rdma_llm_slurm_backfill_last_cycle_seconds") == 1.94289
    assert value(text, "rdma_llm_slurm_scheduler_jobs_failed_total") == 1


def test_a_section_not_read_does_not_lend_its_lines() -> None:
    # Backfill's heading renamed: its `Last cycle` is no longer the backfill's, nor the main scheduler's.
    stats = slurm.parse_sdiag(SDIAG.replace("Backfilling stats", "Some other stats"))
    assert "rdma_llm_slurm_backfill_last_cycle_seconds" not in stats
    assert stats["rdma_llm_slurm_scheduler_last_cycle_seconds"] == 52e-6
    assert "rdma_llm_slurm_backfilled_jobs_total" not in stats


def test_no_sdiag_no_scheduler_series() -> None:
    text = slurm.textfile(0, NODES, SQUEUE)
    assert not {n for n in names(text) if "scheduler" in n or "backfill" in n}
