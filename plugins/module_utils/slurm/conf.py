"""Slurm from the inventory and the hosts' facts: every decision of the slurm role, in one place.

Plain Python (stdlib only): pytest imports it (tests/unit/plugins/module_utils/slurm/test_conf.py), the host module
rdma_llm.cluster.slurm_host runs its probe on the hosts, the module rdma_llm.cluster.slurm_daemons reads the
daemons' answers with it, the filters rdma_llm.cluster.slurm_cluster / slurm_apply adapt the rest, and the
inventory contract calls its topology and partition rules before any change.

- the host probe: CPUs and memory as slurmd counts them, the cgroup mode (from /proc/self/mountinfo) and whether
  Slurm may create cgroups there, GPUs, NVML and the Slurm build's NVML plugin;
- cgroup mode -> ProctrackType / TaskPlugin / JobAcctGatherType and each node's cgroup.conf;
- the switches' RoCE ports -> topology.conf (topology/tree);
- facts and inventory -> NodeName, PartitionName and gres.conf lines;
- job accounting -> slurm.conf's AccountingStorage keys and the controller's slurmdbd.conf (its password apart);
- a change of slurm.conf -> which daemon must restart (slurm.conf(5)) and what `scontrol reconfigure` covers.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling

CONTROLLERS = "slurm_controllers"
NODES = "rdma_nodes"
SWITCHES = "switches"
CONF_DIR = "/etc/slurm"

# ------------------------------------------------------------------------------------------- the host probe

# The cgroup v1 controllers Slurm's cgroup plugins write to: freezer (proctrack/cgroup), cpuset (ConstrainCores),
# memory (ConstrainRAMSpace, jobacct_gather/cgroup), devices (ConstrainDevices, GPUs).
CGROUP_V1_NEEDED = ("freezer", "cpuset", "memory", "devices")
# Where a driver install puts NVML (what Slurm's gpu/nvml plugin dlopen()s); CUDA's stubs/ directory does not count.
NVML_GLOBS = (
    "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "usr/lib64/libnvidia-ml.so.1",
    "usr/lib/libnvidia-ml.so.1",
)
# The Slurm build's NVML plugin: Debian/Ubuntu (slurm-wlm) and RPM layouts. Debian 12's 22.05.8 ships none.
SLURM_NVML_GLOBS = ("usr/lib/*/slurm-wlm/gpu_nvml.so", "usr/lib64/slurm/gpu_nvml.so", "usr/lib/slurm/gpu_nvml.so")
UNITS = ("munge", "slurmdbd", "slurmctld", "slurmd")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def parse_mountinfo(text: str) -> list[dict]:
    """proc(5) /proc/self/mountinfo: one dict per mount with its point, per-mount options, type and super options."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(after) < 3:
            continue
        mounts.append(
            {
                "point": fields[4],
                "options": fields[5].split(","),
                "fstype": after[0],
                "super": after[2].split(","),
            }
        )
    return mounts


def cgroup_state(mountinfo: str) -> dict:
    """The host's cgroup mode and whether Slurm's cgroup plugins can create its cgroups there.

    mode: `v2` (cgroup2 on /sys/fs/cgroup), `hybrid` (v1 controllers and cgroup2 on /sys/fs/cgroup/unified, as on
    this project's machines), `v1` or `none`. usable: the controllers Slurm writes to are mounted read-write (a
    container that may not create cgroups mounts them read-only: podman's non-privileged systemd mode).
    """
    mounts = {}  # the last mount on a point hides the earlier ones
    for m in parse_mountinfo(mountinfo):
        if m["point"] == "/sys/fs/cgroup" or m["point"].startswith("/sys/fs/cgroup/"):
            mounts[m["point"]] = m
    root = mounts.get("/sys/fs/cgroup")
    if root is not None and root["fstype"] == "cgroup2":
        usable = "rw" in root["options"]
        why = "" if usable else "/sys/fs/cgroup (cgroup v2) is mounted read-only"
        return {"mode": "v2", "usable": usable, "why": why}
    v1 = {}
    for m in mounts.values():
        if m["fstype"] == "cgroup":
            for ctrl in m["super"]:
                v1[ctrl] = m
    if not v1:
        return {"mode": "none", "usable": False, "why": "no cgroup file system on /sys/fs/cgroup"}
    unified = mounts.get("/sys/fs/cgroup/unified")
    mode = "hybrid" if unified is not None and unified["fstype"] == "cgroup2" else "v1"
    missing = [c for c in CGROUP_V1_NEEDED if c not in v1]
    readonly = [c for c in CGROUP_V1_NEEDED if c in v1 and "rw" not in v1[c]["options"]]
    why = "; ".join(
        part
        for part in (
            f"cgroup v1 controller(s) {', '.join(readonly)} mounted read-only" if readonly else "",
            f"cgroup v1 controller(s) {', '.join(missing)} not mounted" if missing else "",
        )
        if part
    )
    return {"mode": mode, "usable": not why, "why": why}


