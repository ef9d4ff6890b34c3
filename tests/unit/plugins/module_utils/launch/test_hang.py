"""Hang attribution on real py-spy dumps of a 2-rank gloo DDP job (tests/fixtures/hang/README.md says where each
comes from): each rank's reading, the ranks the others waited for, and the node-side dump with py-spy and /proc
faked at their boundaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang, outcome
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as train_report

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures" / "hang"


def threads(name: str) -> list[dict]:
    return json.loads((FIXTURES / name).read_text())


def record(name: str, rank: int, state: str, native: bool) -> dict:
    data = threads(name)
    return {"rank": rank, "pid": data[0]["pid"], "state": state, "native": native, "threads": data, "error": None}


WAITING = record("ddp_waiting_in_all_reduce_native.json", 0, "S", True)
STOPPED = record("ddp_stopped_nonblocking.json", 1, "T", False)


def test_proc_state_reads_past_a_command_name_with_spaces_and_parentheses() -> None:
    assert hang.proc_state("4242 (python3) S 1 4242 4242 0 -1") == "S"
    assert hang.proc_state("4243 (a) b) T 1 4242 4242 0 -1") == "T"


def test_a_rank_idle_in_c10d_work_wait_is_waiting_and_its_own_frame_named() -> None:
    got = hang.classify(WAITING, "lab-node1")
    assert got["status"] == "waiting" and got["collective"] == "c10d::Work::wait", got
    assert got["where"] == "Trainer._all_reduce (payload/train.py:456)", got
    assert got["frame"] == "all_reduce (torch/distributed/distributed_c10d.py:3252)" and got["host"] == "lab-node1"


def test_the_same_wait_without_native_frames_is_read_from_torch_distributed() -> None:
    got = hang.classify(record("ddp_waiting_in_all_reduce_python.json", 0, "S", False))
    assert got["status"] == "waiting" and got["collective"] == "all_reduce", got
    assert got["frame"] == "all_reduce (torch/distributed/distributed_c10d.py:3252)"


def test_a_rank_waiting_for_a_gradient_bucket_in_backward_is_waiting() -> None:
    got = hang.classify(record("ddp_waiting_in_backward_native.json", 0, "R", True))
    assert got["status"] == "waiting" and got["collective"] == "c10d::Reducer::finalize_backward", got
    assert got["where"] == "DDPEngine.forward_backward (payload/engines.py:169)", got


@pytest.mark.parametrize("name", ["ddp_computing_in_reducer_native.json", "ddp_computing_in_gemm_native.json"])
def test_a_rank_computing_is_busy_even_inside_the_reducer(name: str) -> None:
    got = hang.classify(record(name, 1, "R", True))
    assert got["status"] == "busy" and got["why"] == "running outside any collective", got


def test_c10d_deeper_in_the_stack_is_not_a_wait() -> None:
    """The reducer frame under torch's allocator is work, not a wait: only the first frame above the wait
    primitives counts (the same dump marked idle stays out of `waiting`)."""
    frames = next(t for t in threads("ddp_computing_in_reducer_native.json") if t["thread_name"] == "MainThread")
    assert any(f["name"].startswith("c10d::") for f in frames["frames"])
    assert hang.collective_wait(frames["frames"], native=True) is None
    idle = record("ddp_computing_in_reducer_native.json", 1, "S", True)
    for thread in idle["threads"]:
        thread["active"] = False
    assert hang.classify(idle)["status"] == "busy"


def test_a_stopped_rank_is_named_by_its_state_with_the_frame_it_stopped_in() -> None:
    got = hang.classify(STOPPED, "lab-node2")
    assert got["status"] == "stopped" and got["why"] == "stopped (SIGSTOP or job control)", got
    assert got["where"] == "DDPEngine.forward_backward (payload/engines.py:169)", got


def test_python_frames_outside_a_collective_cannot_tell() -> None:
    # The stopped rank's Python frames with a running state (derived): DDP's backward may be computing or waiting.
    got = hang.classify({**STOPPED, "state": "S"})
    assert got["status"] == "unknown", got


def test_the_stopped_rank_is_the_one_the_other_waited_for() -> None:
    verdict = hang.attribute([hang.classify(WAITING, "lab-node1"), hang.classify(STOPPED, "lab-node2")])
    assert verdict["culprits"] == [1] and verdict["culprit_hosts"] == ["lab-node2"] and verdict["waiting"] == [0]
    assert verdict["message"] == (
        "rank 1 (lab-node2) stopped (SIGSTOP or job control) in DDPEngine.forward_backward (payload/engines.py:169)"
        " — 1 rank waited for it in c10d::Work::wait, from Trainer._all_reduce (payload/train.py:456)"
        " (rank 0 (lab-node1))"
    )


def test_a_rank_gone_or_busy_while_the_others_wait_is_named() -> None:
    gone = hang.classify({"rank": 1, "pid": 7, "state": None, "threads": [], "error": "the process is gone"}, "n2")
    busy = hang.classify(record("ddp_computing_in_gemm_native.json", 2, "R", True), "n3")
    verdict = hang.attribute([hang.classify(WAITING, "n1"), gone, busy])
    assert verdict["culprits"] == [1, 2] and verdict["culprit_hosts"] == ["n2", "n3"], verdict
    assert verdict["message"].startswith("rank 1 (n2) the process is gone; rank 2 (n3) running outside any collective")
    assert "waited for them in c10d::Work::wait" in verdict["message"]


def test_every_rank_waiting_points_past_the_ranks() -> None:
    other = {**WAITING, "rank": 1}
    verdict = hang.attribute([hang.classify(WAITING, "n1"), hang.classify(other, "n2")])
    assert verdict["culprits"] == [] and verdict["waiting"] == [0, 1]
    assert verdict["message"].startswith("every rank waits in a collective (rank 0 (n1), rank 1 (n2))"), verdict


def test_every_rank_busy_is_no_hang_to_attribute() -> None:
    busy = [hang.classify(record("ddp_computing_in_gemm_native.json", r, "R", True)) for r in (0, 1)]
    verdict = hang.attribute(busy)
    assert verdict["culprits"] == [] and verdict["message"].startswith("no rank stands out"), verdict


# -- the node side: py-spy and /proc faked at their boundaries -------------------------------------------------


class Spy:
    """Answers `py-spy dump` from fixtures: {mode: (rc, stdout, stderr)}; records each argv."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]):
        self.answers, self.calls = answers, []

    def __call__(self, argv):
        self.calls.append(argv)
        return self.answers[argv[-1]]


