"""The run report's time accounting (goodput, ETTR) and straggler rule (plugins/module_utils/launch/report.py)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R


def rec(t, kind, rank=0, **kw):
    return {"time": t, "rank": rank, "kind": kind, **kw}


def train(t, step, ms=1000.0, rank=0, **kw):
    return rec(t, "train", rank, step=step, step_ms=ms, **kw)


# One launch from 100 to 150: 17 steps, then a worker dies; torchrun logs it at 122.5, rank 0's broken collective
# at 123 (its failed result record); the agents restart at 130 from the checkpoint of step 10, the first step is
# done at 137, and the run goes on to step 20.
RESTART = [
    rec(100, "start", world_size=2),
    train(110, 5),
    train(115, 10),
    train(120, 15),
    rec(123, "result", status="failed", final_step=17),
    rec(130, "start", world_size=2),
    rec(135, "resume", step=10),
    rec(137, "first_step", step=11),
    train(140, 15),
    train(145, 20),
]
FAILED = [{"host": "n2", "text": "local rank 0 killed by SIGKILL", "pid": 7, "code": -9, "time": 122.5}]


def test_goodput_of_a_launch_with_one_restart() -> None:
    got = R.goodput(RESTART, 100, 150, FAILED)
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
    (event,) = R.goodput(records, 100, 150, failures)["failures"]
    assert event[field] == expected


def test_goodput_counts_only_this_launch_and_no_failure_without_restart() -> None:
    earlier = [rec(10, "start"), train(20, 5), rec(21, "result", status="failed", final_step=6)]
    done = [rec(100, "start"), rec(102, "first_step", step=1), train(110, 5, ms=500.0), train(113, 10, ms=600.0)]
    got = R.goodput(earlier + done, 100, 120, [])
    assert got["failures"] == [] and got["steps_recomputed"] == 0
    assert got["productive_s"] == 5.5 and got["ettr"] == 0.275 and got["other_s"] == 14.5
    # A launch without its end (still running, or no manifest timings): no ratio.
    assert R.goodput(done, 100, None, [])["ettr"] is None


def test_run_goodput_over_launches() -> None:
    a = {"launched": 0.0, "ended": 100.0, "productive_s": 40.0, "failures_s": 10.0, "steps_recomputed": 2,
         "failures": [{}]}  # fmt: skip
    b = {"launched": 160.0, "ended": 260.0, "productive_s": 60.0, "failures_s": 0.0, "steps_recomputed": 0,
         "failures": [], "resume_recomputed": 5}  # fmt: skip
    got = R.run_goodput([b, a])  # any order
    assert got == {"launches": 2, "wall_s": 260.0, "productive_s": 100.0, "failures_s": 10.0,
                   "between_launches_s": 60.0, "ettr": 0.3846, "failures": 1, "steps_recomputed": 7}  # fmt: skip
    assert R.run_goodput([]) == {}


def test_run_accounting_reads_every_launch_manifest(tmp_path) -> None:
    """A failed launch A (steps 1-17, checkpoint at 10) and its resume B: the resume recomputes steps 11-17, the
    run's wall time runs from A's launch to B's end and the time between them is down time."""
    records = [
        rec(100, "start"), train(110, 10), rec(112, "result", status="failed", final_step=17),
        rec(300, "start"), rec(305, "resume", step=10), train(310, 20),
    ]  # fmt: skip
    for launch, (since, until) in {"A": (90, 120), "B": (290, 320)}.items():
        manifest = {"launch_id": launch, "nodes": [], "timings": {"launched_epoch": since, "ended_epoch": until}}
        (tmp_path / f"manifest-{launch}.json").write_text(json.dumps(manifest))
    this = json.loads((tmp_path / "manifest-B.json").read_text())
    launch, run = R.run_accounting(tmp_path, this, records)
    assert launch["resume_recomputed"] == 7 and launch["productive_s"] == 10.0 and launch["wall_s"] == 30.0
    assert run["launches"] == 2 and run["wall_s"] == 230.0 and run["between_launches_s"] == 170.0
    assert run["productive_s"] == 20.0 and run["steps_recomputed"] == 7


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
    got = R.quarantines(records, 100)
    assert got == [{"time": 135, "resumed_at_step": 10, **bad}]
    assert R.quarantine_lines(got) == [
        "step_0000015 at 00:02:15 UTC (n2: model.pt does not match its SHA-256 when saved): resumed from step 10"
    ]
    assert R.quarantines(RESTART, 100) == [] and len(R.quarantines(records, None)) == 2


