"""Two lanes for `make test` (pytest-xdist, `-n 2`): the lab's tests in their order on one worker, the rest beside.

The lab's tests mostly wait (training runs, fault timeouts, restarts) and there is one lab per machine, so they
share one worker, in the order they are written (each builds on the lab the one before left). Everything else
(payload, switch, unit, lint, and the tests that wait for the Molecule queue) runs on the other worker, and the
queue runs in that worker, beside its tests. xdist's own schedulers would spread the lab's tests over both
workers. The scheduler sees node ids only, so a lab test is known by its module's name; collection checks that
the name and the `lab` marker agree (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from xdist.scheduler import LoadScheduling

from lab import cgroups

LAB_MODULE = re.compile(r"(^|/)test_lab_\d")
LAB_WORKER, REST_WORKER = "gw0", "gw1"


def is_lab(nodeid: str) -> bool:
    return bool(LAB_MODULE.search(nodeid.split("::", 1)[0]))


def lane_worker(config) -> str | None:
    """This process's worker id in a run of two or more workers; None for a plain pytest or a single worker."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or int(workerinput["workercount"]) < 2:
        return None
    return workerinput["workerid"]


def runs_the_rest(config) -> bool:
    """Whether this process runs the lane of the tests that are not the lab's (where the Molecule queue lives)."""
    return lane_worker(config) in (None, REST_WORKER)


# The lab's lane is the suite's critical path (67 min against ~49 for the rest in a fresh clone, 2026-11-26): the
# other lane yields the CPU to it. Niceness orders processes within one cpu group only, and the lab's hosts run in
# their own (lab/cgroups.py), so each lane's worker also joins a group: the lab's with its hosts, the rest's (with
# its children: payload runs, Molecule's controller, ansible) at 1/8 of the lab's shares; at 1/32 the rest starved
# into timeouts (Molecule's podman exec, a payload run). Only contention is arbitrated: the rest's lane still gets
# every CPU the lab leaves idle.
REST_NICE = 10


def yield_to_the_lab(config, cgroup_root: Path | None = cgroups.ROOT) -> None:
    """In a two-lane run, put each lane's worker in its cpu group (none with `cgroup_root` None) and lower the
    rest's worker's CPU priority (REST_NICE)."""
    worker = lane_worker(config)
    if worker == REST_WORKER:
        os.nice(REST_NICE)
        if cgroup_root is not None:
            cgroups.join(cgroups.REST_GROUP, cgroups.REST_SHARES, root=cgroup_root)
    elif worker == LAB_WORKER and cgroup_root is not None:
        cgroups.join(cgroups.LAB_GROUP, cgroups.LAB_SHARES, root=cgroup_root)


# The lab's first converge is where it needs the machine most (apt, dpkg, pip in its hosts: 227 s alone, 750 s with
# the Molecule queue's containers doing the same beside it). In a two-lane run the queue starts once the lab's
# lane says it has converged (a file named after the run, which both workers share), or after a timeout.
CONVERGE_TEST = "tests/test_lab_2_site.py::test_site_converges"
CONVERGE_WAIT_S = 1200


def converge_signal(config, root: Path) -> Path | None:
    """The file the lab's lane writes once its first converge is done, in a two-lane run (None otherwise)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or int(workerinput["workercount"]) < 2:
        return None
    return root / ".lab" / "lanes" / f"{workerinput['testrunuid']}.converged"


def wait_for(signal: Path | None, timeout: float = CONVERGE_WAIT_S, poll: float = 2.0) -> float:
    """Wait until `signal` exists (at most `timeout` seconds); the seconds waited."""
    t0 = time.monotonic()
    while signal is not None and not signal.exists() and time.monotonic() - t0 < timeout:
        time.sleep(poll)
    return time.monotonic() - t0


def lanes(collection: list[str], workers: list[str]) -> dict[str, list[int]]:
    """{worker id: indexes of its tests, in collection order}: the lab's to gw0, the rest to gw1 (also when no lab
    test is selected: gw0 then idles); with one worker, all to it; workers past the second get nothing."""
    if len(workers) < 2:
        return {workers[0]: list(range(len(collection)))} if workers else {}
    lab = [i for i, nodeid in enumerate(collection) if is_lab(nodeid)]
    rest = [i for i, nodeid in enumerate(collection) if not is_lab(nodeid)]
    return {worker: lab if worker == LAB_WORKER else rest if worker == REST_WORKER else [] for worker in workers}


class LaneScheduling(LoadScheduling):
    """xdist's load scheduler with a fixed first distribution (`lanes`). A worker that crashes hands its
    remaining tests back and LoadScheduling gives them to the workers left, as it does for its own."""

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            return super().schedule()
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        by_id = {node.gateway.id: node for node in self.nodes}
        for worker, indexes in lanes(self.collection, sorted(by_id)).items():
            node = by_id[worker]
            if indexes:
                self.node2pending[node].extend(indexes)
                node.send_runtest_some(indexes)
            node.shutdown()