def cpu_topology(cpuinfo: str) -> dict:
    """CPUs, sockets, cores per socket and threads per core from /proc/cpuinfo, as slurmd -C counts them on x86;
    the three shape fields are None where cpuinfo does not say (ARM) or does not add up."""
    cpus, sockets, cores = 0, set(), set()
    phys = None
    for line in cpuinfo.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            cpus += 1
            phys = None
        elif key == "physical id":
            phys = value
            sockets.add(value)
        elif key == "core id":
            cores.add((phys, value))
    shape: dict[str, int | None] = {"sockets": None, "cores_per_socket": None, "threads_per_core": None}
    if sockets and cores and cpus % len(cores) == 0 and len(cores) % len(sockets) == 0:
        shape = {
            "sockets": len(sockets),
            "cores_per_socket": len(cores) // len(sockets),
            "threads_per_core": cpus // len(cores),
        }
    return {"cpus": cpus, **shape}


def memory_mb(meminfo: str) -> int:
    """MemTotal in MiB, rounded down: the RealMemory slurmd reports (slurmd -C)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB", meminfo, re.M)
    return int(match.group(1)) // 1024 if match else 0


def container(root: str = "/") -> str:
    """The container manager systemd detected (/run/systemd/container: podman, docker, lxc ...), else ''."""
    named = (_read(os.path.join(root, "run/systemd/container")) or "").strip()
    if named:
        return named
    for marker, name in ((".containerenv", "podman"), (".dockerenv", "docker")):
        if os.path.exists(os.path.join(root, marker)):
            return name
    return ""


def host_facts(root: str = "/", hostname: str = "", units: Mapping[str, str] | None = None) -> dict:
    """What the role needs to know of one host. Every path starts at `root` (tests use fake trees)."""
    gpu_dir = os.path.join(root, "proc/driver/nvidia/gpus")
    gpus = len(os.listdir(gpu_dir)) if os.path.isdir(gpu_dir) else 0
    devices = sorted(
        (p for p in glob.glob(os.path.join(root, "dev/nvidia*")) if re.fullmatch(r"nvidia\d+", os.path.basename(p))),
        key=lambda p: int(os.path.basename(p)[6:]),
    )
    return {
        "hostname": hostname.split(".")[0],
        **cpu_topology(_read(os.path.join(root, "proc/cpuinfo")) or ""),
        "memory_mb": memory_mb(_read(os.path.join(root, "proc/meminfo")) or ""),
        "cgroup": cgroup_state(_read(os.path.join(root, "proc/self/mountinfo")) or ""),
        "container": container(root),
        "gpus": gpus,
        "gpu_devices": ["/" + os.path.relpath(p, root) for p in devices],
        "nvml": any(glob.glob(os.path.join(root, g)) for g in NVML_GLOBS),
        "slurm_nvml": any(glob.glob(os.path.join(root, g)) for g in SLURM_NVML_GLOBS),
        "units": dict(units or {}),
    }


# ------------------------------------------------------------------------------------------- cgroups

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


# ------------------------------------------------------------------------------------------- topology


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def topology(
    switch_ports: Mapping[str, list], nodes: list[str], names: Mapping[str, str], nodename: Mapping[str, str]
) -> dict:
    """topology.conf (topology/tree) from the switches' RoCE ports.

    switch_ports: switch -> its RoCE port items (nxos_roce_qos_interfaces: host ports and uplinks); nodes: the
    inventory's Slurm nodes; names: alias -> inventory host or switch (host names, short names, hostnames);
    nodename: inventory host -> its Slurm NodeName. A fabric of one switch holds every node; with more, each
    node hangs off the switch whose port names it first, and a switch is linked to another that one of its ports
    names (cabling.far_end: the port's `peer`, else its description's first word). Leaves are the switches with
    nodes, each level up the switches linked to the level below. Returns {"lines", "unplaced", "notes"}."""
    switches = sorted(switch_ports, key=_natural)
    if not switches:
        return {"lines": [], "unplaced": [], "notes": ["no switch in the inventory: no topology.conf"]}
    placed: dict[str, str] = {}
    links: dict[str, set] = {sw: set() for sw in switches}
    notes = []
    # Switch by switch in natural order: the first switch that names a node places it.
    for sw, port in ((s, p) for s in switches for p in switch_ports[s] or [] if isinstance(p, Mapping)):
        owner = cabling.far_end(port, names)[0]
        if owner in links and owner != sw:
            links[sw].add(owner)
            links[owner].add(sw)
        elif owner in nodes:
            if owner in placed and placed[owner] != sw:
                notes.append(f"{owner} is on {placed[owner]} and {sw}: placed on {placed[owner]}")
            placed.setdefault(owner, sw)
    if len(switches) == 1:
        placed = dict.fromkeys(nodes, switches[0])
    unplaced = [n for n in nodes if n not in placed]
    level = {sw for sw in switches if sw in placed.values()}
    lines = []
    for sw in sorted(level, key=_natural):
        members = sorted((nodename[n] for n, s in placed.items() if s == sw), key=_natural)
        lines.append(f"SwitchName={sw} Nodes={','.join(members)}")
    seen = set(level)
    while level:
        above: dict[str, set] = {}
        for sw in level:
            for up in links[sw] - seen:
                above.setdefault(up, set()).add(sw)
        for up in sorted(above, key=_natural):
            lines.append(f"SwitchName={up} Switches={','.join(sorted(above[up], key=_natural))}")
        seen |= set(above)
        level = set(above)
    unlinked = [sw for sw in switches if sw not in seen]
    if unlinked:
        notes.append(f"{', '.join(unlinked)}: no node and no link to a switch with nodes, left out")
    roots = _components(lines)
    if roots > 1:
        notes.append(f"the switches form {roots} separate trees: a job spans the nodes of one only (topology.conf(5))")
    return {"lines": lines, "unplaced": unplaced, "notes": notes}


def _components(lines: list[str]) -> int:
    """How many trees the topology.conf lines form (a switch listed by no other is a root)."""
    names, children = [], set()
    for line in lines:
        fields = dict(part.split("=", 1) for part in line.split())
        names.append(fields["SwitchName"])
        children.update(fields.get("Switches", "").split(",") if "Switches" in fields else [])
    return sum(1 for n in names if n not in children)


# ------------------------------------------------------------------------------------------- the cluster

# slurm.conf keys the role renders from the inventory: slurm_config may not set them.
STRUCTURE_KEYS = ("nodename", "partitionname", "slurmctldhost", "controlmachine", "include", "nodeset", "downnodes")
CONF_KEY_RE = r"^[A-Za-z][A-Za-z0-9]*$"
# A MariaDB database or user name the role writes into slurmdbd.conf and SQL: MariaDB's user names are at most 32.
DB_NAME_RE = r"^[A-Za-z0-9_]{1,32}$"
SINGLE_LINE_RE = r"^[^\x00-\x1f\x7f]*$"


def _get(hostvars: Mapping, host: str, name: str, default: Any = None) -> Any:
    try:
        value = hostvars[host].get(name, default)
    except (KeyError, AttributeError):
        return default
    return default if value is None else value


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
        ip = fabric_ip(_get(hostvars, host, "cluster_fabric_interfaces"))
        if ip:
            return ip
    return str(_get(hostvars, host, "ansible_host", host))


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


def host_aliases(hostvars: Mapping, hosts: list[str], switches: list[str] = ()) -> dict[str, str]:
    """alias -> inventory host (or switch) by cabling.names, the hostnames from the hosts' variables."""
    return cabling.names(hosts, switches, lambda h: _get(hostvars, h, "common_hostname"))


