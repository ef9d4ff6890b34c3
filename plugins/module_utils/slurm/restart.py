"""How a host takes a new slurm.conf: which daemon must restart (slurm.conf(5)) and what `scontrol reconfigure`
covers, and the order the daemons start in (MUNGE, slurmdbd, slurmctld, slurmd).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# slurm.conf(5), Slurm 22.05 (Debian 12's slurm-client man page): "A restart of slurmctld is required for changes to
# this parameter to take effect" (and the same note naming both daemons or slurmd). Keys in lower case.
SLURMCTLD_RESTART = frozenset(
    k.lower()
    for k in (
        "AccountingStorageEnforce",
        "AuthType",
        "CredType",
        "GresTypes",
        "JobContainerType",
        "MaxJobCount",
        "MaxNodeCount",
        "PluginDir",
        "PowerPlugin",
        "ProctrackType",
        "SchedulerType",
        "SelectType",
        "SelectTypeParameters",
        "SlurmctldHost",
        "SlurmctldParameters",
        "SlurmctldPort",
        "SlurmdPort",
        "StateSaveLocation",
        "SwitchType",
        # Not noted in slurm.conf(5): the daemon opens them, or connects to slurmdbd, at start (the role's choice,
        # README.md).
        "AccountingStorageHost",
        "AccountingStoragePort",
        "AccountingStorageType",
        "PrologFlags",
        "SlurmctldLogFile",
        "SlurmctldPidFile",
        "TopologyPlugin",
    )
)
SLURMD_RESTART = frozenset(
    k.lower()
    for k in (
        "AuthType",
        "CoreSpecPlugin",
        "GresTypes",
        "PluginDir",
        "SelectType",
        "SwitchType",
        # Not noted in slurm.conf(5): plugins and files slurmd loads or opens once, at start (README.md).
        "JobAcctGatherType",
        "PrologFlags",
        "ProctrackType",
        "SlurmdLogFile",
        "SlurmdPidFile",
        "SlurmdSpoolDir",
        "TaskPlugin",
    )
)


def parse_conf(text: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """slurm.conf as (key -> value, node -> line, partition -> line); keys in lower case, comments dropped."""
    keys, nodes, parts = {}, {}, {}
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key.lower() == "nodename":
            nodes[value.split()[0]] = line
        elif key.lower() == "partitionname":
            parts[value.split()[0]] = line
        else:
            keys[key.strip().lower()] = value.strip()
    return keys, nodes, parts


def conf_changes(before: str | None, after: str, own: str | None = None) -> dict:
    """What a slurm.conf change needs: {"slurmctld": [why], "slurmd": [why], "reconfigure": [why]}.

    slurm.conf(5): node definitions added, removed or changed ("NODE CONFIGURATION") need both daemons restarted,
    and so do the keys in SLURMCTLD_RESTART / SLURMD_RESTART for their daemon; everything else (partitions, other
    keys) `scontrol reconfigure` applies while jobs run. `own`: in configless mode, the NodeName of the slurmd that
    takes the change (or '' for none): a slurmd restarts for its own node line only, the others' lines reach it with
    `scontrol reconfigure` after slurmctld's restart (tried on Slurm 22.05.8, docs/slurm.md)."""
    out: dict[str, list[str]] = {"slurmctld": [], "slurmd": [], "reconfigure": []}
    old_keys, old_nodes, old_parts = parse_conf(before or "")
    new_keys, new_nodes, new_parts = parse_conf(after)
    for key in sorted(set(old_keys) | set(new_keys)):
        if old_keys.get(key) == new_keys.get(key):
            continue
        if key in SLURMCTLD_RESTART:
            out["slurmctld"].append(key)
        if key in SLURMD_RESTART:
            out["slurmd"].append(key)
        if key not in SLURMCTLD_RESTART | SLURMD_RESTART:
            out["reconfigure"].append(key)
    changed_nodes = sorted(n for n in set(old_nodes) | set(new_nodes) if old_nodes.get(n) != new_nodes.get(n))
    if changed_nodes:
        why = f"NodeName {','.join(changed_nodes)}"
        out["slurmctld"].append(why)
        if own is None or own in changed_nodes:
            out["slurmd"].append(why if own is None else f"NodeName {own}")
        else:
            out["reconfigure"].append(why)
    changed_parts = sorted(p for p in set(old_parts) | set(new_parts) if old_parts.get(p) != new_parts.get(p))
    if changed_parts:
        out["reconfigure"].append(f"PartitionName {','.join(changed_parts)}")
    return out


