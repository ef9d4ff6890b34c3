"""The training venv's versions (plugins/module_utils/host/venv_versions.py) on fake node trees: a new pin beside
the old one, a switch back without an install, the layout before versions moved in, never a version in use removed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.venv_versions import (
    apply,
    in_use,
    plan,
    read,
    version_id,
)

pytestmark = pytest.mark.lint

VENV, VDIR = "/opt/rdma-llm/venv", "/opt/rdma-llm/venvs"
A, B, C = "a" * 64, "b" * 64, "c" * 64


def version(root: Path, pins: str, age: float = 0.0) -> str:
    d = root / VDIR.lstrip("/") / version_id(pins)
    (d / "bin").mkdir(parents=True)
    (d / ".pins.sha256").write_text(pins + "\n")
    if age:
        os.utime(d / ".pins.sha256", (age, age))
    return f"{VDIR}/{version_id(pins)}"


def link(root: Path, target: str) -> None:
    (root / "opt/rdma-llm").mkdir(parents=True, exist_ok=True)
    (root / VENV.lstrip("/")).symlink_to(target)


def process(root: Path, pid: int, cmdline: str = "", maps: str = "") -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode())
    (d / "maps").write_text(maps)


def switch(root: Path, want: str, keep: int = 2) -> dict:
    state = read(str(root), VENV, VDIR, [])
    busy = in_use(str(root), [VENV] + [f"{VDIR}/{n}" for n in state["versions"]])
    ages = {n: (root / VDIR.lstrip("/") / n / ".pins.sha256").stat().st_mtime for n in state["versions"]}
    steps = plan(state, VENV, VDIR, version_id(want), keep, busy, ages)
    steps["done"] = apply(str(root), VENV, steps) if not steps["blocked"] else []
    return steps


def test_read_reports_the_link_its_stamp_and_the_versions(tmp_path: Path) -> None:
    a = version(tmp_path, A)
    version(tmp_path, B)
    link(tmp_path, a)
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: 570.86.15\n")
    got = read(str(tmp_path), VENV, VDIR, ["/proc/driver/nvidia/version", f"{a}/.pins.sha256", "/none"])
    assert got == {
        "files": {"/proc/driver/nvidia/version": "NVRM version: 570.86.15", f"{a}/.pins.sha256": A},
        "path": {"kind": "link", "target": a, "stamp": A},
        "versions": {version_id(A): A, version_id(B): B},
    }
    assert read(str(tmp_path / "empty"), VENV, VDIR, [])["path"] == {"kind": "absent", "target": "", "stamp": None}


def test_a_new_pin_switches_the_link_and_keeps_the_previous_for_a_switch_back(tmp_path: Path) -> None:
    a = version(tmp_path, A, age=1000)
    link(tmp_path, a)
    b = version(tmp_path, B, age=2000)
    steps = switch(tmp_path, B)
    assert steps["link"] == b and steps["remove"] == [] and steps["done"] == [f"{VENV} -> {b}"]
    assert os.readlink(tmp_path / VENV.lstrip("/")) == b
    # Back to A's pins: its directory is there, the link alone changes.
    assert switch(tmp_path, A)["done"] == [f"{VENV} -> {a}"]
    # Nothing to do when the link is there already.
    assert switch(tmp_path, A) == {"migrate": None, "link": None, "remove": [], "blocked": "", "notes": [], "done": []}


def test_versions_beyond_keep_go_oldest_first_never_one_in_use(tmp_path: Path) -> None:
    a = version(tmp_path, A, age=1000)
    b = version(tmp_path, B, age=2000)
    link(tmp_path, b)
    c = version(tmp_path, C, age=3000)
    steps = switch(tmp_path, C)
    assert steps["remove"] == [a] and not (tmp_path / a.lstrip("/")).exists()
    assert (tmp_path / b.lstrip("/")).is_dir() and os.readlink(tmp_path / VENV.lstrip("/")) == c
    # A job's torchrun started from B (its resolved path) keeps B even past `keep`.
    version(tmp_path, A, age=4000)
    process(tmp_path, 4242, cmdline=f"{b}/bin/python {b}/bin/torchrun train.py")
    steps = switch(tmp_path, A, keep=1)
    assert steps["remove"] == [c] and steps["notes"] == [f"{b} kept: in use (PIDs 4242)"]
    # Its libraries mapped count as well (a worker whose command line names no path).
    process(tmp_path, 4343, maps=f"7f00-7f10 r-xp 0 08:01 1 {b}/lib/python3.11/site-packages/torch/lib/libc10.so\n")
    assert in_use(str(tmp_path), [b, a])[b] == [4242, 4343]


def test_the_layout_before_versions_moves_in_unless_a_process_runs_from_it(tmp_path: Path) -> None:
    old = tmp_path / VENV.lstrip("/")
    (old / "bin").mkdir(parents=True)
    (old / ".pins.sha256").write_text(A + "\n")
    b = version(tmp_path, B)
    process(tmp_path, 99, cmdline=f"{VENV}/bin/python -m torch.distributed.run")
    steps = switch(tmp_path, B)
    assert steps["blocked"].startswith(f"{VENV} is a directory in use (PIDs 99): the new version waits in {b}")
    assert old.is_dir() and not old.is_symlink()
    (tmp_path / "proc/99/cmdline").write_bytes(b"sleep\x00600")
    steps = switch(tmp_path, B)
    assert steps["migrate"] == [VENV, f"{VDIR}/{version_id(A)}"] and steps["link"] == b
    assert (
        os.readlink(old) == b and (tmp_path / VDIR.lstrip("/") / version_id(A) / ".pins.sha256").read_text() == A + "\n"
    )


def test_the_layout_before_versions_with_the_wanted_pins_becomes_that_version_without_an_install(
    tmp_path: Path,
) -> None:
    old = tmp_path / VENV.lstrip("/")
    (old / "bin").mkdir(parents=True)
    (old / ".pins.sha256").write_text(A + "\n")
    steps = switch(tmp_path, A)
    assert steps["migrate"] == [VENV, f"{VDIR}/{version_id(A)}"] and steps["remove"] == []
    assert os.readlink(old) == f"{VDIR}/{version_id(A)}"
    assert (tmp_path / VDIR.lstrip("/") / version_id(A) / "bin").is_dir()


def test_a_directory_the_project_did_not_build_is_not_moved(tmp_path: Path) -> None:
    (tmp_path / VENV.lstrip("/") / "bin").mkdir(parents=True)
    version(tmp_path, B)
    with pytest.raises(ValueError, match=r"/opt/rdma-llm/venv is a directory without the project's .pins.sha256"):
        switch(tmp_path, B)
    assert not (tmp_path / VENV.lstrip("/")).is_symlink()