def switch_ports(hostvars: Mapping, switches: list[str]) -> dict[str, list]:
    """switch -> its RoCE ports (nxos_roce_qos_host_interfaces + _uplink_interfaces, the switch role's lists)."""
    out = {}
    for sw in switches:
        ports = []
        for name in ("nxos_roce_qos_host_interfaces", "nxos_roce_qos_uplink_interfaces"):
            value = _get(hostvars, sw, name, [])
            ports += list(value) if isinstance(value, list) else []
        out[sw] = ports
    return out


def cluster(hostvars: Mapping, groups: Mapping[str, list], settings: Mapping[str, Any]) -> dict:
    """The cluster's Slurm configuration: slurm.conf and topology.conf (the same on every host), each node's
    cgroup.conf and gres.conf, and the notes the run prints. Reads each host's probe (ansible_facts.slurm_host)
    and inventory values from `hostvars`; `settings` carries the role's variables."""
    controllers = list(groups.get(CONTROLLERS) or [])
    nodes = list(groups.get(NODES) or [])
    if len(controllers) != 1:
        raise RuleError(f"group {CONTROLLERS} must hold exactly one host, holds {controllers}")
    if not nodes:
        raise RuleError(f"group {NODES} has no hosts: slurmd has nowhere to run")
    hosts = list(dict.fromkeys(controllers + nodes))
    facts = {}
    for h in hosts:
        f = _get(hostvars, h, "ansible_facts", {}).get("slurm_host")
        if not f:
            raise RuleError(
                f"{h}: no Slurm facts (rdma_llm.cluster.slurm_host did not run there): slurm.conf "
                "describes every node, so every Slurm host must answer"
            )
        facts[h] = f
    nodename = {h: facts[h]["hostname"] or h.split(".")[0] for h in hosts}
    twins = sorted({n for n in nodename.values() if list(nodename.values()).count(n) > 1})
    if twins:
        raise RuleError(f"hostname(s) {', '.join(twins)} on more than one Slurm host: each node needs its own")
    network = settings.get("network", "management")
    address = {h: node_address(hostvars, h, network) for h in hosts}
    notes = []
    plan = cgroup_plan({h: facts[h] for h in nodes})
    notes.append(plan["note"])
    gpus = {h: node_gpus(h, facts[h], _get(hostvars, h, "slurm_node_gpus")) for h in nodes}
    gres = {}
    for h in nodes:
        gres[h], note = gres_conf(h, facts[h], gpus[h])
        notes += [note] if note else []
    ctl = controllers[0]
    conf: dict[str, str] = {
        "ClusterName": str(settings.get("cluster_name") or "cluster").lower(),
        "SlurmctldHost": f"{nodename[ctl]}({address[ctl]})",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "SlurmUser": "slurm",
        "StateSaveLocation": "/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir": "/var/lib/slurm/slurmd",
        # Debian's units run the daemons in the foreground; a daemon that dies at start leaves its reason in
        # these files, not always in the journal (the role reads both when a daemon does not answer).
        "SlurmctldLogFile": "/var/log/slurm/slurmctld.log",
        "SlurmdLogFile": "/var/log/slurm/slurmd.log",
        "SlurmctldPidFile": "/run/slurmctld.pid",
        "SlurmdPidFile": "/run/slurmd.pid",
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        **plan["plugins"],
        "MpiDefault": "none",
        "ReturnToService": "1",
    }
    if any(facts[h].get("container") for h in nodes):
        # Containers report the machine's CPUs and memory: keep a node whose share is smaller from being drained.
        conf["SlurmdParameters"] = "config_overrides"
    if any(gpus.values()):
        conf["GresTypes"] = "gpu"
    topo = {"lines": [], "unplaced": [], "notes": []}
    if settings.get("topology", "auto") == "auto":
        switches = list(groups.get(SWITCHES) or [])
        names = host_aliases(hostvars, nodes, switches)
        topo = topology(switch_ports(hostvars, switches), nodes, names, nodename)
        if topo["unplaced"]:
            raise RuleError(
                f"slurm_topology auto: no switch port names {', '.join(topo['unplaced'])} (the first word of a "
                "port's description in nxos_roce_qos_host_interfaces); name the node there or set slurm_topology: "
                "none"
            )
        notes += topo["notes"]
        if topo["lines"]:
            conf["TopologyPlugin"] = "topology/tree"
    accounting = settings.get("accounting") or {}
    dbd_conf = None
    if accounting.get("enabled"):
        # slurmdbd beside slurmctld, on the controller (DeepOps' and StackHPC's layout): the jobs' records in
        # MariaDB there, `sacct` from every host. JobAcctGatherType stays Slurm's default (none): slurm.conf(5) asks
        # for it to change only with no job step running, and the records need no usage samples.
        conf["AccountingStorageType"] = "accounting_storage/slurmdbd"
        conf["AccountingStorageHost"] = address[ctl]
        dbd_conf = dbd_lines(nodename[ctl], accounting.get("database") or "", accounting.get("user") or "")
    prolog = settings.get("prolog") or ""
    if prolog:
        # On every node of the job at allocation, before any step; a node it fails takes the job back to the queue
        # (slurm.conf(5): a failed prolog requeues the job, held unless nohold_on_prolog_fail).
        conf["Prolog"] = prolog
        conf["PrologFlags"] = "Alloc"
        conf["SchedulerParameters"] = "nohold_on_prolog_fail"
    program = settings.get("health_check_program") or ""
    if program:
        conf["HealthCheckProgram"] = program
        conf["HealthCheckInterval"] = str(settings.get("health_check_interval") or 300)
    conf = _override(conf, settings.get("config") or {})
    node_lines = [node_line(nodename[h], address[h], facts[h], gpus[h]) for h in nodes]
    part_lines = [
        f"PartitionName={name} Nodes={','.join(sorted((nodename[h] for h in members), key=_natural))}"
        + (" Default=YES" if name == settings.get("default_partition") else "")
        + " MaxTime=INFINITE State=UP"
        for name, members in partitions(
            settings.get("partitions") or {}, settings.get("default_partition", ""), groups, nodes
        )
    ]
    slurm_conf = [*(f"# {n}" for n in notes), *(f"{k}={v}" for k, v in conf.items()), *node_lines, *part_lines]
    return {
        "hosts": {
            h: {
                "nodename": nodename[h],
                # The files of /etc/slurm on this host; None: the host must not have it (no GPU, no cgroups ...).
                "files": {
                    "slurm.conf": slurm_conf,
                    "topology.conf": topo["lines"] or None,
                    "cgroup.conf": plan["cgroup_conf"].get(h) or None,
                    "gres.conf": gres.get(h) or None,
                },
                # slurmdbd.conf without StoragePass (the role adds it from ansible-vault, never in a diff); None: the
                # host must not have it.
                "slurmdbd.conf": dbd_conf if h == ctl else None,
            }
            for h in hosts
        },
        "notes": notes,
    }


