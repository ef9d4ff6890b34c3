"""The background Molecule queue (tests/molecule_queue.py) with a stand-in `molecule` on PATH: results arrive per
scenario in order, a failure is kept, and the end of the session interrupts the running scenario with SIGINT
(so that Molecule can destroy its containers) and runs nothing more."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.molecule_queue import MoleculeQueue

pytestmark = pytest.mark.lint

# `molecule test -s <name>`: "slow" waits until interrupted and says so; "bad" fails; "stdin" fails as Ansible
# does when its stdin is non-blocking. Python, not sh: a launcher that ignores SIGINT (a shell's background job)
# passes that on, and sh cannot trap a signal ignored on entry; Molecule itself is Python.
# "slow" sets its handler before it prints: the test interrupts as soon as it reads the first line.
FAKE = f"""#!{sys.executable}
import os, signal, sys, time
name = sys.argv[3]
def interrupted(*_):
    print("interrupted", flush=True)
    sys.exit(130)
if name == "slow":
    signal.signal(signal.SIGINT, interrupted)
print("molecule " + " ".join(sys.argv[1:]), flush=True)
if name == "bad":
    sys.exit(3)
if name == "stdin" and not os.get_blocking(0):
    sys.exit(9)
if name == "slow":
    time.sleep(30)
print("idempotence")
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "molecule").write_text(FAKE)
    (bin_dir / "molecule").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_results_per_scenario_in_order(tmp_path: Path, env: dict[str, str]) -> None:
    seen = []
    queue = MoleculeQueue(["a", "bad", "c"], tmp_path, env, before=lambda: seen.append("before"), logs=tmp_path).start()
    a, bad, c = (queue.result(s) for s in ("a", "bad", "c"))
    assert seen == ["before"]
    assert (a.returncode, bad.returncode, c.returncode) == (0, 3, 0)
    assert a.output == "molecule test -s a\nidempotence\n" and "idempotence" not in bad.output
    with pytest.raises(KeyError):
        queue.result("never-queued")


def test_a_failing_preparation_is_reported_by_every_scenario(tmp_path: Path, env: dict[str, str]) -> None:
    def broken() -> None:
        raise SystemExit("lab: mmdebstrap failed (rc 1)")

    queue = MoleculeQueue(["a", "b"], tmp_path, env, before=broken, logs=tmp_path).start()
    for s in ("a", "b"):
        r = queue.result(s)
        assert r.returncode is None and "mmdebstrap failed" in r.output, r


def test_stop_interrupts_the_running_scenario_and_runs_nothing_more(tmp_path: Path, env: dict[str, str]) -> None:
    queue = MoleculeQueue(["slow", "after"], tmp_path, env, logs=tmp_path).start()
    log = queue.logs / "slow.log"
    deadline = time.monotonic() + 10
    while not (log.exists() and "molecule test -s slow" in log.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the first scenario never started"
        time.sleep(0.05)
    t0 = time.monotonic()
    queue.stop()
    assert time.monotonic() - t0 < 10
    slow, after = queue.result("slow"), queue.result("after")
    assert slow.returncode == 130 and "interrupted" in slow.output, slow
    assert after.returncode is None and after.output == "not run: the test session ended first"


def test_a_scenario_never_shares_the_sessions_stdin(tmp_path: Path, env: dict[str, str]) -> None:
    """ssh or podman beside the queue may set the session's stdin non-blocking; Ansible then refuses to start.
    Here the session's stdin is a non-blocking pipe while the queue runs."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    saved = os.dup(0)
    try:
        os.dup2(read_end, 0)
        result = MoleculeQueue(["stdin"], tmp_path, env, logs=tmp_path).start().result("stdin")
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert result.returncode == 0, result.output


# Molecule 25's lines for the idempotence step, recorded from `molecule test` on a delegated scenario here: a
# converge that changes nothing, then one whose command task reports changed on every run.
PASSED = """INFO     [default > idempotence] Executing
INFO     [default > idempotence] Executed: Successful
default > idempotence: Executed: Successful
"""
FAILED = """INFO     [default > idempotence] Executing
CRITICAL Idempotence test failed because of the following tasks:
ERROR    [default > idempotence] \x1b[31mExecuted: Failed\x1b[0m
default > idempotence: Executed: Successful
"""


def test_a_step_passed_only_by_molecules_own_line_for_it() -> None:
    from tests.molecule_queue import step_passed

    assert step_passed(PASSED, "idempotence")
    assert not step_passed(FAILED, "idempotence")  # the DETAILS table's "Successful" after a failure is not read
    assert not step_passed(
        "INFO     [default > discovery] scenario test matrix: converge, idempotence\n", "idempotence"
    )
    assert not step_passed(PASSED, "verify")
