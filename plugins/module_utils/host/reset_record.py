"""What the project's first run replaces on a host, kept so that playbooks/reset.yml can put it back.

Plain Python (stdlib only), run on the node by the module rdma_llm.cluster.reset_record (and by the rdma_qos
module for the NIC values it changes), tested by tests/unit/plugins/module_utils/host/test_reset_record.py on temporary
trees with a recording runner.

One record per concern (a role: `common`, `rdma_netplan`, ...), in `/var/lib/rdma-llm/reset/<concern>/`:
`manifest.json` says what the concern found before it first changed it, `files/<n>` keeps the copies. Every entry
is recorded the first time only (a path, a unit, a link, an undo key ...): later runs never overwrite what the
host was before the project came. What a record holds:

- `paths`: files and directories the concern writes. A file that existed is copied (content, mode, owner); one that
  did not is removed on reset, with the directories the write had to create (removed only when empty). A
  directory one concern created that still holds files other concerns recorded (a half site.yml made
  /etc/ansible/facts.d for the host QoS fact; the whole run then put rdma.fact there) passes to their records:
  the last of their resets removes it.
- `trees`: directories the concern fills entirely (the venv, the wheelhouse): removed with their content when the
  project created them; left alone (and said so) when they were there before.
- `services`: systemd units' load, enablement and activity (a unit the project added is stopped and disabled
  before its file goes; one it stopped or disabled is enabled and started again).
- `nft`: nftables tables (`inet rdma_qos`): absent before -> deleted; present -> put back as they were listed.
- `groups`: system groups the concern creates (removed when it created them).
- `links`: a network interface's addresses, routes and MTU (reset removes what the project added, puts back what
  it removed, sets the MTU back), read with `ip -j`.
- `modules`: which kernel modules were loaded (reset unloads those the project loaded, where it can).
- `undo`: operations that put back one value each (`dcb ...`, a sysfs write, an rmdir), keyed, first key wins.
- `packages`: what apt installed for the concern (names, dependencies included): removed only on request.
- `values`: anything else a concern's reset needs (`hostname`), first value wins.

The store keeps a list of the directories it had to create for itself (`created.json`), so that forgetting the last
record leaves no trace of the store either.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "rdma-llm-cluster/reset/1"
STORE = "/var/lib/rdma-llm/reset"
CONCERN_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Where a unit file's change needs `systemctl daemon-reload` before the unit's state is put back.
UNIT_DIRS = ("/etc/systemd/", "/lib/systemd/", "/usr/lib/systemd/", "/run/systemd/system/")
# The restore steps, in the order they run (`parts` selects some of them).
PARTS = ("services", "nft", "undo", "modules", "files", "groups", "packages", "links")

Runner = Callable[[list[str]], tuple[int, str, str]]


class ResetError(Exception):
    """A record that cannot be read or written, or a request the store refuses."""


@dataclass
class Host:
    """Where the record is kept and how commands run: `root` prefixes every path (tests use a temporary tree),
    `run` runs a command (the module's run_command)."""

    root: str = "/"
    run: Runner | None = None
    check_mode: bool = False

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


def _ensure_store(host: Host) -> None:
    """Create the store's directory, remembering which of its ancestors did not exist (forget removes them)."""
    base = host.path(STORE)
    if os.path.isdir(base):
        return
    created = []
    for part in [*_ancestors(STORE), STORE]:
        if not os.path.isdir(host.path(part)):
            os.mkdir(host.path(part), 0o700 if part == STORE else 0o755)
            created.append(part)
    _write_json(os.path.join(base, "created.json"), created)


def save(host: Host, manifest: dict) -> None:
    _ensure_store(host)
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


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the root itself is never created)."""
    parts = [p for p in path.strip("/").split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


# ----------------------------------------------------------------------------------------- reading the host
def _stat(host: Host, path: str) -> os.stat_result | None:
    try:
        return os.lstat(host.path(path))
    except FileNotFoundError:
        return None


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def unit_state(host: Host, unit: str) -> dict[str, str]:
    """{load, enabled, active} from `systemctl show` (`not-found` when systemd does not know the unit)."""
    rc, out, err = host.sh(
        ["systemctl", "show", unit, "--property=LoadState", "--property=UnitFileState", "--property=ActiveState"]
    )
    if rc != 0:
        raise ResetError(f"systemctl show {unit} failed (rc {rc}): {(err or out).strip()}")
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {
        "load": values.get("LoadState", "") or "not-found",
        "enabled": values.get("UnitFileState", ""),
        "active": values.get("ActiveState", "") or "inactive",
    }


def nft_table(host: Host, table: str) -> str | None:
    """The table as `nft list table` prints it, None when it (or nft itself) is not there."""
    family, _, name = table.partition(" ")
    rc, out, _ = host.sh(["nft", "list", "table", family, name])
    return out if rc == 0 else None


def group_names(host: Host) -> set[str]:
    try:
        with open(host.path("/etc/group"), encoding="utf-8") as handle:
            return {line.split(":", 1)[0] for line in handle if ":" in line}
    except OSError:
        return set()


def group_ids(host: Host) -> dict[str, str]:
    """{group: gid} from /etc/group."""
    try:
        with open(host.path("/etc/group"), encoding="utf-8") as handle:
            return {f[0]: f[2] for f in (line.split(":") for line in handle) if len(f) > 2}
    except OSError:
        return {}


def primary_gids(host: Host) -> dict[str, list[str]]:
    """{gid: users whose primary group it is} from /etc/passwd."""
    out: dict[str, list[str]] = {}
    try:
        with open(host.path("/etc/passwd"), encoding="utf-8") as handle:
            for f in (line.split(":") for line in handle):
                if len(f) > 3:
                    out.setdefault(f[3], []).append(f[0])
    except OSError:
        pass
    return out


def loaded_modules(host: Host) -> set[str] | None:
    """Names in /proc/modules; None on a kernel without loadable modules."""
    try:
        with open(host.path("/proc/modules"), encoding="utf-8") as handle:
            return {line.split()[0] for line in handle if line.strip()}
    except OSError:
        return None


def parse_links(addr_json: str, route_jsons: Iterable[str]) -> dict | None:
    """One link from `ip -j addr show dev X` and `ip -j [-6] route show dev X`: MTU, addresses
    ([family, address, prefix length]) and the routes that are not the kernel's own (those follow the addresses)."""
    try:
        entries = json.loads(addr_json or "[]")
    except ValueError:
        return None
    if not entries:
        return None
    link = entries[0]
    addresses = sorted(
        [a.get("family", ""), a.get("local", ""), int(a.get("prefixlen", 0))]
        for a in link.get("addr_info", [])
        if a.get("local")
    )
    routes = []
    for text in route_jsons:
        try:
            rows = json.loads(text or "[]")
        except ValueError:
            rows = []
        for row in rows:
            if row.get("protocol") == "kernel" or row.get("type") in ("multicast", "local", "broadcast"):
                continue
            routes.append([str(row.get("dst", "")), str(row.get("gateway", "")), int(row.get("metric", 0) or 0)])
    return {"mtu": int(link.get("mtu", 0)), "addresses": addresses, "routes": sorted(routes)}