def dbd_lines(host: str, database: str, user: str) -> list[str]:
    """slurmdbd.conf(5) for slurmdbd on `host` with MariaDB on the same host (its socket), less StoragePass."""
    for label, value in (("database", database), ("user", user)):
        if not re.fullmatch(DB_NAME_RE, value):
            raise RuleError(f"slurm_accounting_{label}: {value!r} is not a MariaDB name (A-Za-z0-9_, at most 32)")
    return [
        "AuthType=auth/munge",
        f"DbdHost={host}",
        "SlurmUser=slurm",
        "LogFile=/var/log/slurm/slurmdbd.log",
        "PidFile=/run/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=localhost",
        f"StorageLoc={database}",
        f"StorageUser={user}",
    ]


def _override(conf: dict[str, str], extra: Mapping[str, Any]) -> dict[str, str]:
    """slurm_config over the role's keys: slurm.conf keys are case-insensitive, so `proctracktype` replaces
    ProctrackType; keys the inventory decides (NodeName, PartitionName, SlurmctldHost ...) are refused."""
    out = dict(conf)
    lower = {k.lower(): k for k in out}
    for key, value in extra.items():
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        if not re.fullmatch(CONF_KEY_RE, str(key)) or str(key).lower() in STRUCTURE_KEYS:
            raise RuleError(f"slurm_config: {key!r} is not a slurm.conf key this role lets you set")
        if not re.fullmatch(SINGLE_LINE_RE, text):
            raise RuleError(f"slurm_config: the value of {key} must be one line")
        out.pop(lower.get(str(key).lower(), ""), None)
        out[str(key)] = text
    return out


