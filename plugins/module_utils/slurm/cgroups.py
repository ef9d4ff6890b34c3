"""The cluster's cgroup mode -> slurm.conf's ProctrackType / TaskPlugin / JobAcctGatherType and each node's
cgroup.conf (cgroup.conf(5), Slurm 22.05), from each node's probe (probe.py `cgroup_state`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CGROUP_PLUGINS = {
    "ProctrackType": "proctrack/cgroup",
    "TaskPlugin": "task/cgroup,task/affinity",
    "JobAcctGatherType": "jobacct_gather/cgroup",
}
# Without cgroups: processes tracked through /proc, tasks bound to CPUs by affinity, no usage gathering.
NO_CGROUP_PLUGINS = {
    "ProctrackType": "proctrack/linuxproc",
    "TaskPlugin": "task/affinity",
    "JobAcctGatherType": "jobacct_gather/none",
}


def cgroup_conf(state: Mapping[str, Any], in_container: bool) -> list[str]:
    """One node's cgroup.conf for its cgroup mode (cgroup.conf(5), Slurm 22.05)."""
    if state["mode"] == "v2":
        # In a container slurmd cannot have systemd delegate it a scope (`cgroup_dbus_attach_to_scope: cannot
        # connect to dbus system daemon`): it builds its hierarchy itself (IgnoreSystemd, "for development and
        # testing") and enables the controllers there (CgroupAutomount).
        head = ["CgroupPlugin=cgroup/v2"] + (["IgnoreSystemd=yes", "CgroupAutomount=yes"] if in_container else [])
    else:
        head = ["CgroupPlugin=cgroup/v1"]
    return [*head, "ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes"]


def cgroup_plan(nodes: Mapping[str, Mapping[str, Any]]) -> dict:
    """slurm.conf's process tracking for the whole cluster (one slurm.conf) and each node's cgroup.conf.

    `nodes`: node -> host facts. Slurm's cgroup plugins where every node can create cgroups; otherwise the
    no-cgroup plugins everywhere, with a note naming the nodes and why."""
    blocked = {h: f["cgroup"]["why"] for h, f in nodes.items() if not f["cgroup"]["usable"]}
    if blocked:
        note = (
            "no cgroups: proctrack/linuxproc, task/affinity, jobacct_gather/none (jobs are not confined to their "
            "cores and memory, and no usage is gathered) because Slurm cannot create cgroups on "
            + "; ".join(f"{h} ({why})" for h, why in sorted(blocked.items()))
        )
        return {"plugins": dict(NO_CGROUP_PLUGINS), "cgroup_conf": {h: [] for h in nodes}, "note": note}
    modes = ", ".join(
        f"{h} {f['cgroup']['mode']}" + (f" in {f['container']}" if f.get("container") else "")
        for h, f in sorted(nodes.items())
    )
    return {
        "plugins": dict(CGROUP_PLUGINS),
        "cgroup_conf": {h: cgroup_conf(f["cgroup"], bool(f.get("container"))) for h, f in nodes.items()},
        "note": f"cgroups: proctrack/cgroup, task/cgroup,task/affinity, jobacct_gather/cgroup ({modes})",
    }
