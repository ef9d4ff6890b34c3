"""Every Molecule scenario (the switch role's and the host roles'), one after another in the background of the test
session.

`make test` spends most of its time waiting: the lab's fault tests wait out timeouts and restarts, and Molecule
waits on systemd containers. The scenarios therefore start as soon as collection ends (one at a time, each with
its own containers, never the lab's) and run beside the lab tests in the foreground; each scenario's test only
waits for its result. Measured in docs/lab.md ("The suite's time").
"""

from __future__ import annotations

import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def step_passed(output: str, step: str) -> bool:
    """Molecule's own log line for a step says it passed. Its closing DETAILS table is not read: molecule 25 can list
    `idempotence: Executed: Successful` there after that step failed."""
    line = rf"^INFO\s+\[[^\]>]+ > {re.escape(step)}\] Executed: Successful$"
    return re.search(line, ANSI.sub("", output), re.M) is not None


# One scenario's limit; the slowest took 232 s alone and under 650 s beside the lab.
SCENARIO_TIMEOUT_S = 1500


@dataclass
class Result:
    scenario: str
    returncode: int | None  # None: it did not run (see output)
    output: str
    seconds: float


class MoleculeQueue:
    """Runs `molecule test -s <scenario>` for each scenario in turn on a thread; results by scenario."""

    def __init__(
        self, scenarios: list[str], root: Path, env: dict[str, str], before=None, logs: Path | None = None
    ) -> None:
        self.scenarios = list(scenarios)
        self.root = root
        self.env = env
        self.before = before  # called once on the thread first (the lab image both need)
        self.logs = logs or Path(tempfile.mkdtemp(prefix="molecule_queue_"))
        self._results: dict[str, Result] = {}
        self._done = {s: threading.Event() for s in self.scenarios}
        self._proc: subprocess.Popen | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="molecule-queue", daemon=True)

    def start(self) -> MoleculeQueue:
        self._thread.start()
        return self

    def _finish(self, result: Result) -> None:
        self._results[result.scenario] = result
        self._done[result.scenario].set()

    def _run(self) -> None:
        try:
            if self.before is not None:
                self.before()
        except BaseException as e:  # reported by every scenario's test, not lost on the thread
            for s in self.scenarios:
                self._finish(Result(s, None, f"not run: preparing the scenarios failed: {e!r}", 0.0))
            return
        for s in self.scenarios:
            if self._stopping:
                self._finish(Result(s, None, "not run: the test session ended first", 0.0))
                continue
            self._finish(self._one(s))

    def _one(self, scenario: str) -> Result:
        log = self.logs / f"{scenario}.log"
        t0 = time.monotonic()
        with log.open("w") as handle:
            self._proc = subprocess.Popen(
                ["molecule", "test", "-s", scenario],
                cwd=self.root,
                env=self.env,
                # A stdin of its own for the whole scenario: the session's is shared with the tests beside it,
                # which may set it non-blocking (an ssh or podman session), and Ansible then refuses to start
                # ("requires blocking IO on stdin"). Tests beside it do not need this: under `-n 2` each xdist
                # worker's stdin is already /dev/null, and a plain pytest runs its tests one at a time.
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                rc = self._proc.wait(timeout=SCENARIO_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._interrupt()
                rc = None
                handle.write(f"\nmolecule_queue: stopped after {SCENARIO_TIMEOUT_S} s\n")
            finally:
                self._proc = None
        return Result(scenario, rc, log.read_text(errors="replace"), time.monotonic() - t0)

    def _interrupt(self) -> None:
        """SIGINT first, so that Molecule destroys its containers; SIGKILL only if it does not stop."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def result(self, scenario: str) -> Result:
        """Wait for one scenario (its turn plus its own run)."""
        if scenario not in self._done:
            raise KeyError(f"{scenario} is not queued (queued: {', '.join(self.scenarios)})")
        limit = SCENARIO_TIMEOUT_S * (self.scenarios.index(scenario) + 1) + 1800
        if not self._done[scenario].wait(timeout=limit):
            raise TimeoutError(f"molecule {scenario}: no result after {limit} s")
        return self._results[scenario]

    def stop(self) -> None:
        """End of session: run nothing more, interrupt the scenario that is running."""
        self._stopping = True
        self._interrupt()
        self._thread.join(timeout=180)
