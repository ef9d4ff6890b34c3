"""The lab's cpu groups (lab/cgroups.py) on a fake cgroup v1 tree: the lab's hosts and lane above the rest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from lab import cgroups, cluster
from tests import lanes
from tests.conftest import ROOT


def v1_tree(root: Path) -> Path:
    for hierarchy in ("cpu", "memory", "pids"):
        (root / hierarchy).mkdir(parents=True)
    (root / "cpu" / "cpu.shares").write_text("1024\n")
    return root


def test_a_group_is_made_with_its_shares_and_kept(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    assert cgroups.cpu_group("g", 8192, root) == "/g"
    assert (root / "cpu" / "g" / "cpu.shares").read_text() == "8192\n"
    # Made again (a second `lab up`): the same group, its shares set again.
    assert cgroups.cpu_group("g", 128, root) == "/g"
    assert (root / "cpu" / "g" / "cpu.shares").read_text() == "128\n"


def test_no_cgroup_v1_cpu_hierarchy_no_group(tmp_path: Path) -> None:
    assert cgroups.cpu_group("g", 8192, tmp_path) is None  # e.g. cgroup v2: the lab runs as before
    (tmp_path / "cpu").mkdir()
    assert cgroups.cpu_group("g", 8192, tmp_path) is None  # a cpu directory without cpu.shares
    assert not cgroups.join("g", 8192, root=tmp_path)
    readonly = v1_tree(tmp_path / "ro")
    (readonly / "cpu").chmod(0o555)
    try:
        if os.geteuid() != 0:  # root writes through a mode
            assert cgroups.cpu_group("g", 8192, readonly) is None
    finally:
        (readonly / "cpu").chmod(0o755)


def test_join_writes_the_process_into_its_group(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    assert cgroups.join("g", 128, pid=4242, root=root)
    assert (root / "cpu" / "g" / "cgroup.procs").read_text() == "4242\n"
    assert cgroups.join("g", 128, root=root)
    assert (root / "cpu" / "g" / "cgroup.procs").read_text() == f"{os.getpid()}\n"


def test_remove_takes_empty_groups_from_every_hierarchy(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    for hierarchy in ("cpu", "memory", "pids"):
        (root / hierarchy / "g" / "libpod-abc").mkdir(parents=True)
    (root / "memory" / "other").mkdir()
    cgroups.remove("g", root)
    assert not list(root.glob("*/g"))
    assert (root / "memory" / "other").is_dir()  # only its own name
    cgroups.remove("g", root)  # nothing left: no error
    cgroups.remove("g", tmp_path / "absent")


def test_a_lab_host_runs_in_the_group_it_is_given() -> None:
    node = cluster.Node(1)
    assert "--cgroup-parent=/rdma_llm_lab" in cluster.node_run_args(node, cgroup_parent="/rdma_llm_lab")
    assert not [a for a in cluster.node_run_args(node) if a.startswith("--cgroup-parent")]


def test_each_lane_worker_joins_its_group(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)

    def config(worker: str, count: int = 2):
        return SimpleNamespace(workerinput={"workerid": worker, "workercount": count})

    lanes.yield_to_the_lab(config("gw0"), cgroup_root=root)
    assert (root / "cpu" / cgroups.LAB_GROUP / "cgroup.procs").read_text() == f"{os.getpid()}\n"
    assert (root / "cpu" / cgroups.LAB_GROUP / "cpu.shares").read_text() == f"{cgroups.LAB_SHARES}\n"
    assert not (root / "cpu" / cgroups.REST_GROUP).exists()
    # One worker (or a plain pytest) has no lanes: no group.
    lanes.yield_to_the_lab(config("gw0", 1), cgroup_root=root)
    lanes.yield_to_the_lab(SimpleNamespace(), cgroup_root=root)
    assert not (root / "cpu" / cgroups.REST_GROUP).exists()
    # The rest's worker (in a process of its own: it renices) joins the rest's group, far below the lab's.
    code = (
        "import os, sys; from types import SimpleNamespace; from tests import lanes; "
        "lanes.yield_to_the_lab(SimpleNamespace(workerinput={'workerid': 'gw1', 'workercount': 2}), "
        "cgroup_root=__import__('pathlib').Path(sys.argv[1])); print(os.getpid(), os.nice(0))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(root)], cwd=ROOT, capture_output=True, text=True, check=True)
    pid, nice = proc.stdout.split()
    assert (root / "cpu" / cgroups.REST_GROUP / "cgroup.procs").read_text() == f"{pid}\n"
    assert int(nice) == min(os.nice(0) + lanes.REST_NICE, 19)
    assert cgroups.REST_SHARES * 8 <= cgroups.LAB_SHARES  # the lab far above
