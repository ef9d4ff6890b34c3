"""The reset record's checksums of what the project wrote (`written`), and the copy reset keeps of a file changed
since: a managed file someone edited by hand after the project's last write is not removed or replaced like an
untouched one without a word (kubespray and the configuration managers warn and keep a copy; dpkg keeps
`.dpkg-old`).

A role calls the module with `state: written` after a write that changed one of its files (`when: <write> is
changed`: a run that changes nothing runs nothing more). The entry of that path in the record then holds the sha256
of what the project wrote (`written`), replaced at each later write. At reset, a regular file whose sha256 differs
from it is copied to KEPT/<path>.<UTC time> (mode and owner kept; the directories 0700: a MUNGE key stays secret),
a warning names both, and the reset goes on as before. KEPT is outside the store: forgetting the last record keeps it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, Outcome, ResetError

KEPT = "/var/lib/rdma-llm/kept"
STAMP = "%Y%m%dT%H%M%SZ"


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _regular(host: Host, path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(host.path(path)).st_mode)
    except FileNotFoundError:
        return False


# ----------------------------------------------------------------------------------------- after a write
def record_written(host: Host, manifest: dict, paths: list[str], lines: list[str]) -> None:
    """The sha256 of each path as the project just wrote it; a path that is no regular file now (the role removed
    it) has none. A path the record never saw is a role's mistake: it must be recorded before its first write."""
    entries = {e["path"]: e for e in manifest["paths"]}
    for path in paths:
        entry = entries.get(path)
        if entry is None:
            raise ResetError(f"{path} is not in the record of {manifest['concern']}: record it before writing it")
        digest = sha256(host.path(path)) if _regular(host, path) else None
        if entry.get("written") == digest:
            continue
        if digest is None:
            entry.pop("written", None)
            lines.append(f"{path}: no longer written by the project")
        else:
            entry["written"] = digest
            lines.append(f"{path}: checksum of what the project wrote recorded")


# ----------------------------------------------------------------------------------------- at reset
def edited(host: Host, entry: dict) -> bool:
    """Whether the file is a regular file that differs from what the project last wrote (never, without a checksum:
    a record older than `written`, or a file the role does not checksum)."""
    written = entry.get("written")
    return bool(written) and _regular(host, entry["path"]) and sha256(host.path(entry["path"])) != written


def copy_name(path: str, stamp: str, taken) -> str:
    """KEPT/<path>.<stamp>, with -2, -3 ... where that name is `taken` (two resets in one second)."""
    base = f"{KEPT}{path}.{stamp}"
    name, n = base, 1
    while taken(name):
        n += 1
        name = f"{base}-{n}"
    return name


# What reset does with the file once it is kept, by whether the host had it before the first run: (dry run, run).
THEN = {
    True: ("put back the one the host had before the first run", "puts back the one the host had before the first run"),
    False: ("remove it (the project created it)", "removes it (the project created it)"),
}


def warning(path: str, copy: str, existed: bool, check_mode: bool) -> str:
    head = f"{path} was changed since the project last wrote it: "
    if check_mode:
        return f"{head}reset would keep it as {copy}, then {THEN[existed][0]}"
    return f"{head}kept as {copy}; reset then {THEN[existed][1]}"


def keep_if_edited(host: Host, entry: dict, out: Outcome) -> bool:
    """Copy a file changed since the project wrote it to KEPT, and warn; returns False where the copy failed (the
    file must then stay as it is: an error says why, and the record stays for the next try)."""
    if not edited(host, entry):
        return True
    path = entry["path"]
    planned = {k["copy"] for k in out.kept}
    copy = copy_name(path, host.clock().strftime(STAMP), lambda p: p in planned or os.path.lexists(host.path(p)))
    out.kept.append({"path": path, "copy": copy})
    out.warnings.append(warning(path, copy, entry["existed"], host.check_mode))
    return out.do(host, f"keep {path} as {copy} (changed since the project wrote it)", lambda: _copy(host, path, copy))


def _copy(host: Host, path: str, copy: str) -> None:
    target, kept = host.path(copy), host.path(KEPT)
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(kept, 0o700)  # makedirs' mode is the last directory's only
    os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    shutil.copy2(host.path(path), target)  # content, mode and times
    st = os.lstat(host.path(path))
    with contextlib.suppress(PermissionError):
        os.chown(target, st.st_uid, st.st_gid)
