"""The reset record's systemd units (`services`): their load, enablement and activity before the first run.

A unit the project added, started or enabled goes down before its file goes (files.py); one it stopped or disabled
is enabled and started again once the files are back.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, Outcome, ResetError

# Where a unit file's change needs `systemctl daemon-reload` before the unit's state is put back.
UNIT_DIRS = ("/etc/systemd/", "/lib/systemd/", "/usr/lib/systemd/", "/run/systemd/system/")


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


def record_units(host: Host, manifest: dict, units: list[str], lines: list[str]) -> None:
    for unit in units:
        if unit not in manifest["services"]:
            manifest["services"][unit] = unit_state(host, unit)
            lines.append(f"unit {unit}: {manifest['services'][unit]}")


def take_down(host: Host, services: dict, now_units: dict, out: Outcome) -> None:
    """Units the project added, started or enabled go down before their files go. `now_units`: each unit's state
    at the start of the restore (none: the units are not restored)."""
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


def reload_after(host: Host, changed_paths: list[str], out: Outcome) -> None:
    """`systemctl daemon-reload` once the restored files include a unit's."""
    if any(path.startswith(UNIT_DIRS) for path in changed_paths):
        out.cmd(host, ["systemctl", "daemon-reload"])


def bring_back(host: Host, services: dict, now_units: dict, out: Outcome) -> None:
    """Units that were enabled or running before come back."""
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