def read_link(host: Host, ifname: str) -> dict | None:
    rc, addr, _ = host.sh(["ip", "-j", "addr", "show", "dev", ifname])
    if rc != 0:
        return None
    routes = [host.sh(["ip", *family, "-j", "route", "show", "dev", ifname])[1] for family in ([], ["-6"])]
    return parse_links(addr, routes)


def plan_link(ifname: str, before: dict, now: dict) -> list[list[str]]:
    """The `ip` commands that take a link from `now` back to `before`: routes and addresses the project added go
    (routes first), the MTU is set back, what it removed comes back (addresses before routes)."""
    cmds: list[list[str]] = []
    b_addr = {tuple(a) for a in before["addresses"]}
    n_addr = {tuple(a) for a in now["addresses"]}
    b_route = {tuple(r) for r in before["routes"]}
    n_route = {tuple(r) for r in now["routes"]}

    def route(verb: str, r: tuple) -> list[str]:
        dst, gateway, metric = r
        six = ["-6"] if ":" in dst + gateway else []
        return ["ip", *six, "route", verb, dst, *(["via", gateway] if gateway else []), "dev", ifname] + (
            ["metric", str(metric)] if metric else []
        )

    cmds += [route("del", r) for r in sorted(n_route - b_route)]
    cmds += [["ip", "addr", "del", f"{a[1]}/{a[2]}", "dev", ifname] for a in sorted(n_addr - b_addr)]
    if before["mtu"] and now["mtu"] != before["mtu"]:
        cmds.append(["ip", "link", "set", "dev", ifname, "mtu", str(before["mtu"])])
    cmds += [["ip", "addr", "add", f"{a[1]}/{a[2]}", "dev", ifname] for a in sorted(b_addr - n_addr)]
    cmds += [route("add", r) for r in sorted(b_route - n_route)]
    return cmds


