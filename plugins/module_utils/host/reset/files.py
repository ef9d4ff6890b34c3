"""The reset record's files and directories (`paths`, `trees`): kept once, put back exactly.

A file that existed is copied into the record (content, mode, owner); one that did not is removed on reset, with the
directories its write had to create. A directory this concern created that other concerns' files now fill is handed
over to their records (store.py says how the record is kept).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.edits import keep_if_edited, sha256
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import (
    STORE,
    Host,
    Outcome,
    ResetError,
    ancestors,
    concern_dir,
    concerns,
    ensure_store,
    load,
    save,
)


# ----------------------------------------------------------------------------------------- recording
def check_path(path: str, what: str) -> str:
    norm = os.path.normpath(path or "/")
    if not norm.startswith("/") or norm == "/" or norm != path.rstrip("/") or norm in ancestors(STORE):
        raise ResetError(f"{what} {path!r} must be an absolute, normalised path, not / nor a directory of the store's")
    if norm == STORE or norm.startswith(STORE + "/"):
        raise ResetError(f"{what} {path!r} is inside the reset store")
    return norm


def _stat(host: Host, path: str) -> os.stat_result | None:
    try:
        return os.lstat(host.path(path))
    except FileNotFoundError:
        return None


def record_path(host: Host, manifest: dict, path: str, kind: str, lines: list[str]) -> None:
    known = {e["path"] for e in manifest["paths"]}
    if path in known:
        return
    st = _stat(host, path)
    if st is None:
        # The store's own directories are the store's (created.json): forgetting the last record removes them.
        for parent in ancestors(path):
            if parent not in known and parent not in ancestors(STORE) and _stat(host, parent) is None:
                manifest["paths"].append({"path": parent, "kind": "dir", "existed": False})
                known.add(parent)
                lines.append(f"{parent}: absent")
        manifest["paths"].append({"path": path, "kind": kind, "existed": False})
        lines.append(f"{path}: absent")
        return
    entry: dict[str, Any] = {"path": path, "existed": True, "mode": stat.S_IMODE(st.st_mode)}
    entry.update(uid=st.st_uid, gid=st.st_gid)
    if stat.S_ISLNK(st.st_mode):
        entry.update(kind="link", target=os.readlink(host.path(path)))
    elif stat.S_ISDIR(st.st_mode):
        entry["kind"] = "tree" if kind == "tree" else "dir"
    elif stat.S_ISREG(st.st_mode):
        backup = f"files/{len(manifest['paths'])}"
        entry.update(kind="file", backup=backup, sha256=sha256(host.path(path)))
        if not host.check_mode:
            ensure_store(host)
            os.makedirs(os.path.join(concern_dir(host, manifest["concern"]), "files"), mode=0o700, exist_ok=True)
            shutil.copyfile(host.path(path), os.path.join(concern_dir(host, manifest["concern"]), backup))
    else:
        raise ResetError(f"{path} is neither a file, a directory nor a link: not recorded")
    manifest["paths"].append(entry)
    lines.append(f"{path}: {entry['kind']} (kept)")


# ----------------------------------------------------------------------------------------- restoring
def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = handle.read(65536 + 1)
    except (OSError, UnicodeDecodeError):
        return None
    return None if len(data) > 65536 else data


def _write_back(target: str, source: str, mode: int, uid: int, gid: int) -> None:
    """Put the kept copy back: atomically where the file can be replaced, in place where it cannot (a file a
    container runtime bind-mounts, /etc/hosts or /etc/hostname: rename gives EBUSY)."""
    with open(source, "rb") as handle:
        data = handle.read()
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".reset-", dir=directory)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        with contextlib.suppress(PermissionError):
            os.chown(tmp, uid, gid)
        try:
            os.replace(tmp, target)
            return
        except OSError as exc:
            os.unlink(tmp)
            if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES):
                raise
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES):
            raise
    with open(target, "wb") as out:
        out.write(data)
    os.chmod(target, mode)
    with contextlib.suppress(PermissionError):
        os.chown(target, uid, gid)


def _keep_created_dir(host: Host, concern: str, path: str, names: list[str], out: Outcome) -> None:
    """A directory the concern created is not empty: what it holds that other concerns recorded (a later role's
    local fact in facts.d) hands the directory over to them; what no record names is the user's, and said."""
    if out.others is None:
        out.others = {c: m for c in concerns(host) if c != concern for m in [load(host, c)] if m is not None}
    owners: set[str] = set()
    inherited: set[str] = set()  # through a directory inside, handed over already (said once, there)
    foreign = []
    for name in names:
        child = f"{path}/{name}"
        if child in out.own and host.check_mode:
            continue
        if child in out.handed:
            inherited |= out.handed[child]
            continue
        named = {c for c, m in out.others.items() if any(e["path"] == child for e in m["paths"])}
        if named:
            owners |= named
        elif child not in out.kept_dirs:  # a directory kept for its own foreign files was said already
            foreign.append(name)
    out.kept_dirs.add(path)
    if foreign:
        out.notes.append(f"{path} kept: it holds files the project did not record ({', '.join(foreign)})")
    if owners | inherited:
        out.handed[path] = owners | inherited
    if owners:
        out.notes.append(f"{path} kept for {', '.join(sorted(owners))}: their reset removes it")