def test_report_names_quarantined_checkpoints(tmp_path) -> None:
    """report.json, report.md and the play's summary lines of a run whose restart fell back (R.write)."""
    bad = {"checkpoint": "step_0000015", "why": "n1: model.pt has 1000 bytes, 9000 when saved"}
    records = [*RESTART[:6], rec(135, "resume", step=10, quarantined=[bad]), *RESTART[7:]]
    manifest = {
        "run_id": "r1", "outcome": "completed", "message": "", "engine": "ddp", "model": "tiny", "launch_id": "A",
        "nodes": [{"host": "n1"}], "timings": {"started_epoch": 90, "launched_epoch": 100, "ended_epoch": 150},
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "n1" / "out").mkdir(parents=True)
    (tmp_path / "n1" / "out" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines = R.write(tmp_path)
    said = "step_0000015 at 00:02:15 UTC (n1: model.pt has 1000 bytes, 9000 when saved): resumed from step 10"
    assert f"quarantined: {said}" in lines
    assert f"- {said}" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["quarantined"] == [
        {"time": 135, "resumed_at_step": 10, **bad}
    ]


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
    got = R.stragglers(ranks(fwd), None, 0.7)
    assert [s["rank"] for s in got["stragglers"]] == named
    assert got["slower_than"] == 1.429 and [r["rank"] for r in got["ranks"]] == sorted(fwd)
    for s in got["stragglers"]:
        assert s["host"] == f"n{s['rank']}"


def test_straggler_rule_off_and_this_launch_only() -> None:
    slow = ranks({0: [10, 10, 10], 1: [30, 30, 30]})
    assert R.stragglers(slow, None, 0)["stragglers"] == [] and R.stragglers(slow, None, None)["slower_than"] is None
    assert R.stragglers(slow, 100, 0.7)["ranks"] == []  # the records are an earlier launch's
    lines = R.straggler_lines(R.stragglers(slow, None, 0.7))
    assert lines[0].startswith("Stragglers (forward time over 1.429 x its peers' median"), lines
    assert "**rank 1 on n1**" in lines[0], lines


def test_the_restart_after_losing_node_rank_0_is_seen_through_the_survivor() -> None:
    """min_nodes with the rendezvous store elsewhere: n1 (rank 0) is lost for good and not collected; n2 was rank 1
    and is rank 0 of one after the restart. Rank 0's records alone hold one start: no restart. The lineage follows
    n2 back through rank 1."""
    n2 = [
        rec(100, "start", rank=1, world_size=2, local_rank=0),
        train(110, 5, rank=1),
        train(115, 10, rank=1),
        train(120, 15, rank=1),
        rec(160, "start", rank=0, world_size=1, local_rank=0),
        rec(165, "resume", step=10, world_size_before=2),
        train(170, 15),
    ]
    records = [{**r, "host": "n2"} for r in n2]
    lost = [{"host": "n1", "at": 125.0, "why": "unreachable for 45 s"}]
    assert R.restarts([r for r in records if r["rank"] == 0], 100, [], lost) == []
    line = R.lineage(records)
    assert [(r["kind"], r["rank"]) for r in line][:2] == [("start", 1), ("train", 1)]
    (restart,) = R.restarts(line, 100, [], lost)
    assert restart["cause"] == "n1 lost (unreachable for 45 s)" and restart["resumed_at_step"] == 10, restart
    assert (restart["world_size_before"], restart["world_size_after"], restart["last_step_before"]) == (2, 1, 15)
    # Where rank 0 never moved, the lineage is rank 0's records.
    both = [{**r, "host": "n1", "local_rank": 0} for r in RESTART] + [{**r, "host": "n2", "rank": 1} for r in RESTART]
    assert R.lineage(both) == [r for r in both if r["host"] == "n1"]