def _diff(result: Mapping[str, Any]) -> Mapping[str, Any]:
    diff = result.get("diff") or {}
    return diff[0] if isinstance(diff, list) and diff else diff if isinstance(diff, Mapping) else {}


def _file_changes(results: list, own: str | None) -> tuple[dict[str, list[str]], list[str]]:
    """The role's file tasks' loop results -> (what slurm.conf's change needs, the other files that changed)."""
    changes: dict[str, list[str]] = {"slurmctld": [], "slurmd": [], "reconfigure": []}
    other = []
    for r in results or []:
        if not r.get("changed"):
            continue
        item = r.get("item") or {}
        name = item.get("key") if isinstance(item, Mapping) else str(item)
        if name == "slurm.conf":
            diff = _diff(r)
            for k, v in conf_changes(diff.get("before"), diff.get("after") or "", own).items():
                changes[k] += v
        else:
            other.append(name)
    return changes, other


def apply_plan(
    results: list,
    units: Mapping[str, str],
    controller: bool,
    node: bool,
    key_changed: bool = False,
    dbd: str = "",
    configless: Mapping[str, Any] | str | None = None,
) -> dict:
    """How this host applies its new files: each daemon's systemd state (`started`, `restarted` or `stopped`), in
    the order they start (MUNGE, slurmdbd, slurmctld, slurmd), whether `scontrol reconfigure` must follow, and why.

    results: the role's file tasks' loop results (item.key the file name, changed, diff with before for
    slurm.conf); units: each daemon's state before the run (a daemon that was not running is started and reads
    the new files anyway); dbd: on the controller, `changed` or `same` for a slurmdbd.conf it has, `` for none
    (accounting off: a running slurmdbd stops). configless (None or '': off): `nodename` (this host's, '' for none),
    `served` (on a node that fetches its files: the controller's file results, which are its files) and `dropin`
    (its slurmd drop-in changed)."""
    if not isinstance(configless, Mapping):
        configless = None  # off ('' from the role)
    own = None if configless is None else str(configless.get("nodename") or "")
    served = None if configless is None else configless.get("served")
    changes, other = _file_changes(results, own)
    if served is not None:
        # No files of its own: slurmd restarts for what the controller serves, the rest reaches it when slurmctld
        # asks it to fetch them again (scontrol reconfigure, the controller's).
        changes = {**_file_changes(served, own)[0], "slurmctld": [], "reconfigure": []}
        other = []
    dropin = bool(configless and configless.get("dropin"))
    daemons = {"slurmctld": controller, "slurmd": node}
    state, restarted, why = {}, [], []
    state["munge"] = "restarted" if key_changed and units.get("munge") == "active" else "started"
    dbd_running = units.get("slurmdbd") == "active"
    if controller and dbd:
        state["slurmdbd"] = "restarted" if dbd_running and dbd == "changed" else "started"
        if state["slurmdbd"] == "restarted":
            why.append("slurmdbd restarted for slurmdbd.conf (it reads it only at start)")
    elif controller and dbd_running:
        state["slurmdbd"] = "stopped"
        why.append("slurmdbd stopped: accounting is off")
    for daemon, here in daemons.items():
        if not here:
            continue
        running = units.get(daemon) == "active"
        reasons = [f"{', '.join(changes[daemon])} (slurm.conf(5))"] if changes[daemon] else []
        if daemon == "slurmd" and dropin:
            # systemd passes the new options only to a new process.
            reasons.append("its drop-in (--conf-server)")
        if running and reasons:
            state[daemon] = "restarted"
            restarted.append(daemon)
            why.append(f"{daemon} restarted for {'; '.join(reasons)}")
        else:
            state[daemon] = "started"
    running = [d for d, here in daemons.items() if here and units.get(d) == "active"]
    changed = bool(changes["reconfigure"] or other or changes["slurmctld"])
    if served is None:
        changed = changed or bool(changes["slurmd"])
    # A configless controller's new files reach the other nodes' running slurmd only through a reconfigure, even
    # when its own daemons restart.
    serving = configless is not None and controller and changed
    reconfigure = serving or (changed and any(d not in restarted for d in running))
    if reconfigure:
        why.append(f"scontrol reconfigure for {', '.join(changes['reconfigure'] + other) or 'the new files'}")
    return {"state": state, "reconfigure": reconfigure, "why": why}