# ----------------------------------------------------------------------------------------- recording
@dataclass
class Spec:
    """What a concern asks to record (the module's options)."""

    paths: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    nft_tables: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    undo: list[dict] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    package_groups: list[str] = field(default_factory=list)
    package_users: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)


def _check_path(path: str, what: str) -> str:
    norm = os.path.normpath(path or "/")
    if not norm.startswith("/") or norm == "/" or norm != path.rstrip("/") or norm in _ancestors(STORE):
        raise ResetError(f"{what} {path!r} must be an absolute, normalised path, not / nor a directory of the store's")
    if norm == STORE or norm.startswith(STORE + "/"):
        raise ResetError(f"{what} {path!r} is inside the reset store")
    return norm


def _record_path(host: Host, manifest: dict, path: str, kind: str, lines: list[str]) -> None:
    known = {e["path"] for e in manifest["paths"]}
    if path in known:
        return
    st = _stat(host, path)
    if st is None:
        # The store's own directories are the store's (created.json): forgetting the last record removes them.
        for parent in _ancestors(path):
            if parent not in known and parent not in _ancestors(STORE) and _stat(host, parent) is None:
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
        entry.update(kind="file", backup=backup, sha256=_sha256(host.path(path)))
        if not host.check_mode:
            _ensure_store(host)
            os.makedirs(os.path.join(concern_dir(host, manifest["concern"]), "files"), mode=0o700, exist_ok=True)
            shutil.copyfile(host.path(path), os.path.join(concern_dir(host, manifest["concern"]), backup))
    else:
        raise ResetError(f"{path} is neither a file, a directory nor a link: not recorded")
    manifest["paths"].append(entry)
    lines.append(f"{path}: {entry['kind']} (kept)")


