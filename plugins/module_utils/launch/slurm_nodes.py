"""The Slurm nodes of a launch (the Slurm engine, slurm_script.py) and the validation ladder's `slurm` rung: each
host's Slurm node by any of its names, the nodes' states that keep a job off them, a job of the run Slurm still
holds, and Slurm's switch topology against the inventory's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import parse_fields


def node_map(show_nodes: str, aliases: Mapping[str, list[str]]) -> dict[str, dict[str, str]]:
    """Each launch host's Slurm node, from `scontrol show nodes --oneliner`: the node whose NodeName, NodeHostName or
    NodeAddr is one of the host's names (its short hostname, ansible_host, its fabric address), with its fields.
    A host Slurm does not know is absent."""
    nodes = [parse_fields(line) for line in (show_nodes or "").splitlines() if line.startswith("NodeName=")]
    out = {}
    for host, names in aliases.items():
        wanted = [str(n) for n in names if n]
        for key in ("NodeName", "NodeHostName", "NodeAddr"):
            match = next((n for w in wanted for n in nodes if n.get(key) == w), None)
            if match:
                out[host] = match
                break
    return out


# Node state words (sinfo(1) "NODE STATE CODES", as scontrol spells them) that keep a job off the node.
UNUSABLE = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "INVAL", "INVALID_REG",
            "MAINTENANCE", "MAINT", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWERED_DOWN", "POWERING_DOWN",
            "POWER_DOWN", "FUTURE", "UNKNOWN", "NO_RESPOND")  # fmt: skip


# The state words of a drain (`IDLE+DRAIN` once idle, `DRAINING` while jobs run; scontrol and sinfo spell them so).
DRAIN_WORDS = ("DRAIN", "DRAINED", "DRAINING")


def is_drained(fields: Mapping[str, str]) -> bool:
    """Whether the node is drained or draining, whatever its base state."""
    return any(w in DRAIN_WORDS for w in node_words(fields))


def node_words(fields: Mapping[str, str]) -> list[str]:
    """`State=IDLE+DRAIN+NOT_RESPONDING` as its words (a trailing `*` is sinfo's NOT_RESPONDING)."""
    raw = fields.get("State", "")
    words = [w for w in raw.rstrip("*").split("+") if w]
    return [*words, "NOT_RESPONDING"] if raw.endswith("*") and "NOT_RESPONDING" not in words else words


def node_problems(
    hosts: list[str], found: Mapping[str, Mapping[str, str]], aliases: Mapping[str, list[str]], partition: str = ""
) -> list[str]:
    """Why Slurm would not run the launch on these hosts now, each naming its host: not a Slurm node, not in the
    partition, or in a state that keeps jobs off it (DOWN, DRAIN with its reason: the node check's, for one
    `rdma-node-check` drained). A node busy with another job (ALLOCATED, MIXED) is no problem: the job queues."""
    out = []
    for host in hosts:
        fields = found.get(host)
        if not fields:
            names = ", ".join(str(n) for n in aliases.get(host, []) if n)
            out.append(f"{host}: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of {names})")
            continue
        name = fields.get("NodeName", "?")
        parts = [p for p in fields.get("Partitions", "").split(",") if p]
        if partition and partition not in parts:
            out.append(f"{host}: Slurm node {name} is not in partition {partition} (its partitions: {','.join(parts)})")
        bad = [w for w in node_words(fields) if w in UNUSABLE]
        if bad:
            reason = fields.get("Reason", "")
            out.append(
                f"{host}: Slurm node {name} is {fields.get('State')}"
                + (f": {reason}" if reason else "")
                + " (the job would wait until it returns)"
            )
    return out


def queue_problems(queue: list[Mapping[str, str]], run_id: str) -> list[str]:
    """A job of this run that Slurm still holds (squeue by name): a second launch of the run must wait for it."""
    return [
        f"Slurm job {j.get('id')} of run {run_id} is still {j.get('state')} ({j.get('reason')}): stop it first "
        f"(playbooks/train_stop.yml -e run_id={run_id})"
        for j in queue
    ]


def aliases(
    hosts: list[str],
    hostvars: Any,
    hostname_var: str = "__train_launch_reg_hostname",
    fabric_ip_var: str = "__train_launch_fabric_ip",
) -> dict[str, list[str]]:
    """Each host's names Slurm may know it by (node_map): its short hostname as the host reports it (the
    registered `hostname -s` in `hostname_var`), its inventory name and short form, ansible_host and its fabric
    address (`fabric_ip_var`). The launch's variables by default; the ladder's slurm rung names its own."""
    out = {}
    for host in hosts:
        hv = hostvars.get(host, {})
        names = [
            str((hv.get(hostname_var) or {}).get("stdout", "")).strip(),
            host,
            host.split(".")[0],
            str(hv.get("ansible_host") or ""),
            str(hv.get(fabric_ip_var) or ""),
        ]
        out[host] = list(dict.fromkeys(n for n in names if n))
    return out


# ------------------------------------------------------------------------------------------- the topology


def expand_hostlist(text: str) -> list[str]:
    """A Slurm hostlist (`mol-slurm-[1-2]`, `n[01-03,7],login`) as its names, in order."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text or ""):
        stack = [""]
        for piece in re.split(r"(\[[^\]]*\])", part):
            if piece.startswith("["):
                options = []
                for rng in piece[1:-1].split(","):
                    lo, _, hi = rng.partition("-")
                    if hi:
                        options += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
                    else:
                        options.append(lo)
                stack = [s + o for s in stack for o in options]
            else:
                stack = [s + piece for s in stack]
        out += [s for s in stack if s]
    return out


def parse_topology(text: str) -> dict[str, dict[str, Any]]:
    """`scontrol show topology` (or topology.conf lines) as switch -> {"nodes": names directly below it (a level-0
    switch's; Slurm lists every node below an upper switch, derived), "switches": switches below it}. {} for `No
    topology information available` (no topology.conf)."""
    out: dict[str, dict[str, Any]] = {}
    for line in (text or "").splitlines():
        if not line.startswith("SwitchName="):
            continue
        fields = parse_fields(line, tail=())
        below = expand_hostlist(fields.get("Switches", ""))
        level = fields.get("Level")
        nodes = expand_hostlist(fields.get("Nodes", "")) if not below or level in (None, "0") else []
        out[fields["SwitchName"]] = {"nodes": sorted(nodes), "switches": sorted(below)}
    return out


def topology_differences(expected: list[str], reported: str) -> list[str]:
    """How the topology Slurm reports differs from the one the inventory gives (the slurm role's topology.conf lines
    from the switches' ports, module_utils/slurm/topology.py): each switch missing, extra, or with other nodes or
    switches below it."""
    want, got = parse_topology("\n".join(expected)), parse_topology(reported)
    out = []
    for sw in sorted(set(want) | set(got)):
        if sw not in got:
            out.append(f"switch {sw} is missing in Slurm's topology")
        elif sw not in want:
            out.append(f"Slurm has switch {sw}, which the inventory's switches do not give")
        else:
            for key in ("nodes", "switches"):
                if want[sw][key] != got[sw][key]:
                    out.append(
                        f"{sw}: {key} {','.join(got[sw][key]) or 'none'} in Slurm, "
                        f"{','.join(want[sw][key]) or 'none'} from the inventory"
                    )
    return out


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_slurm_aliases": aliases,
    "train_launch_slurm_node_map": node_map,
    "train_launch_slurm_node_problems": node_problems,
    "train_launch_slurm_queue_problems": queue_problems,
}
