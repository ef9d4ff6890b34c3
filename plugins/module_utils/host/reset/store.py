"""What the project's first run replaces on a host, kept so that playbooks/reset.yml can put it back: the record itself.

Plain Python (stdlib only), run on the node by the module rdma_llm.cluster.reset_record (and by the rdma_qos
module for the NIC values it changes), tested by tests/unit/plugins/module_utils/host/reset/ on temporary trees
with a recording runner. This module keeps the record; record.py writes it, restore.py puts the host back from it.

One record per concern (a role: `common`, `rdma_netplan`, ...), in `/var/lib/rdma-llm/reset/<concern>/`:
`manifest.json` says what the concern found before it first changed it, `files/<n>` keeps the copies. Every entry
is recorded the first time only (a path, a unit, a link, an undo key ...): later runs never overwrite what the
host was before the project came. What a record holds (and the module that reads and restores it):

- `paths` (files.py): files and directories the concern writes. A file that existed is copied (content, mode,
  owner); one that did not is removed on reset, with the directories the write had to create (removed only when
  empty). A directory one concern created that still holds files other concerns recorded (a half site.yml made
  /etc/ansible/facts.d for the host QoS fact; the whole run then put rdma.fact there) passes to their records:
  the last of their resets removes it.
- `trees` (files.py): directories the concern fills entirely (the venv, the wheelhouse): removed with their content
  when the project created them; left alone (and said so) when they were there before.
- `written` (edits.py), in a file's entry: the sha256 of what the project last wrote there; reset keeps a copy of a
  file changed since (/var/lib/rdma-llm/kept/) and warns before it puts the file back or removes it.
- `services` (units.py): systemd units' load, enablement and activity (a unit the project added is stopped and
  disabled before its file goes; one it stopped or disabled is enabled and started again).
- `nft` (kernel.py): nftables tables (`inet rdma_qos`): absent before -> deleted; present -> put back as they were
  listed.
- `groups` (accounts.py): system groups the concern creates (removed when it created them).
- `links` (kernel.py): a network interface's addresses, routes and MTU (reset removes what the project added, puts
  back what it removed, sets the MTU back), read with `ip -j`.
- `modules` (kernel.py): which kernel modules were loaded (reset unloads those the project loaded, where it can).
- `undo` (undo.py): operations that put back one value each (`dcb ...`, a sysfs write, an rmdir), keyed, first key
  wins.
- `packages` (packages.py): what apt installed for the concern (names, dependencies included), and the groups and
  users those installs created: removed only on request.
- `values` (record.py): anything else a concern's reset needs (`hostname`), first value wins.

The store keeps a list of the directories it had to create for itself (`created.json`), so that forgetting the last
record leaves no trace of the store either.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SCHEMA = "rdma-llm-cluster/reset/1"
STORE = "/var/lib/rdma-llm/reset"
CONCERN_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

Runner = Callable[[list[str]], tuple[int, str, str]]


class ResetError(Exception):
    """A record that cannot be read or written, or a request the store refuses."""


@dataclass
class Host:
    """Where the record is kept and how commands run: `root` prefixes every path (tests use a temporary tree),
    `run` runs a command (the module's run_command), `clock` tells the UTC time (the name of a kept copy)."""

    root: str = "/"
    run: Runner | None = None
    check_mode: bool = False
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    def path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def sh(self, argv: list[str]) -> tuple[int, str, str]:
        if self.run is None:
            return 127, "", f"{argv[0]}: no runner"
        return self.run(argv)


# ----------------------------------------------------------------------------------------- the store
def concern_dir(host: Host, concern: str) -> str:
    if not CONCERN_RE.match(concern or ""):
        raise ResetError(f"concern {concern!r} must match {CONCERN_RE.pattern}")
    return host.path(f"{STORE}/{concern}")


def load(host: Host, concern: str) -> dict | None:
    path = os.path.join(concern_dir(host, concern), "manifest.json")
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ResetError(f"cannot read {path}: {exc}") from exc
    if manifest.get("schema") != SCHEMA:
        raise ResetError(f"{path} is not a {SCHEMA} record")
    return manifest


def empty(concern: str) -> dict:
    return {
        "schema": SCHEMA,
        "concern": concern,
        "paths": [],
        "services": {},
        "nft": {},
        "groups": {},
        "links": {},
        "modules": {},
        "undo": [],
        "packages": [],
        "package_groups": [],
        "values": {},
    }


def ensure_store(host: Host) -> None:
    """Create the store's directory, remembering which of its ancestors did not exist (forget removes them)."""
    base = host.path(STORE)
    if os.path.isdir(base):
        return
    created = []
    for part in [*ancestors(STORE), STORE]:
        if not os.path.isdir(host.path(part)):
            os.mkdir(host.path(part), 0o700 if part == STORE else 0o755)
            created.append(part)
    _write_json(os.path.join(base, "created.json"), created)


def save(host: Host, manifest: dict) -> None:
    ensure_store(host)
    directory = concern_dir(host, manifest["concern"])
    os.makedirs(os.path.join(directory, "files"), mode=0o700, exist_ok=True)
    _write_json(os.path.join(directory, "manifest.json"), manifest)


def concerns(host: Host) -> list[str]:
    base = host.path(STORE)
    try:
        return sorted(n for n in os.listdir(base) if os.path.isfile(os.path.join(base, n, "manifest.json")))
    except OSError:
        return []


def forget(host: Host, concern: str) -> list[str]:
    """Remove the concern's record; the last one takes the store and the directories it created with it."""
    lines = [f"forget the record of {concern} ({STORE}/{concern})"]
    if host.check_mode:
        return lines
    shutil.rmtree(concern_dir(host, concern), ignore_errors=True)
    if concerns(host):
        return lines
    base = host.path(STORE)
    try:
        with open(os.path.join(base, "created.json"), encoding="utf-8") as handle:
            created = json.load(handle)
    except (OSError, ValueError):
        created = [STORE]
    shutil.rmtree(base, ignore_errors=True)
    for part in sorted(created, key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(host.path(part))
    return lines


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, path)


def ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the root itself is never created)."""
    parts = [p for p in path.strip("/").split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


# ----------------------------------------------------------------------------------------- what a restore does
@dataclass
class Outcome:
    """What a restore changed (or would change, in check mode), noted and failed; each part's restore makes its
    changes through `do` and `cmd`."""

    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    diff: list[dict] = field(default_factory=list)
    kept_dirs: set[str] = field(default_factory=set)
    # A directory this concern created and must keep for another concern's files, with the concerns that recorded
    # them: their records take it over (restore), so the last of their resets removes it.
    handed: dict[str, set[str]] = field(default_factory=dict)
    others: dict[str, dict] | None = None
    own: set[str] = field(default_factory=set)  # the concern's own paths (still there in check mode)
    # Files changed since the project wrote them, {path, copy} (edits.py), and what the module warns of.
    kept: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def do(self, host: Host, line: str, action: Callable[[], None] | None = None) -> bool:
        """Say the change, and make it unless in check mode; a failure is an error, not an exception."""
        self.changes.append(line)
        if host.check_mode or action is None:
            return True
        try:
            action()
        except (OSError, ResetError) as exc:
            self.errors.append(f"{line}: {exc}")
            return False
        return True

    def cmd(self, host: Host, argv: list[str], fatal: bool = True) -> bool:
        line = shlex.join(argv)
        self.changes.append(line)
        if host.check_mode:
            return True
        rc, out, err = host.sh(argv)
        if rc != 0:
            (self.errors if fatal else self.notes).append(f"`{line}` failed (rc {rc}): {(err or out).strip()}")
        return rc == 0
