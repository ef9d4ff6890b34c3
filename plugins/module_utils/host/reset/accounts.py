"""The reset record's system groups and users, from /etc/group and /etc/passwd: the groups a concern creates
(`groups`), and the groups and users its package installs created (`package_groups`, `package_users`, removed with
the packages: packages.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, Outcome


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


def record_groups(host: Host, manifest: dict, groups: list[str], lines: list[str]) -> None:
    if not groups:
        return
    names = group_names(host)
    for group in groups:
        if group not in manifest["groups"]:
            manifest["groups"][group] = group in names
            lines.append(f"group {group}: {'present' if group in names else 'absent'}")


def remove_created_groups(host: Host, groups: dict, out: Outcome) -> None:
    """The groups the concern created (absent before the first run) go."""
    names = group_names(host)
    for group, existed in groups.items():
        if not existed and group in names:
            out.cmd(host, ["groupdel", group])


def remove_package_users(host: Host, users: list[str], out: Outcome) -> None:
    """The system users the project's package installs created and their purge left (MariaDB's `mysql`; munge's
    and Slurm's purge scripts remove theirs): removed after the packages, before their groups."""
    present = {u for gid_users in primary_gids(host).values() for u in gid_users}
    for user in (u for u in users if u in present):
        out.cmd(host, ["userdel", user])


def remove_package_groups(host: Host, groups: list[str], out: Outcome) -> None:
    """The system groups the project's package installs created (libibverbs1's `rdma`): purge leaves them. One that is
    still some user's primary group stays, with a note."""
    names = group_ids(host)
    primary = primary_gids(host)
    for group in (g for g in groups if g in names):
        if names[group] in primary:
            out.notes.append(f"group {group} kept: it is the primary group of {', '.join(primary[names[group]])}")
        else:
            out.cmd(host, ["groupdel", group])
