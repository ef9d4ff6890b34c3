"""The run report's time accounting (goodput, ETTR), restarts, lost nodes, quarantined checkpoints and straggler
rule (plugins/module_utils/launch/goodput.py)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import goodput as G
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R

from tests.unit.plugins.module_utils.launch.run_records import FAILED, RESTART, rec, train


def test_goodput_of_a_launch_with_one_restart() -> None:
    got = G.goodput(RESTART, 100, 150, FAILED)
    # Kept steps 1-10 (first segment) and 11-20 (second), at 1 s each; 11-17 of the first segment were redone.
    assert got["productive_s"] == 20.0 and got["wall_s"] == 50.0 and got["ettr"] == 0.4
    assert got["steps_recomputed"] == 7
    assert got["failures"] == [
        {"kept_until": 115.0, "last_progress": 120.0, "detected": 122.5, "restarted": 130.0, "first_step_at": 137.0,
         "detect_s": 2.5, "restart_s": 7.5, "to_first_step_s": 7.0, "lost_s": 22.0, "steps_recomputed": 7}
    ]  # fmt: skip
    assert got["failures_s"] == 22.0 and got["other_s"] == 8.0


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        # No log line with a time (an older torchrun): rank 0's own failed result record is the detection.
        (lambda r, f: (r, []), "detected", 123.0),
        # A worker logged nothing before the restart: the last progress and detection fall back.
        (lambda r, f: ([x for x in r if x["kind"] != "result"], []), "detected", None),
        # An older payload wrote no first_step record: the first train record after the restart.
        (lambda r, f: ([x for x in r if x["kind"] != "first_step"], f), "first_step_at", 140.0),
        # The resume step between two logged steps: interpolated at the logged interval's step time.
        (lambda r, f: ([{**x, "step": 12} if x["kind"] == "resume" else x for x in r], f), "kept_until", 117.0),
        # No checkpoint to resume from: everything before the restart is lost, from the segment's start.
        (lambda r, f: ([x for x in r if x["kind"] != "resume"], f), "kept_until", 100.0),
        (lambda r, f: ([x for x in r if x["kind"] != "resume"], f), "steps_recomputed", 17),
    ],
)
def test_goodput_failure_timeline(change, field, expected) -> None:
    records, failures = change(RESTART, FAILED)
    (event,) = G.goodput(records, 100, 150, failures)["failures"]
    assert event[field] == expected


def test_goodput_counts_only_this_launch_and_no_failure_without_restart() -> None:
    earlier = [rec(10, "start"), train(20, 5), rec(21, "result", status="failed", final_step=6)]
    done = [rec(100, "start"), rec(102, "first_step", step=1), train(110, 5, ms=500.0), train(113, 10, ms=600.0)]
    got = G.goodput(earlier + done, 100, 120, [])
    assert got["failures"] == [] and got["steps_recomputed"] == 0
    assert got["productive_s"] == 5.5 and got["ettr"] == 0.275 and got["other_s"] == 14.5
    # A launch without its end (still running, or no manifest timings): no ratio.
    assert G.goodput(done, 100, None, [])["ettr"] is None


def test_run_goodput_over_launches() -> None:
    a = {"launched": 0.0, "ended": 100.0, "productive_s": 40.0, "failures_s": 10.0, "steps_recomputed": 2,
         "failures": [{}]}  # fmt: skip
    b = {"launched": 160.0, "ended": 260.0, "productive_s": 60.0, "failures_s": 0.0, "steps_recomputed": 0,
         "failures": [], "resume_recomputed": 5}  # fmt: skip
    got = G.run_goodput([b, a])  # any order
    assert got == {"launches": 2, "wall_s": 260.0, "productive_s": 100.0, "failures_s": 10.0,
                   "between_launches_s": 60.0, "ettr": 0.3846, "failures": 1, "steps_recomputed": 7}  # fmt: skip
    assert G.run_goodput([]) == {}


def test_quarantined_checkpoints_of_this_launch() -> None:
    """The payload's resume record names what it quarantined (payload/ckpt_verify.py); an earlier launch's and a
    resume without a fall-back add nothing."""
    bad = {"checkpoint": "step_0000015", "why": "n2: model.pt does not match its SHA-256 when saved"}
    records = [
        rec(50, "resume", step=5, quarantined=[{"checkpoint": "step_0000010", "why": "n1: x"}]),
        *RESTART[:6],
        rec(135, "resume", step=10, quarantined=[bad]),
        rec(160, "resume", step=20),
    ]
    got = G.quarantines(records, 100)
    assert got == [{"time": 135, "resumed_at_step": 10, **bad}]
    assert R.quarantine_lines(got) == [
        "step_0000015 at 00:02:15 UTC (n2: model.pt does not match its SHA-256 when saved): resumed from step 10"
    ]
    assert G.quarantines(RESTART, 100) == [] and len(G.quarantines(records, None)) == 2


def ranks(fwd: dict[int, list[float]]) -> list[dict]:
    out = [rec(0, "start", r, hostname=f"n{r}", host=f"n{r}") for r in fwd]
    for r, times in fwd.items():
        out += [train(10 + i, 5 * (i + 1), rank=r, fwd_ms=ms) for i, ms in enumerate(times)]
    return out


@pytest.mark.parametrize(
    ("fwd", "named"),
    [
        ({0: [10, 10, 10, 10], 1: [10, 11, 10, 9], 2: [20, 21, 9, 30]}, [2]),  # 3 of 4 intervals over 1.43 x
        ({0: [10, 10, 10, 10], 1: [10, 11, 10, 9], 2: [14, 14, 14, 14]}, []),  # 1.4 x: within the margin
        ({0: [10, 10, 10, 10], 1: [10, 11, 10, 9], 2: [20, 20, 10, 10]}, []),  # half the intervals: not persistent
        ({0: [10, 10], 1: [10, 10], 2: [30, 30]}, []),  # two intervals are too few to call it
        ({0: [10, 10, 10], 1: [25, 25, 25]}, [1]),  # two ranks: the peer is the other one
        ({0: [10, 10, 10, 10], 1: [10, 10, 10, 10]}, []),
    ],
)
def test_straggler_rule(fwd, named) -> None:
    got = G.stragglers(ranks(fwd), None, 0.7)
    assert [s["rank"] for s in got["stragglers"]] == named
    assert got["slower_than"] == 1.429 and [r["rank"] for r in got["ranks"]] == sorted(fwd)
    for s in got["stragglers"]:
        assert s["host"] == f"n{s['rank']}"


def test_straggler_rule_off_and_this_launch_only() -> None:
    slow = ranks({0: [10, 10, 10], 1: [30, 30, 30]})
    assert G.stragglers(slow, None, 0)["stragglers"] == [] and G.stragglers(slow, None, None)["slower_than"] is None
    assert G.stragglers(slow, 100, 0.7)["ranks"] == []  # the records are an earlier launch's
    lines = R.straggler_lines(G.stragglers(slow, None, 0.7))
    assert lines[0].startswith("Stragglers (forward time over 1.429 x its peers' median"), lines
    assert "**rank 1 on n1**" in lines[0], lines


def test_report_lists_each_restart_of_this_launch_with_cause_and_steps_lost() -> None:
    def rec(t, kind, **kw):
        return {"time": t, "rank": 0, "kind": kind, **kw}

    rank0 = [
        rec(1, "start"),  # an earlier launch: not this one's
        rec(2, "train", step=5),
        rec(10, "start"),
        rec(11, "train", step=5),
        rec(12, "train", step=15),
        rec(13, "train", step=17),
        rec(20, "start"),
        rec(21, "resume", step=10),
        rec(22, "train", step=15),
    ]
    # The survivor (node1, listed first) logged its worker's failure too, earlier than the victim's agent.
    failures = [
        {"host": "lab-node1", "text": "local rank 0 exit code 1", "pid": 5, "code": 1, "time": 14.0},
        {"host": "lab-node2", "text": "local rank 0 killed by SIGKILL", "pid": 7, "code": -9, "time": 14.5},
    ]
    got = G.restarts(rank0, 10, failures)
    cause = "lab-node2: local rank 0 killed by SIGKILL (pid 7)"
    assert got == [
        {"time": 20, "last_step_before": 17, "resumed_at_step": 10, "steps_lost": 7, "cause": cause,
         "world_size_before": None, "world_size_after": None}
    ]  # fmt: skip
    assert G.restarts(rank0, 10, [])[0]["cause"].startswith("unknown")
    assert G.restarts(rank0[:6], 10, []) == []
    # Exit codes only (a rank raised): the earliest failure is the cause.
    exits = [{**failures[0], "time": 15.0}, {**failures[1], "code": 3, "text": "local rank 0 exit code 3"}]
    assert G.restarts(rank0, 10, exits)[0]["cause"] == "lab-node2: local rank 0 exit code 3 (pid 7)"
    # A failure logged after the restart belongs to a later one, not to this.
    late = [failures[0], {**failures[1], "time": 30.0}]
    assert G.restarts(rank0, 10, late)[0]["cause"] == "lab-node1: local rank 0 exit code 1 (pid 5)"


def test_report_names_the_lost_node_and_the_world_size_it_went_on_with() -> None:
    """A node lost for good with min_nodes: the survivors' restart on fewer ranks names it (its own logs are not
    collected; the survivor logged only its broken collective), with the step and the world size."""

    def rec(t, kind, **kw):
        return {"time": t, "rank": 0, "kind": kind, **kw}

    rank0 = [
        rec(10, "start", world_size=2),
        rec(12, "train", step=15),
        rec(13, "train", step=20),
        rec(60, "start", world_size=1),
        rec(61, "resume", step=20, world_size_before=2, world_size=1),
        rec(62, "train", step=25),
    ]
    failures = [{"host": "lab-node1", "text": "local rank 0 exit code 1", "pid": 5, "code": 1, "time": 30.0}]
    lost = [{"host": "lab-node2", "at": 14.0, "why": "unreachable for 45 s (ssh)"}]
    (got,) = G.restarts(rank0, 10, failures, lost)
    assert got["cause"] == "lab-node2 lost (unreachable for 45 s (ssh))"
    assert (got["world_size_before"], got["world_size_after"], got["resumed_at_step"]) == (2, 1, 20)
    assert G.lost_nodes(lost, [got]) == [
        {"host": "lab-node2", "at": 14.0, "why": "unreachable for 45 s (ssh)", "last_step_before": 20,
         "resumed_at_step": 20, "world_size_before": 2, "world_size_after": 1}
    ]  # fmt: skip
    # A restart at the same world size (a rank died, the node stayed) keeps the logged cause.
    same = [r | {"world_size": 2} if r["kind"] == "start" else r for r in rank0]
    assert G.restarts(same, 10, failures, lost)[0]["cause"] == "lab-node1: local rank 0 exit code 1 (pid 5)"