# ------------------------------------------------------------------------------------------- applying a change

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


def conf_changes(before: str | None, after: str) -> dict:
    """What a slurm.conf change needs: {"slurmctld": [why], "slurmd": [why], "reconfigure": [why]}.

    slurm.conf(5): node definitions added, removed or changed ("NODE CONFIGURATION") need both daemons restarted,
    and so do the keys in SLURMCTLD_RESTART / SLURMD_RESTART for their daemon; everything else (partitions, other
    keys) `scontrol reconfigure` applies while jobs run."""
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
        out["slurmd"].append(why)
    changed_parts = sorted(p for p in set(old_parts) | set(new_parts) if old_parts.get(p) != new_parts.get(p))
    if changed_parts:
        out["reconfigure"].append(f"PartitionName {','.join(changed_parts)}")
    return out


def _diff(result: Mapping[str, Any]) -> Mapping[str, Any]:
    diff = result.get("diff") or {}
    return diff[0] if isinstance(diff, list) and diff else diff if isinstance(diff, Mapping) else {}


def apply_plan(
    results: list,
    units: Mapping[str, str],
    controller: bool,
    node: bool,
    key_changed: bool = False,
    dbd: str = "",
) -> dict:
    """How this host applies its new files: each daemon's systemd state (`started`, `restarted` or `stopped`), in
    the order they start (MUNGE, slurmdbd, slurmctld, slurmd), whether `scontrol reconfigure` must follow, and why.

    results: the role's file tasks' loop results (item.key the file name, changed, diff with before for
    slurm.conf); units: each daemon's state before the run (a daemon that was not running is started and reads
    the new files anyway); dbd: on the controller, `changed` or `same` for a slurmdbd.conf it has, `` for none
    (accounting off: a running slurmdbd stops)."""
    changes = {"slurmctld": [], "slurmd": [], "reconfigure": []}
    other = []
    for r in results or []:
        if not r.get("changed"):
            continue
        item = r.get("item") or {}
        name = item.get("key") if isinstance(item, Mapping) else str(item)
        if name == "slurm.conf":
            diff = _diff(r)
            for k, v in conf_changes(diff.get("before"), diff.get("after") or "").items():
                changes[k] += v
        else:
            other.append(name)
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
        if running and changes[daemon]:
            state[daemon] = "restarted"
            restarted.append(daemon)
            why.append(f"{daemon} restarted for {', '.join(changes[daemon])} (slurm.conf(5))")
        else:
            state[daemon] = "started"
    running = [d for d, here in daemons.items() if here and units.get(d) == "active"]
    changed = bool(changes["reconfigure"] or other or changes["slurmctld"] or changes["slurmd"])
    reconfigure = changed and any(d not in restarted for d in running)
    if reconfigure:
        why.append(f"scontrol reconfigure for {', '.join(changes['reconfigure'] + other) or 'the new files'}")
    return {"state": state, "reconfigure": reconfigure, "why": why}


