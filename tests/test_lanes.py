"""`make test`'s two lanes (tests/lanes.py): under `pytest -n 2` the lab's tests run on one worker in their order,
everything else on the other, and only that worker would start the Molecule queue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests import lanes
from tests.conftest import ROOT

CONFTEST = f"""
import json, os, sys
sys.path.insert(0, {str(ROOT)!r})
import pytest
from tests.lanes import LaneScheduling, runs_the_rest, yield_to_the_lab

def pytest_configure(config):
    yield_to_the_lab(config, cgroup_root=None)

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return LaneScheduling(config, log)

def pytest_collection_finish(session):
    if runs_the_rest(session.config):
        with open("queue-owner", "a") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + "\\n")

@pytest.fixture(autouse=True)
def record(request):
    with open("ran.jsonl", "a") as f:
        f.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], request.node.nodeid, os.nice(0)]) + "\\n")
"""


def test_is_lab_by_module_name() -> None:
    assert lanes.is_lab("tests/test_lab_2_site.py::test_site_converges")
    assert lanes.is_lab("test_lab_4_faults.py::test_x[a::b]")
    assert not lanes.is_lab("tests/test_lab_shape.py::test_rails_in_the_inventory_and_on_the_hosts")
    assert not lanes.is_lab("tests/unit/test_x.py::test_lab_2_like_name")


def test_lanes_split_lab_and_rest_and_keep_order() -> None:
    collection = ["test_lab_1_a.py::t", "test_lab_2_b.py::t", "test_u.py::t1", "test_u.py::t2"]
    assert lanes.lanes(collection, ["gw0", "gw1"]) == {"gw0": [0, 1], "gw1": [2, 3]}
    assert lanes.lanes(collection, ["gw0"]) == {"gw0": [0, 1, 2, 3]}
    assert lanes.lanes(collection, ["gw0", "gw1", "gw2"])["gw2"] == []


def test_runs_the_rest_is_the_second_worker_or_the_only_process() -> None:
    def config(**workerinput):
        return SimpleNamespace(workerinput=workerinput) if workerinput else SimpleNamespace()

    assert lanes.runs_the_rest(config())
    assert lanes.runs_the_rest(config(workerid="gw0", workercount=1))
    assert lanes.runs_the_rest(config(workerid="gw1", workercount=2))
    assert not lanes.runs_the_rest(config(workerid="gw0", workercount=2))


def test_two_workers_run_the_lanes(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("test_lab_1_up.py", "test_lab_2_use.py", "test_unit.py"):
        (tmp_path / name).write_text("".join(f"def test_{i}():\n    pass\n\n" for i in range(4)))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [json.loads(line) for line in (tmp_path / "ran.jsonl").read_text().splitlines()]
    by_worker = {w: [nodeid for worker, nodeid, _ in ran if worker == w] for w in ("gw0", "gw1")}
    lab = [f"test_lab_{m}.py::test_{i}" for m in ("1_up", "2_use") for i in range(4)]
    assert by_worker == {"gw0": lab, "gw1": [f"test_unit.py::test_{i}" for i in range(4)]}, ran
    assert (tmp_path / "queue-owner").read_text().split() == ["gw1"]
    # The rest's lane yields the CPU to the lab's (relative to the pytest that started both).
    # (This test itself runs in the rest's lane under `make test`: niceness stops at 19.)
    base = os.nice(0)
    assert {worker: nice for worker, _, nice in ran} == {"gw0": base, "gw1": min(base + lanes.REST_NICE, 19)}


def test_the_queue_waits_for_the_labs_first_converge(tmp_path: Path) -> None:
    import threading

    def config(worker: str, count: int = 2):
        return SimpleNamespace(workerinput={"workerid": worker, "workercount": count, "testrunuid": "run1"})

    # Both workers of one run name the same file; one process alone (or one worker) does not wait at all.
    signal = lanes.converge_signal(config("gw1"), tmp_path)
    assert signal == lanes.converge_signal(config("gw0"), tmp_path) == tmp_path / ".lab" / "lanes" / "run1.converged"
    assert lanes.converge_signal(SimpleNamespace(), tmp_path) is None
    assert lanes.converge_signal(config("gw0", 1), tmp_path) is None
    assert lanes.wait_for(None) < 0.1
    # The lab's lane writes it when its converge test ends (tests/conftest.py); the wait returns then.
    from tests import conftest

    real = conftest._config.get("config")
    conftest._config["config"] = config("gw0")
    try:
        timer = threading.Timer(0.5, conftest.pytest_runtest_logfinish, (lanes.CONVERGE_TEST, None))
        timer.start()
        waited = lanes.wait_for(tmp_path / "not-yet", timeout=0.3, poll=0.05)
        assert 0.3 <= waited < 1.0  # a timeout is a wait, not a failure
    finally:
        timer.join()
        conftest._config["config"] = real
    written = lanes.converge_signal(config("gw0"), conftest.ROOT)
    try:
        assert written.exists() and lanes.wait_for(written, timeout=5, poll=0.05) < 0.2
    finally:
        written.unlink(missing_ok=True)
