"""slurm.conf's node and partition lines and each GPU node's gres.conf, from the hosts' probes and the inventory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.topology import NODES, hostvar, natural


def fabric_ip(interfaces: Any) -> str | None:
    """The design's fabric address without its prefix: first address of the first fabric interface."""
    try:
        return str(interfaces[0]["addresses"][0]).split("/", 1)[0]
    except (TypeError, KeyError, IndexError):
        return None


def node_address(hostvars: Mapping, host: str, network: str) -> str:
    """Where slurmctld reaches the host's slurmd (NodeAddr) and the nodes reach slurmctld: the management address
    (ansible_host, else the inventory name), or with network `fabric` the fabric address where the host has one."""
    if network == "fabric":
        ip = fabric_ip(hostvar(hostvars, host, "cluster_fabric_interfaces"))
        if ip:
            return ip
    return str(hostvar(hostvars, host, "ansible_host", host))


def node_gpus(host: str, facts: Mapping[str, Any], declared: Any) -> int:
    """The node's GPUs: as many as /proc/driver/nvidia/gpus lists, and exactly slurm_node_gpus where set."""
    found = int(facts.get("gpus") or 0)
    if declared is None or declared == "":
        return found
    if int(declared) != found:
        raise RuleError(
            f"{host}: slurm_node_gpus is {declared} but the host shows {found} GPU(s) (/proc/driver/nvidia/gpus): "
            "slurmd would register fewer GPUs than slurm.conf says and the node would go INVAL"
        )
    return found


def gres_conf(host: str, facts: Mapping[str, Any], gpus: int) -> tuple[list[str], str | None]:
    """A GPU node's gres.conf and a note: NVML autodetection where both NVML and the Slurm build's gpu/nvml plugin
    are there (else slurmd fails: `we weren't able to find that lib when Slurm was configured`), the device
    files otherwise. A node without GPUs gets none."""
    if not gpus:
        return [], None
    if facts.get("nvml") and facts.get("slurm_nvml"):
        return ["AutoDetect=nvml"], None
    devices = list(facts.get("gpu_devices") or [])
    if len(devices) < gpus:
        raise RuleError(f"{host}: {gpus} GPU(s) but only {len(devices)} /dev/nvidia<N> device file(s)")
    why = "this Slurm build has no gpu/nvml plugin" if facts.get("nvml") else "no NVML library (libnvidia-ml.so.1)"
    note = f"{host}: {gpus} GPU(s) listed by device file in gres.conf ({why})"
    return [f"Name=gpu File={d}" for d in devices[:gpus]], note


def node_line(name: str, address: str, facts: Mapping[str, Any], gpus: int) -> str:
    parts = [f"NodeName={name}", f"NodeAddr={address}", f"CPUs={facts['cpus']}"]
    if facts.get("sockets"):
        parts += [
            f"Sockets={facts['sockets']}",
            f"CoresPerSocket={facts['cores_per_socket']}",
            f"ThreadsPerCore={facts['threads_per_core']}",
        ]
    parts.append(f"RealMemory={facts['memory_mb']}")
    if gpus:
        parts.append(f"Gres=gpu:{gpus}")
    return " ".join([*parts, "State=UNKNOWN"])


def partitions(
    wanted: Mapping[str, Any], default: str, groups: Mapping[str, list], nodes: list[str]
) -> list[tuple[str, list[str]]]:
    """(partition, its nodes) from slurm_partitions (partition -> inventory group); a problem is a RuleError."""
    if not isinstance(wanted, Mapping) or not wanted:
        raise RuleError(f"slurm_partitions must map each partition to an inventory group, got {wanted!r}")
    if default not in wanted:
        raise RuleError(f"slurm_partition_default {default!r} is not one of slurm_partitions ({', '.join(wanted)})")
    out = []
    for name, group in wanted.items():
        members = list(groups.get(group) or []) if isinstance(group, str) else []
        if not members:
            raise RuleError(f"slurm_partitions: partition {name} names group {group!r}, which has no hosts")
        strays = [h for h in members if h not in nodes]
        if strays:
            raise RuleError(
                f"slurm_partitions: partition {name} (group {group}) holds {', '.join(strays)}, not in {NODES}: "
                "only rdma_nodes run slurmd"
            )
        out.append((name, members))
    return out


def partition_lines(
    wanted: Mapping[str, Any], default: str, groups: Mapping[str, list], nodes: list[str], nodename: Mapping[str, str]
) -> list[str]:
    """slurm.conf's PartitionName lines (partitions' rules: slurm_partitions, slurm_partition_default), each
    partition's nodes by their NodeName, in natural order."""
    return [
        f"PartitionName={name} Nodes={','.join(sorted((nodename[h] for h in members), key=natural))}"
        + (" Default=YES" if name == default else "")
        + " MaxTime=INFINITE State=UP"
        for name, members in partitions(wanted, default, groups, nodes)
    ]