# ------------------------------------------------------------------------------------------- the daemons' answers


def node_state(line: str) -> dict:
    """`scontrol show node NAME --oneliner`: {"state": "IDLE", "flags": ["DRAIN"], "responding": True,
    "reason": "..."}. scontrol spells the flags out (`IDLE+DRAIN+NOT_RESPONDING`); sinfo's short form marks a node
    slurmctld has not heard from with a `*`, read here too."""
    parsed = node_check.parse_scontrol_node(line)
    raw = parsed["state"]
    reason = parsed["reason"] + (f" [{parsed['reason_set']}]" if parsed["reason_set"] else "")
    words = raw.rstrip("*").split("+")
    silent = raw.endswith("*") or "NOT_RESPONDING" in words
    return {
        "state": words[0] if raw else "",
        "flags": words[1:],
        "responding": bool(raw) and not silent and words[0] not in ("UNKNOWN", "FUTURE"),
        "reason": reason,
    }


def node_ready(state: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether slurmd runs and slurmctld may schedule on the node: responding, and not DOWN or INVAL (a drain
    someone set is theirs, not a failure of the configuration)."""
    if not state.get("responding"):
        return False, "slurmctld has not heard from this node"
    if state.get("state") in ("DOWN", "INVAL") or "INVALID_REG" in state.get("flags", []):
        return False, f"slurmctld holds the node {state['state']}: {state.get('reason') or 'no reason given'}"
    return True, state["state"]


def ping_up(text: str) -> bool:
    """`scontrol ping`: `Slurmctld(primary) at lab-node1 is UP`."""
    return bool(re.search(r"\bis UP\b", text or ""))


FILTERS = {"slurm_cluster": cluster, "slurm_apply": apply_plan}