def hand_over(host: Host, out: Outcome) -> None:
    """Each handed directory joins the records of the concerns whose files it holds, as created by the project,
    outer directories first (a restore walks its paths backwards: files, then the directories holding them)."""
    if host.check_mode or not out.handed:
        return
    for other, manifest in (out.others or {}).items():
        known = {e["path"] for e in manifest["paths"]}
        mine = [p for p in sorted(out.handed, key=len) if other in out.handed[p] and p not in known]
        if mine:
            manifest["paths"][:0] = [{"path": p, "kind": "dir", "existed": False} for p in mine]
            save(host, manifest)


def restore_paths(host: Host, concern: str, entries: list[dict], out: Outcome) -> list[str]:
    """The recorded paths back, last recorded first (files before the directories that hold them); returns the
    paths that changed."""
    changed = []
    for entry in reversed(entries):
        if _restore_path(host, concern, entry, out):
            changed.append(entry["path"])
    return changed


def _restore_path(host: Host, concern: str, entry: dict, out: Outcome) -> bool:
    """One path back to what it was; returns whether it changed."""
    path, real = entry["path"], host.path(entry["path"])
    st = _stat(host, path)
    if not entry["existed"]:
        if st is None:
            return False
        if stat.S_ISDIR(st.st_mode):
            if entry["kind"] == "tree":
                return out.do(host, f"remove {path} (created by the project)", lambda: shutil.rmtree(real))
            names = sorted(os.listdir(real))
            if names:
                _keep_created_dir(host, concern, path, names, out)
                return False
            return out.do(host, f"remove the empty directory {path} (created by the project)", lambda: os.rmdir(real))
        before = _text(real) if stat.S_ISREG(st.st_mode) else None
        if before is not None:
            out.diff.append({"before": before, "after": "", "before_header": path, "after_header": f"{path} (absent)"})
        if not keep_if_edited(host, entry, out):
            return False
        return out.do(host, f"remove {path} (created by the project)", lambda: os.unlink(real))
    kind = entry["kind"]
    if kind == "file":
        source = os.path.join(concern_dir(host, concern), entry["backup"])
        same = (
            st is not None
            and stat.S_ISREG(st.st_mode)
            and sha256(real) == entry["sha256"]
            and stat.S_IMODE(st.st_mode) == entry["mode"]
            and (st.st_uid, st.st_gid) == (entry["uid"], entry["gid"])
        )
        if same:
            return False
        before = _text(real) if st is not None and stat.S_ISREG(st.st_mode) else ""
        after = _text(source)
        if before is not None and after is not None:
            out.diff.append(
                {"before": before, "after": after, "before_header": path, "after_header": f"{path} (kept copy)"}
            )
        if st is not None and stat.S_ISDIR(st.st_mode):
            out.errors.append(f"{path} was a file before the first run and is a directory now: not replaced")
            return False
        if not keep_if_edited(host, entry, out):
            return False
        return out.do(
            host,
            f"restore {path} (mode {entry['mode']:04o})",
            lambda: _write_back(real, source, entry["mode"], entry["uid"], entry["gid"]),
        )
    if kind == "link":
        if st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(real) == entry["target"]:
            return False

        def relink() -> None:
            if os.path.lexists(real):
                os.unlink(real)
            os.symlink(entry["target"], real)

        return out.do(host, f"restore the link {path} -> {entry['target']}", relink)
    # A directory that was there before: its content was not copied; its mode and owner are put back.
    if st is None:
        if kind == "tree":
            out.notes.append(f"{path} was there before the first run and is gone now: its content was not copied")
        return out.do(host, f"recreate the directory {path}", lambda: os.makedirs(real, entry["mode"]))
    if stat.S_IMODE(st.st_mode) != entry["mode"]:
        return out.do(host, f"chmod {entry['mode']:04o} {path}", lambda: os.chmod(real, entry["mode"]))
    if kind == "tree":
        out.notes.append(f"{path} was there before the first run: kept as it is (its content was not copied)")
    return False
