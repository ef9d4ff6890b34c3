"""CPU groups of the lab's own: the lab's hosts (and the test suite's lab lane) above the rest of the machine.

podman (cgroupfs manager, cgroup v1) puts every container in one parent group, `libpod_parent`, whose weight at
the top of the tree is 1,024 however many containers it holds: two busy lab hosts in it got 0.30-0.41 of what they
get alone beside four nice-10 processes outside it, and 0.88-0.90 in a top-level group of 8,192 (bench/bench_lanes.py,
docs/benchmarks.md). Niceness orders processes within one group only, so the groups are what decides.

Only cgroup v1 with a writable `cpu` hierarchy is handled (this machine kind and its CI); anywhere else the
functions return None or False and the lab runs in podman's default group, as before. `root` is a parameter so
the tests run on a fake tree.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
LAB_GROUP = "rdma_llm_lab"
REST_GROUP = "rdma_llm_rest"
# cpu.shares: podman's own default for a container (and libpod_parent's) is 1,024.
LAB_SHARES = 8192
REST_SHARES = 1024


def _cpu(root: Path) -> Path | None:
    cpu = root / "cpu"
    return cpu if (cpu / "cpu.shares").is_file() else None


def cpu_group(name: str, shares: int, root: Path = ROOT) -> str | None:
    """Make (or keep) the top-level cpu group `name` with `shares`; its path for `podman --cgroup-parent`, or
    None where there is no writable cgroup v1 cpu hierarchy."""
    cpu = _cpu(root)
    if cpu is None:
        return None
    group = cpu / name
    try:
        group.mkdir(exist_ok=True)
        (group / "cpu.shares").write_text(f"{shares}\n")
    except OSError:
        return None
    return f"/{name}"


def join(name: str, shares: int, pid: int = 0, root: Path = ROOT) -> bool:
    """Move process `pid` (0: this one) into the cpu group `name` (made with `shares` if missing); its children
    inherit it. False where that cannot be done."""
    if cpu_group(name, shares, root) is None:
        return False
    try:
        (root / "cpu" / name / "cgroup.procs").write_text(f"{pid or os.getpid()}\n")
    except OSError:
        return False
    return True


def remove(name: str, root: Path = ROOT) -> None:
    """Remove the group `name` from every v1 hierarchy podman made it in, where it is empty (a group with a
    process or a container in it stays: rmdir refuses)."""
    for hierarchy in sorted(root.glob("*")) if root.is_dir() else []:
        group = hierarchy / name
        if not group.is_dir():
            continue
        # podman leaves a container's own group behind it empty; it goes first.
        for child in sorted(p for p in group.iterdir() if p.is_dir()):
            with contextlib.suppress(OSError):
                child.rmdir()
        with contextlib.suppress(OSError):
            group.rmdir()