def record(host: Host, concern: str, spec: Spec) -> dict:
    """Record, the first time only, each item of `spec`; returns {changed, lines} (nothing is written in check
    mode, where `changed` says whether a real run would record something)."""
    manifest = load(host, concern) or empty(concern)
    lines: list[str] = []
    for path in spec.paths:
        _record_path(host, manifest, _check_path(path, "path"), "file", lines)
    for path in spec.trees:
        _record_path(host, manifest, _check_path(path, "tree"), "tree", lines)
    for unit in spec.services:
        if unit not in manifest["services"]:
            manifest["services"][unit] = unit_state(host, unit)
            lines.append(f"unit {unit}: {manifest['services'][unit]}")
    for table in spec.nft_tables:
        if table not in manifest["nft"]:
            manifest["nft"][table] = nft_table(host, table)
            lines.append(f"nft table {table}: {'absent' if manifest['nft'][table] is None else 'kept'}")
    if spec.groups:
        names = group_names(host)
        for group in spec.groups:
            if group not in manifest["groups"]:
                manifest["groups"][group] = group in names
                lines.append(f"group {group}: {'present' if group in names else 'absent'}")
    for ifname in spec.links:
        if ifname not in manifest["links"]:
            manifest["links"][ifname] = read_link(host, ifname)
            lines.append(f"link {ifname}: {manifest['links'][ifname]}")
    if spec.modules:
        loaded = loaded_modules(host)
        mods = manifest["modules"]
        for name in spec.modules:
            if name not in mods:
                mods[name] = None if loaded is None else name in loaded
                lines.append(f"module {name}: {'no loadable modules' if loaded is None else name in loaded}")
    keys = {op.get("key") for op in manifest["undo"]}
    for op in spec.undo:
        if not isinstance(op, dict) or not op.get("key") or not ({"argv", "write", "rmdir"} & set(op)):
            raise ResetError(f"an undo operation needs a key and one of argv, write or rmdir: {op!r}")
        if op["key"] not in keys:
            manifest["undo"].append(dict(op))
            keys.add(op["key"])
            lines.append(f"undo {op['key']}")
    new_packages = [p for p in dict.fromkeys(spec.packages) if p not in manifest["packages"]]
    if new_packages:
        manifest["packages"] += new_packages
        lines.append(f"packages installed by the project: {' '.join(new_packages)}")
    known_groups = manifest.setdefault("package_groups", [])
    new_groups = [g for g in dict.fromkeys(spec.package_groups) if g not in known_groups]
    if new_groups:
        known_groups += new_groups
        lines.append(f"groups those packages created: {' '.join(new_groups)}")
    known_users = manifest.setdefault("package_users", [])
    new_users = [u for u in dict.fromkeys(spec.package_users) if u not in known_users]
    if new_users:
        known_users += new_users
        lines.append(f"users those packages created: {' '.join(new_users)}")
    for key, value in (spec.values or {}).items():
        if key not in manifest["values"]:
            manifest["values"][key] = value
            lines.append(f"value {key}: {value!r}")
    if lines and not host.check_mode:
        save(host, manifest)
    return {"changed": bool(lines), "lines": lines}


# ----------------------------------------------------------------------------------------- restoring
@dataclass
class Outcome:
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


