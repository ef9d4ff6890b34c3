"""The training venv's versions on a node: one directory per pinned set (requirements + constraints) under the
versions directory, and the venv path a symlink to the one in use. A new pin builds beside the old one; a job
resolves the link when it starts (train_launch) and keeps its directory; going back to earlier pins is a switch of
the link, with no install, while their directory is kept (`keep`).

Plain Python (stdlib only), every path under a root (tests/unit/plugins/module_utils/host/test_venv_versions.py
runs it on fake trees); the module rdma_llm.cluster.train_venv_version runs it on the node.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

STAMP = ".pins.sha256"
# A version's directory name: the first characters of its pins' sha256 (48 bits: no two pin sets of one cluster
# collide in practice, and the name stays readable in `ls` and in a unit's ExecStart).
ID_LEN = 12


def version_id(pins_sum: str) -> str:
    return str(pins_sum)[:ID_LEN]


def _real(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def read(root: str, path: str, versions_dir: str, files: Iterable[str]) -> dict:
    """The node's state for one run: the content of each of `files` that exists (stripped), what `path` is
    (`link` with its target, `dir` with its stamp, or `absent`), and the versions present (name -> stamp)."""
    real = _real(root, path)
    if os.path.islink(real):
        target = os.readlink(real)
        inside = _real(root, os.path.join(os.path.dirname(path), target))  # an absolute target stays itself
        where = {"kind": "link", "target": target, "stamp": _read(os.path.join(inside, STAMP))}
    elif os.path.isdir(real):
        where = {"kind": "dir", "target": "", "stamp": _read(os.path.join(real, STAMP))}
    else:
        where = {"kind": "absent", "target": "", "stamp": None}
    vdir = _real(root, versions_dir)
    names = sorted(n for n in os.listdir(vdir) if os.path.isdir(os.path.join(vdir, n))) if os.path.isdir(vdir) else []
    content = {f: _read(_real(root, f)) for f in files}
    return {
        "files": {f: c for f, c in content.items() if c is not None},
        "path": where,
        "versions": {n: _read(os.path.join(vdir, n, STAMP)) for n in names},
    }


def in_use(root: str, dirs: Iterable[str]) -> dict[str, list[int]]:
    """The processes running from each directory: its path in their command line or among their mapped files
    (torch's libraries), from /proc/<pid>/cmdline and /proc/<pid>/maps."""
    wanted = {d.rstrip("/") + "/": d for d in dirs}
    out: dict[str, list[int]] = {d: [] for d in wanted.values()}
    proc = _real(root, "/proc")
    for pid in sorted((p for p in os.listdir(proc) if p.isdigit()), key=int) if os.path.isdir(proc) else []:
        seen = ""
        for name in ("cmdline", "maps"):
            try:
                with open(os.path.join(proc, pid, name), "rb") as handle:
                    seen += handle.read().replace(b"\0", b" ").decode("utf-8", "replace") + "\n"
            except OSError:
                continue
        for prefix, d in wanted.items():
            if prefix in seen:
                out[d].append(int(pid))
    return out


def plan(
    state: Mapping[str, Any],
    path: str,
    versions_dir: str,
    want: str,
    keep: int,
    busy: Mapping[str, list[int]],
    ages: Mapping[str, float],
) -> dict:
    """What the switch to version `want` does: {migrate: [src, dst] or None, link: the new target or None (already
    there), remove: [version directories], blocked: why the switch waits, or '', notes: [...]}.

    state: read()'s answer; busy: in_use() of the path and each version directory; ages: each version's build time
    (its stamp's mtime), newest kept first. A real directory at `path` (the layout before versions) becomes the
    version its stamp names, unless a process runs from it: those started from the path itself would import the new
    version's files after the switch, so the switch waits until it is free. A directory without the stamp is not the
    project's to move: ValueError."""
    target = f"{versions_dir.rstrip('/')}/{want}"
    where = state["path"]
    notes: list[str] = []
    migrate = None
    versions = dict(state["versions"])
    if where["kind"] == "dir":
        if busy.get(path):
            pids = ", ".join(map(str, busy[path]))
            return {
                "migrate": None,
                "link": None,
                "remove": [],
                "blocked": f"{path} is a directory in use (PIDs {pids}): the new version waits in {target}; "
                "run again once it is free",
                "notes": [],
            }
        if not where["stamp"]:
            raise ValueError(
                f"{path} is a directory without the project's {STAMP} (a venv of your own, or one whose install "
                "did not finish): move it away or remove it, or set train_venv_path elsewhere; nothing was changed"
            )
        name = version_id(where["stamp"])
        if name in versions and name != want:
            name += "-before-versions"
        migrate = [path, f"{versions_dir.rstrip('/')}/{name}"]
        if name != want:
            versions[name] = where["stamp"]
        notes.append(f"{path} moved to {migrate[1]} (one directory per version from now on)")
    link = None if where["kind"] == "link" and where["target"].rstrip("/") == target else target
    # Kept: the version in use, the newest others up to `keep` in all, and any a process still runs from.
    others = sorted((n for n in versions if n != want), key=lambda n: -ages.get(n, 0.0))
    remove = []
    for n in others[max(keep - 1, 0) :]:
        d = f"{versions_dir.rstrip('/')}/{n}"
        if busy.get(d):
            notes.append(f"{d} kept: in use (PIDs {', '.join(map(str, busy[d]))})")
        else:
            remove.append(d)
    return {"migrate": migrate, "link": link, "remove": remove, "blocked": "", "notes": notes}


def apply(root: str, path: str, steps: Mapping[str, Any]) -> list[str]:
    """Carry out plan()'s steps: the move, the link replaced in one rename (a reader sees the old target or the
    new one, never none), the removals. Returns what changed, in words."""
    done = []
    if steps.get("migrate"):
        src, dst = steps["migrate"]
        os.makedirs(os.path.dirname(_real(root, dst)), exist_ok=True)
        os.rename(_real(root, src), _real(root, dst))
        done.append(f"moved {src} to {dst}")
    if steps.get("link"):
        real = _real(root, path)
        tmp = f"{real}.new-link"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(steps["link"], tmp)
        os.replace(tmp, real)
        done.append(f"{path} -> {steps['link']}")
    for d in steps.get("remove") or []:
        shutil.rmtree(_real(root, d))
        done.append(f"removed {d}")
    return done
