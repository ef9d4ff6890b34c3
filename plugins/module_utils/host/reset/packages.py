"""The reset record's packages: what apt installed for a concern (names, dependencies included), and the groups and
users those installs created. Reset removes them on request only, and never takes a package the project did not
install along with them; with them go what they left in their data directories (data_dirs.py)."""

from __future__ import annotations

import os
import re
import shutil

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.accounts import (
    remove_package_groups,
    remove_package_users,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.data_dirs import DATA_DIRS, data_dirs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import (
    CONCERN_RE,
    STORE,
    Host,
    Outcome,
    load,
)

APT_SIMULATED = re.compile(r"^(?:Purg|Remv) (\S+)", re.M)


def record_packages(manifest: dict, packages: list[str], groups: list[str], users: list[str], lines: list[str]) -> None:
    new_packages = [p for p in dict.fromkeys(packages) if p not in manifest["packages"]]
    if new_packages:
        manifest["packages"] += new_packages
        lines.append(f"packages installed by the project: {' '.join(new_packages)}")
    known_groups = manifest.setdefault("package_groups", [])
    new_groups = [g for g in dict.fromkeys(groups) if g not in known_groups]
    if new_groups:
        known_groups += new_groups
        lines.append(f"groups those packages created: {' '.join(new_groups)}")
    known_users = manifest.setdefault("package_users", [])
    new_users = [u for u in dict.fromkeys(users) if u not in known_users]
    if new_users:
        known_users += new_users
        lines.append(f"users those packages created: {' '.join(new_users)}")


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


def restore_packages(host: Host, concern: str, manifest: dict, remove: bool, out: Outcome) -> None:
    """Packages the project installed: purged, then the users and groups their installs created, when `remove`;
    else kept, with a note naming those still installed."""
    packages = manifest.get("packages", [])
    if not packages:
        return
    if remove:
        purged = _remove_packages(host, concern, packages, out)
        if purged is not None:
            _remove_data_dirs(host, purged, out)
            remove_package_users(host, manifest.get("package_users", []), out)
            remove_package_groups(host, manifest.get("package_groups", []), out)
    else:
        kept = installed_packages(host, packages)
        if kept:
            out.notes.append(
                f"packages the project installed are kept ({' '.join(kept)}); -e reset_packages=true removes them"
            )


def _remove_data_dirs(host: Host, purged: list[str], out: Outcome) -> None:
    """What the purged packages left in their data directories (data_dirs.py), unless a package still installed
    uses them (in check mode the purge did not run: those it would purge count as gone)."""
    table = sorted(DATA_DIRS)
    installed = [p for p in installed_packages(host, table) if not (host.check_mode and p in purged)]
    for path in data_dirs(purged, installed):
        real = host.path(path)
        if os.path.lexists(real):
            owners = ", ".join(p for p in purged if path in DATA_DIRS.get(p, ()))
            out.do(host, f"remove {path} (what {owners} left: purged)", lambda real=real: _remove(real))


def _remove(real: str) -> None:
    if os.path.isdir(real) and not os.path.islink(real):
        shutil.rmtree(real)
    else:
        os.unlink(real)


def _remove_packages(host: Host, concern: str, names: list[str], out: Outcome) -> list[str] | None:
    """Purge the packages still installed; returns those purged (in check mode, those it would purge), None where
    they stay (an error says why)."""
    todo = installed_packages(host, names)
    if not todo:
        return []
    rc, sim, err = host.sh(["apt-get", "--simulate", "--yes", "purge", *todo])
    if rc != 0:
        out.errors.append(f"apt-get --simulate purge {' '.join(todo)} failed (rc {rc}): {(err or sim).strip()}")
        return None
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
        return None
    purge = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "--yes", "--quiet", "purge", *todo]
    return todo if out.cmd(host, purge) else None