def proc_root(tmp_path: Path, pid: int, state: str) -> str:
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "stat").write_text(f"{pid} (python3) {state} 1 {pid} {pid} 0 -1 4194560\n")
    return str(tmp_path)


def test_dump_of_a_running_rank_takes_native_frames(tmp_path: Path) -> None:
    native = (FIXTURES / "ddp_waiting_in_all_reduce_native.json").read_text()
    spy = Spy({"--native": (0, native, "")})
    got = hang.dump_rank(11, 0, spy="/venv/bin/py-spy", run=spy, proc_root=proc_root(tmp_path, 11, "S"))
    assert spy.calls == [["timeout", "-k", "5", "30", "/venv/bin/py-spy", "dump", "--pid", "11", "--json", "--native"]]
    assert got["state"] == "S" and got["native"] and got["error"] is None and len(got["threads"]) == 2


def test_dump_of_a_stopped_rank_does_not_try_to_pause_it(tmp_path: Path) -> None:
    blocking_error = (FIXTURES / "ddp_stopped_blocking_error.txt").read_text()
    spy = Spy({
        "--native": (1, "", blocking_error),
        "--nonblocking": (0, (FIXTURES / "ddp_stopped_nonblocking.json").read_text(), ""),
    })  # fmt: skip
    got = hang.dump_rank(12, 1, run=spy, proc_root=proc_root(tmp_path, 12, "T"))
    assert [c[-1] for c in spy.calls] == ["--nonblocking"]
    assert got["state"] == "T" and not got["native"] and hang.classify(got)["status"] == "stopped"


def test_a_failed_native_read_falls_back_then_both_errors_are_kept(tmp_path: Path) -> None:
    error = (FIXTURES / "ddp_stopped_blocking_error.txt").read_text()
    python_only = (FIXTURES / "ddp_waiting_in_all_reduce_python.json").read_text()
    root = proc_root(tmp_path, 13, "S")
    got = hang.dump_rank(13, 0, run=Spy({"--native": (1, "", error), "--nonblocking": (0, python_only, "")}),
                         proc_root=root)  # fmt: skip
    assert not got["native"] and got["error"] is None and hang.classify(got)["status"] == "waiting"
    both = hang.dump_rank(13, 0, run=Spy({"--native": (1, "", error), "--nonblocking": (1, "", error)}),
                          proc_root=root)  # fmt: skip
    assert both["threads"] == [] and both["error"] == (
        "py-spy --native: Error: Failed to get stack traces Caused by: 0: Failed to suspend process"
        " 1: unexpected waitpid result PtraceEvent(Pid(23559), SIGSTOP, 128) to 23559; py-spy --nonblocking: Error:"
        " Failed to get stack traces Caused by: 0: Failed to suspend process 1: unexpected waitpid result"
        " PtraceEvent(Pid(23559), SIGSTOP, 128) to 23559"
    )
    assert hang.classify(both)["status"] == "unknown"