def _hand_over(host: Host, out: Outcome) -> None:
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
        return out.do(host, f"remove {path} (created by the project)", lambda: os.unlink(real))
    kind = entry["kind"]
    if kind == "file":
        source = os.path.join(concern_dir(host, concern), entry["backup"])
        same = (
            st is not None
            and stat.S_ISREG(st.st_mode)
            and _sha256(real) == entry["sha256"]
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


def _run_undo(host: Host, op: dict, out: Outcome) -> None:
    if "argv" in op:
        out.cmd(host, [str(a) for a in op["argv"]])
    elif "write" in op:
        target = host.path(op["write"])
        value = str(op.get("value", ""))

        def write() -> None:
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(f"{value}\n")

        out.do(host, f"echo {value} > {op['write']}", write)
    else:
        target = host.path(op["rmdir"])
        if os.path.isdir(target):
            out.do(host, f"rmdir {op['rmdir']}", lambda: os.rmdir(target))


APT_SIMULATED = re.compile(r"^(?:Purg|Remv) (\S+)", re.M)


def installed_packages(host: Host, names: list[str]) -> list[str]:
    rc, out, _ = host.sh(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\\n", *names])
    if rc not in (0, 1):
        return []
    have = {f[0].split(":", 1)[0] for f in (line.split() for line in out.splitlines()) if f[1:] == ["installed"]}
    return [n for n in names if n in have]


def packages_of_other_concerns(host: Host, concern: str) -> dict[str, str]:
    """{package: concern} for the packages the other concerns' records say the project installed."""
    store = host.path(STORE)
    owners: dict[str, str] = {}
    for other in sorted(os.listdir(store)) if os.path.isdir(store) else []:
        manifest = load(host, other) if other != concern and CONCERN_RE.match(other) else None
        for package in (manifest or {}).get("packages", []):
            owners.setdefault(package, other)
    return owners


def _remove_packages(host: Host, concern: str, names: list[str], out: Outcome) -> bool:
    """Purge the packages still installed; False where they stay (an error says why)."""
    todo = installed_packages(host, names)
    if not todo:
        return True
    rc, sim, err = host.sh(["apt-get", "--simulate", "--yes", "purge", *todo])
    if rc != 0:
        out.errors.append(f"apt-get --simulate purge {' '.join(todo)} failed (rc {rc}): {(err or sim).strip()}")
        return False
    extra = sorted(set(APT_SIMULATED.findall(sim)) - set(todo))
    owners = packages_of_other_concerns(host, concern) if extra else {}
    if extra and host.check_mode and all(p in owners for p in extra):
        # A dry run removes nothing, so a concern reset earlier in playbooks/reset.yml still has its packages here;
        # the real run removes them before this one.
        out.notes.append(
            f"dry run: removing {' '.join(todo)} would also remove {' '.join(extra)}, which "
            f"{', '.join(sorted({owners[p] for p in extra}))} installed; a full reset removes those first"
        )
    elif extra:
        installed_by = sorted({owners[p] for p in extra if p in owners})
        out.errors.append(
            f"the packages the project installed ({' '.join(todo)}) were kept: removing them would also remove "
            f"{' '.join(extra)}, which the project did not install"
            + (f" with them ({', '.join(installed_by)} did: reset it too, or first)" if installed_by else "")
        )
        return False
    return out.cmd(host, ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "--yes", "--quiet", "purge", *todo])


def _remove_package_users(host: Host, users: list[str], out: Outcome) -> None:
    """The system users the project's package installs created and their purge left (MariaDB's `mysql`; munge's
    and Slurm's purge scripts remove theirs): removed after the packages, before their groups."""
    present = {u for gid_users in primary_gids(host).values() for u in gid_users}
    for user in (u for u in users if u in present):
        out.cmd(host, ["userdel", user])


def _remove_package_groups(host: Host, groups: list[str], out: Outcome) -> None:
    """The system groups the project's package installs created (libibverbs1's `rdma`): purge leaves them. One that is
    still some user's primary group stays, with a note."""
    names = group_ids(host)
    primary = primary_gids(host)
    for group in (g for g in groups if g in names):
        if names[group] in primary:
            out.notes.append(f"group {group} kept: it is the primary group of {', '.join(primary[names[group]])}")
        else:
            out.cmd(host, ["groupdel", group])


def restore(
    host: Host,
    concern: str,
    parts: Iterable[str] | None = None,
    remove_packages: bool = False,
    keep: bool = False,
) -> dict:
    """Put back what the concern's record holds, in PARTS order (only `parts` when given), then forget the record
    unless `keep` (or something failed: the record stays for the next try). Check mode plans and says it all."""
    manifest = load(host, concern)
    if manifest is None:
        return {"changed": False, "recorded": False, "changes": [], "notes": [], "errors": [], "diff": [], "values": {}}
    wanted = set(parts or PARTS)
    unknown = wanted - set(PARTS)
    if unknown:
        raise ResetError(f"unknown restore parts {sorted(unknown)} (known: {', '.join(PARTS)})")
    out = Outcome(own={e["path"] for e in manifest.get("paths", [])})
    services = manifest.get("services", {})
    now_units = {unit: unit_state(host, unit) for unit in services} if "services" in wanted else {}
    # 1. Units the project added, started or enabled go down before their files go.
    for unit, before in services.items():
        now = now_units.get(unit)
        if now is None or now["load"] == "not-found":
            continue
        added = before["load"] == "not-found"
        if now["active"] in ("active", "activating", "reloading") and (added or before["active"] != "active"):
            out.cmd(host, ["systemctl", "stop", unit])
        if now["enabled"] in ("enabled", "enabled-runtime") and (added or before["enabled"] == "disabled"):
            runtime = ["--runtime"] if now["enabled"] == "enabled-runtime" else []  # linked under /run only
            out.cmd(host, ["systemctl", "disable", *runtime, unit])
    # 2. nftables tables.
    for table, before in manifest.get("nft", {}).items() if "nft" in wanted else ():
        now = nft_table(host, table)
        if now == before:
            continue
        if now is not None:
            out.cmd(host, ["nft", "delete", "table", *table.split(" ", 1)])
        if before is not None:
            _restore_nft(host, table, before, out)
    # 3. Values the project changed, last change first.
    for op in reversed(manifest.get("undo", [])) if "undo" in wanted else ():
        _run_undo(host, op, out)
    # 4. Kernel modules it loaded.
    loaded = loaded_modules(host) if "modules" in wanted else None
    for name, before in reversed(list(manifest.get("modules", {}).items())):
        if loaded is not None and before is False and name in loaded:
            out.cmd(host, ["modprobe", "-r", name], fatal=False)
    # 5. Files and directories, last recorded first (files before the directories that hold them).
    unit_files = False
    for entry in reversed(manifest.get("paths", [])) if "files" in wanted else ():
        if _restore_path(host, concern, entry, out) and entry["path"].startswith(UNIT_DIRS):
            unit_files = True
    if unit_files:
        out.cmd(host, ["systemctl", "daemon-reload"])
    # 6. Units that were enabled or running before come back.
    for unit, before in services.items():
        if unit not in now_units or before["load"] == "not-found":
            continue
        now = unit_state(host, unit) if not host.check_mode else now_units[unit]
        if now["load"] == "not-found":
            out.notes.append(f"{unit} was {before['enabled']}/{before['active']} before and is gone now")
            continue
        if before["enabled"] == "enabled" and now["enabled"] == "disabled":
            out.cmd(host, ["systemctl", "enable", unit])
        if before["active"] == "active" and now["active"] != "active":
            out.cmd(host, ["systemctl", "start", unit])
    # 7. Groups it created.
    if "groups" in wanted:
        names = group_names(host)
        for group, existed in manifest.get("groups", {}).items():
            if not existed and group in names:
                out.cmd(host, ["groupdel", group])
    # 8. Packages it installed: removed on request only, never taking a package it did not install with them.
    packages = manifest.get("packages", [])
    if "packages" in wanted and packages:
        if remove_packages:
            if _remove_packages(host, concern, packages, out):
                _remove_package_users(host, manifest.get("package_users", []), out)
                _remove_package_groups(host, manifest.get("package_groups", []), out)
        else:
            kept = installed_packages(host, packages)
            if kept:
                out.notes.append(
                    f"packages the project installed are kept ({' '.join(kept)}); -e reset_packages=true removes them"
                )
    # 9. Links: addresses, routes and MTU (rdma_netplan asks for this after its netplan apply).
    for ifname, before in manifest.get("links", {}).items() if "links" in wanted else ():
        now = read_link(host, ifname)
        if before is None or now is None:
            if before != now:
                out.notes.append(f"{ifname}: {'absent before' if before is None else 'absent now'}: left as it is")
            continue
        for argv in plan_link(ifname, before, now):
            out.cmd(host, argv)
        if not host.check_mode:
            again = read_link(host, ifname)
            if again is None or {k: again[k] for k in ("mtu", "addresses", "routes")} != before:
                out.errors.append(f"{ifname} is {again}, not as before the first run: {before}")
    forgotten = False
    if not out.errors:
        _hand_over(host, out)
    if not out.errors and not keep:
        out.changes += forget(host, concern)
        forgotten = True
    return {
        "changed": bool(out.changes),
        "recorded": True,
        "changes": out.changes,
        "notes": out.notes,
        "errors": out.errors,
        "diff": out.diff,
        "values": manifest.get("values", {}),
        "packages": packages,
        "forgotten": forgotten,
    }


def _restore_nft(host: Host, table: str, text: str, out: Outcome) -> None:
    def load_table() -> None:
        fd, tmp = tempfile.mkstemp(prefix="reset-nft-", suffix=".nft")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            rc, so, se = host.sh(["nft", "-f", tmp])
            if rc != 0:
                raise ResetError(f"nft -f failed (rc {rc}): {(se or so).strip()}")
        finally:
            os.unlink(tmp)

    out.do(host, f"load the table {table} as it was before the first run", load_table)


def summary(result: dict) -> str:
    """One line for people: what restore did (or would do)."""
    if not result.get("recorded"):
        return "nothing recorded (the project never changed this, or it was reset already)"
    bits = [f"{len(result['changes'])} change(s)"]
    if result["errors"]:
        bits.append(f"{len(result['errors'])} error(s): " + "; ".join(result["errors"]))
    if result["notes"]:
        bits.append("; ".join(result["notes"]))
    return ", ".join(bits)
