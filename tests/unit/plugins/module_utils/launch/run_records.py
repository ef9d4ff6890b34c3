"""Rank 0's metrics records as the payload writes them, for the run report's tests (test_goodput.py, test_summary.py,
test_report.py): a launch with one automatic restart and the worker failure torchrun logged."""

from __future__ import annotations


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