def test_a_py_spy_that_does_not_answer_is_cut_off_and_said(tmp_path: Path) -> None:
    python_only = (FIXTURES / "ddp_waiting_in_all_reduce_python.json").read_text()
    got = hang.dump_rank(15, 0, run=Spy({"--native": (124, "", ""), "--nonblocking": (0, python_only, "")}),
                         proc_root=proc_root(tmp_path, 15, "S"), limit=7)  # fmt: skip
    assert got["threads"] and not got["native"] and got["error"] is None
    stuck = hang.dump_rank(15, 0, run=Spy({"--native": (124, "", ""), "--nonblocking": (137, "", "")}),
                           proc_root=str(tmp_path), limit=7)  # fmt: skip
    assert stuck["error"] == "py-spy --native: no answer in 7 s; py-spy --nonblocking: no answer in 7 s", stuck


def test_dump_of_a_process_that_is_gone(tmp_path: Path) -> None:
    spy = Spy({})
    got = hang.dump_rank(14, 3, run=spy, proc_root=str(tmp_path))
    assert spy.calls == [] and got["error"] == "the process is gone" and hang.classify(got)["status"] == "gone"


def test_local_ranks_are_the_latest_start_of_each_rank_on_this_host() -> None:
    lines = [
        json.dumps({"kind": "start", "rank": 0, "pid": 100, "hostname": "lab-node1"}),
        json.dumps({"kind": "train", "rank": 0, "step": 5}),
        json.dumps({"kind": "start", "rank": 1, "pid": 200, "hostname": "lab-node2"}),
        "{torn line",
        json.dumps({"kind": "start", "rank": 0, "pid": 101, "hostname": "lab-node1"}),  # the agent restarted it
    ]
    assert hang.local_ranks(lines, "lab-node1") == {0: 101}
    assert hang.local_ranks(lines, "lab-node2") == {1: 200}
    assert hang.local_ranks(lines, "lab-node3") == {}


def test_run_command_says_why_a_tool_did_not_run() -> None:
    rc, out, err = hang.run_command(["/nonexistent/py-spy", "dump"])
    assert rc == 1 and out == "" and "No such file" in err


def test_the_verdict_over_every_hosts_watch() -> None:
    jobs = {
        "lab-node1": {"state": "failed", "hang": {"at": 1000.0, "records": [WAITING]}},
        "lab-node2": {"state": "running", "hang": {"at": 1001.5, "records": [STOPPED]}},
        "lab-node3": {"state": "running"},
    }
    got = hang.verdict(jobs)
    assert got["culprits"] == [1] and got["culprit_hosts"] == ["lab-node2"] and got["at"] == 1000.0, got
    assert [r["host"] for r in got["ranks"]] == ["lab-node1", "lab-node2"]
    assert hang.verdict({"lab-node1": {"state": "failed"}}) is None


def test_a_host_whose_ranks_were_not_read_is_the_one_waited_for() -> None:
    """A node powered off: its watch reads nothing, the survivor's rank waits for it."""
    jobs = {"lab-node1": {"state": "failed", "hang": {"at": 5.0, "records": [WAITING]}},
            "lab-node2": {"state": "unreachable"}}  # fmt: skip
    got = hang.verdict(jobs)
    assert got["culprits"] == [] and got["culprit_hosts"] == ["lab-node2"], got
    assert got["message"] == (
        "rank 0 (lab-node1) waited in c10d::Work::wait for lab-node2 (unreachable), whose ranks could not be read"
    )
    jobs["lab-node3"] = {"state": "running", "hang": {"at": 6.0, "records": [STOPPED]}}
    got = hang.verdict(jobs)
    assert got["culprit_hosts"] == ["lab-node3"] and got["message"].endswith("; not read: lab-node2 (unreachable)")


def test_the_outcome_of_a_hung_job_names_the_rank_waited_for_not_the_first_timeout() -> None:
    """lab-node1's rank timed out in its collective (pg_timeout) and failed first; the dumps the watch took while the
    steps stalled name lab-node2's stopped rank as where it started."""
    failed_unit = {"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainCode": "1",
                   "ExecMainStatus": "1"}  # fmt: skip
    jobs = {
        "lab-node1": {"state": "failed", "ended": 70.0, "unit": failed_unit,
                      "workers": [{"code": 1, "text": "local rank 0 exit code 1", "error": None}],
                      "hang": {"at": 30.0, "step": 17, "records": [WAITING]}},
        "lab-node2": {"state": "running", "hang": {"at": 30.0, "step": 17, "records": [STOPPED]}},
    }  # fmt: skip
    got = outcome.job_outcome(jobs)
    assert got["outcome"] == "failed" and got["first_failed"] == "lab-node2", got
    assert got["message"].startswith(
        "job failed on lab-node1: local rank 0 exit code 1 (torchrun exit code 1); it hung first: rank 1 (lab-node2)"
        " stopped (SIGSTOP or job control) in DDPEngine.forward_backward (payload/engines.py:169)"
    ), got["message"]
    assert got["hang"]["culprits"] == [1] and got["hang"]["at"] == 30.0
    # No dumps (the job failed before its steps stalled for long): the outcome as before.
    plain = outcome.job_outcome({h: {k: v for k, v in j.items() if k != "hang"} for h, j in jobs.items()})
    assert plain["first_failed"] == "lab-node1" and plain["hang"] is None and "hung" not in plain["message"]


def test_the_report_of_a_hung_run_shows_every_rank(tmp_path: Path) -> None:
    stalled = hang.verdict({"lab-node1": {"state": "failed", "hang": {"at": 30.0, "records": [WAITING]}},
                            "lab-node2": {"state": "running", "hang": {"at": 30.0, "records": [STOPPED]}}})  # fmt: skip
    manifest = {
        "run_id": "r1", "outcome": "failed", "message": "job failed on lab-node1: ...", "engine": "ddp",
        "model": "tiny", "launch_id": "A", "nodes": [{"host": "lab-node1"}, {"host": "lab-node2"}],
        "timings": {"started_epoch": 0, "launched_epoch": 10, "ended_epoch": 90}, "hang": stalled,
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    steps = [{"kind": "train", "rank": 0, "step": s, "time": 10.0 + s, "loss_global": 9.0 - s, "tokens_per_s": 100}
             for s in (1, 2)]  # fmt: skip
    (tmp_path / "lab-node1" / "out").mkdir(parents=True)
    (tmp_path / "lab-node1" / "out" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    lines = train_report.write(tmp_path)
    assert f"hang:   {stalled['message']}" in lines
    md = (tmp_path / "report.md").read_text()
    assert (
        "| 1 | lab-node2 | T | stopped (SIGSTOP or job control) | DDPEngine.forward_backward (payload/engines.py:169) |"
        in md
    )
    assert "| 0 | lab-node1 | S | waiting in c10d::Work::wait | Trainer._all_reduce (payload/train.py:456) |" in md
    assert json.loads((tmp_path / "report.json").read_text())["hang"]["culprit_hosts"] == ["lab-node2"]


def flight(name: str) -> dict:
    return hang.flight_summary(json.loads((FIXTURES / name).read_text()))


def test_flight_summary_reads_the_newest_and_the_pending_collective_per_group() -> None:
    gloo = "gloo:all_reduce"
    assert flight("fr_gloo_rank0_waiting.json") == {
        "default_pg": {"last": 4, "op": gloo, "pending": 4, "pending_op": gloo}
    }
    assert flight("fr_gloo_rank1_behind.json") == {
        "default_pg": {"last": 3, "op": gloo, "pending": None, "pending_op": None}
    }


def test_the_flight_recorder_names_the_rank_behind_when_its_stacks_cannot() -> None:
    wait = "c10d::ProcessGroupGloo::runLoop"
    waiting = {"rank": 0, "host": "n1", "status": "waiting", "why": f"waiting in {wait}", "collective": wait,
               "where": None, "flight": flight("fr_gloo_rank0_waiting.json")}  # fmt: skip
    unknown = {"rank": 1, "host": "n2", "status": "unknown", "why": "Python frames only, not in a collective",
               "where": None, "flight": flight("fr_gloo_rank1_behind.json")}  # fmt: skip
    out = hang.attribute([waiting, dict(unknown)])
    assert out["culprits"] == [1] and out["culprit_hosts"] == ["n2"], out
    assert out["message"].startswith("rank 1 (n2) behind: not yet in collective #4 (gloo:all_reduce)"), out["message"]
    assert out["message"].endswith(
        "(flight recorder: 1 rank in collective #4 gloo:all_reduce of default_pg, rank 1 only at #3)"
    ), out["message"]
    # Stopped, it writes no dump: its state names it, the recorder says the others wait in #4.
    stopped = {**unknown, "status": "stopped", "why": "stopped (SIGSTOP or job control)", "flight": None}
    out = hang.attribute([waiting, stopped])
    assert out["culprits"] == [1] and "no dump from rank 1" in out["message"], out["message"]
    # Nothing pending anywhere: the recorder has nothing to add.
    done = {
        **waiting,
        "status": "busy",
        "why": "running outside any collective",
        "flight": flight("fr_gloo_rank1_behind.json"),
    }
    assert hang.flight_verdict([done]) is None


def _trace(name: str, issue_next: bool = False, unretire: int | None = None) -> dict:
    """A recorded flight-recorder trace with one change: `issue_next` adds a collective issued after the last one,
    still pending (the last entry copied with the next record and sequence numbers); `unretire` leaves collective
    #unretire not retired (its completion not yet marked on this rank)."""
    trace = json.loads((FIXTURES / name).read_text())
    entries = trace["entries"]
    if issue_next:
        last = entries[-1]
        seq = last["collective_seq_id"] + 1
        entries.append({**last, "record_id": last["record_id"] + 1, "collective_seq_id": seq, "retired": False})
    for entry in entries:
        if entry["collective_seq_id"] == unretire:
            entry["retired"] = False
    return trace


def test_the_flight_recorder_with_two_pending_collectives() -> None:
    """Rank 0 has issued a fifth all-reduce behind the fourth it waits in: two pending on one rank. Its summary keeps
    the newest issued (#5) and the oldest pending (#4, the one the fifth waits behind), and the verdict names #4,
    with rank 1 behind it at #3."""
    gloo = "gloo:all_reduce"
    ahead = hang.flight_summary(_trace("fr_gloo_rank0_waiting.json", issue_next=True))
    assert ahead == {"default_pg": {"last": 5, "op": gloo, "pending": 4, "pending_op": gloo}}
    behind = {"rank": 1, "flight": flight("fr_gloo_rank1_behind.json")}
    got = hang.flight_verdict([{"rank": 0, "flight": ahead}, behind])
    assert (got["seq"], got["waiting"], got["behind"]) == (4, [0], [1]), got
    assert got["message"] == "flight recorder: 1 rank in collective #4 gloo:all_reduce of default_pg, rank 1 only at #3"
    # Pending on both ranks, #4 on rank 0 and #3 on rank 1 (its #3 not yet marked retired): the newest pending over
    # the ranks is the one they are in, #3 has finished where #4 was issued.
    late = hang.flight_summary(_trace("fr_gloo_rank1_behind.json", unretire=3))
    assert late == {"default_pg": {"last": 3, "op": gloo, "pending": 3, "pending_op": gloo}}
    waiting = {"rank": 0, "flight": flight("fr_gloo_rank0_waiting.json")}
    for ranks in ([waiting, {"rank": 1, "flight": late}], [{"rank": 1, "flight": late}, waiting]):
        got = hang.flight_verdict(ranks)
        assert (got["seq"], got["op"], got["waiting"], got["behind"]) == (4, gloo, [0], [1]), got
        assert got["message"].endswith("1 rank in collective #4 gloo:all_reduce of default_pg, rank 1 only at #3")


def test_read_flight_takes_the_dumps_of_this_request_only(tmp_path: Path) -> None:
    trace = json.loads((FIXTURES / "fr_gloo_rank1_behind.json").read_text())
    (tmp_path / "fr-rank0.json").write_text(json.dumps({"request": "old", "trace": trace}))
    (tmp_path / "fr-rank1.json").write_text(json.dumps({"request": "L1-2", "trace": trace}))
    hang.request_flight(str(tmp_path), "L1-2")
    assert (tmp_path / ".fr-request").read_text() == "L1-2\n"
    clock = iter(range(100))
    got = hang.read_flight(str(tmp_path), [0, 1], "L1-2", wait=3, sleep=lambda s: None, clock=lambda: next(clock))
    assert got[0] is None and got[1]["default_pg"]["last"] == 3, got
