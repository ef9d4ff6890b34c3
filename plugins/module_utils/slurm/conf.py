"""slurm.conf, from the inventory and the hosts' facts: the cluster's one slurm.conf (its keys, node and partition
lines), topology.conf, cgroup.conf and gres.conf, the controller's slurmdbd.conf (its password apart), and in
configless mode each node's slurmd drop-in that fetches them from the controller.

Plain Python (stdlib only): pytest imports it (tests/unit/plugins/module_utils/slurm/test_conf.py); the filters
rdma_llm.cluster.slurm_cluster / slurm_apply adapt `FILTERS`; the inventory contract checks slurm_config against
the keys here before any change. Each part comes from its own module: probe.py (what the hosts report),
cgroups.py (the cgroup plugins), topology.py (topology.conf), nodes.py (node, partition and gres lines), restart.py
(which daemon a change restarts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.cgroups import cgroup_plan
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.nodes import (
    gres_conf,
    node_address,
    node_gpus,
    node_line,
    partition_lines,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.restart import apply_plan
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.topology import (
    NODES,
    SWITCHES,
    host_aliases,
    hostvar,
    switch_ports,
    topology,
)

CONTROLLERS = "slurm_controllers"
CONF_DIR = "/etc/slurm"

# slurm.conf keys the role renders from the inventory: slurm_config may not set them.
STRUCTURE_KEYS = ("nodename", "partitionname", "slurmctldhost", "controlmachine", "include", "nodeset", "downnodes")
CONF_KEY_RE = r"^[A-Za-z][A-Za-z0-9]*$"
# A MariaDB database or user name the role writes into slurmdbd.conf and SQL: MariaDB's user names are at most 32.
DB_NAME_RE = r"^[A-Za-z0-9_]{1,32}$"
SINGLE_LINE_RE = r"^[^\x00-\x1f\x7f]*$"

# Configless mode (slurm.conf(5) SlurmctldParameters=enable_configless, slurmd(8) --conf-server; Slurm 20.02 and
# later): slurmctld serves these files to every slurmd, which keeps them in SlurmdSpoolDir/conf-cache. A node added
# or removed then changes the controller's files alone (docs/slurm.md, "Adding a node").
SERVED_FILES = ("slurm.conf", "topology.conf", "cgroup.conf", "gres.conf")
CONFIGLESS = "enable_configless"
# The drop-in that points a node's slurmd at the controller (reset removes it with the role's other files).
SLURMD_DROPIN = "/etc/systemd/system/slurmd.service.d/rdma-llm-configless.conf"


# Where the daemons keep their state and logs (slurm.conf, slurmdbd.conf): reset's host/reset/data_dirs.py removes
# them with the packages, so they live here once.
STATE_SAVE_LOCATION = "/var/lib/slurm/slurmctld"
SLURMD_SPOOL_DIR = "/var/lib/slurm/slurmd"
LOG_DIR = "/var/log/slurm"


def cluster(hostvars: Mapping, groups: Mapping[str, list], settings: Mapping[str, Any]) -> dict:
    """The cluster's Slurm configuration: each host's files of /etc/slurm (slurm.conf and topology.conf the same on
    every host, or in configless mode every served file on the controller alone), its slurmd drop-in and its
    slurmdbd.conf, and the notes the run prints. Reads each host's probe (ansible_facts.slurm_host)
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
        f = hostvar(hostvars, h, "ansible_facts", {}).get("slurm_host")
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
    gpus = {h: node_gpus(h, facts[h], hostvar(hostvars, h, "slurm_node_gpus")) for h in nodes}
    gres = {}
    for h in nodes:
        gres[h], note = gres_conf(h, facts[h], gpus[h])
        notes += [note] if note else []
    configless = bool(settings.get("configless"))
    if configless:
        cgroup_one = _one_cgroup_conf(plan["cgroup_conf"])
        gres_one = [f"NodeName={nodename[h]} {line}" for h in nodes for line in gres[h]]
    ctl = controllers[0]
    conf: dict[str, str] = {
        "ClusterName": str(settings.get("cluster_name") or "cluster").lower(),
        "SlurmctldHost": f"{nodename[ctl]}({address[ctl]})",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "SlurmUser": "slurm",
        "StateSaveLocation": STATE_SAVE_LOCATION,
        "SlurmdSpoolDir": SLURMD_SPOOL_DIR,
        # Debian's units run the daemons in the foreground; a daemon that dies at start leaves its reason in
        # these files, not always in the journal (the role reads both when a daemon does not answer).
        "SlurmctldLogFile": f"{LOG_DIR}/slurmctld.log",
        "SlurmdLogFile": f"{LOG_DIR}/slurmd.log",
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
    if configless:
        conf["SlurmctldParameters"] = CONFIGLESS
    conf = _override(conf, settings.get("config") or {})
    if configless:
        _keep_configless(conf)
    node_lines = [node_line(nodename[h], address[h], facts[h], gpus[h]) for h in nodes]
    part_lines = partition_lines(
        settings.get("partitions") or {}, settings.get("default_partition", ""), groups, nodes, nodename
    )
    slurm_conf = [*(f"# {n}" for n in notes), *(f"{k}={v}" for k, v in conf.items()), *node_lines, *part_lines]
    files = {"slurm.conf": slurm_conf, "topology.conf": topo["lines"] or None}

    def host_files(h: str) -> dict:
        # The files of /etc/slurm on this host; None: the host must not have it (no GPU, no cgroups, or a node that
        # fetches them from the controller).
        if configless:
            mine = h == ctl
            return {
                **{k: v if mine else None for k, v in files.items()},
                "cgroup.conf": (cgroup_one or None) if mine else None,
                "gres.conf": (gres_one or None) if mine else None,
            }
        return {**files, "cgroup.conf": plan["cgroup_conf"].get(h) or None, "gres.conf": gres.get(h) or None}

    # slurmd's --conf-server takes host[:port]; SlurmctldPort may be a range, slurmctld listens on its first port.
    port = next((v for k, v in conf.items() if k.lower() == "slurmctldport"), "")
    if port and not re.fullmatch(r"[0-9]{1,5}(-[0-9]{1,5})?", port):
        raise RuleError(f"slurm_config: SlurmctldPort {port!r} is not a port or a range of ports (6817-6818)")
    server = f"{address[ctl]}:{port.split('-')[0]}" if port else address[ctl]
    return {
        "hosts": {
            h: {
                "nodename": nodename[h],
                "files": host_files(h),
                # The slurmd drop-in's lines on a node that fetches its files; None: the host must not have it.
                "dropin": dropin_lines(server) if configless and h != ctl and h in nodes else None,
                # slurmdbd.conf without StoragePass (the role adds it from ansible-vault, never in a diff); None: the
                # host must not have it.
                "slurmdbd.conf": dbd_conf if h == ctl else None,
            }
            for h in hosts
        },
        "dropin_path": SLURMD_DROPIN,
        "notes": notes,
    }


# A configless slurmd that cannot fetch its files (the controller not up yet, as at a cold start of the whole
# cluster) exits (`_establish_configuration: failed to load configs`); Debian's unit does not restart it.
SLURMD_RETRY_S = 10


def dropin_lines(server: str) -> list[str]:
    """The slurmd unit's drop-in on a configless node: Debian's and Ubuntu's unit start slurmd only where
    /etc/slurm/slurm.conf exists, pass $SLURMD_OPTIONS to it and never restart it."""
    return [
        "[Unit]",
        "ConditionPathExists=",
        "[Service]",
        f"Environment=SLURMD_OPTIONS=--conf-server={server}",
        "Restart=on-failure",
        f"RestartSec={SLURMD_RETRY_S}",
    ]


def _one_cgroup_conf(per_node: Mapping[str, list[str]]) -> list[str]:
    """The one cgroup.conf a configless controller serves: every node's must be the same."""
    kinds = {tuple(lines) for lines in per_node.values()}
    if len(kinds) > 1:
        which = "; ".join(f"{h}: {', '.join(lines[:3]) or 'none'}" for h, lines in sorted(per_node.items()))
        raise RuleError(
            f"slurm_configless: the nodes need different cgroup.conf files ({which}) and the controller serves one "
            "to all: give them one cgroup mode, or set slurm_configless: false"
        )
    return list(next(iter(kinds), ()))


def _keep_configless(conf: dict[str, str]) -> None:
    """slurm_config's SlurmctldParameters keeps enable_configless: without it the nodes' slurmd find no files."""
    key = next(k for k in conf if k.lower() == "slurmctldparameters")
    words = [w for w in conf[key].split(",") if w]
    if CONFIGLESS not in words:
        conf[key] = ",".join([*words, CONFIGLESS])


def dbd_lines(host: str, database: str, user: str) -> list[str]:
    """slurmdbd.conf(5) for slurmdbd on `host` with MariaDB on the same host (its socket), less StoragePass."""
    for label, value in (("database", database), ("user", user)):
        if not re.fullmatch(DB_NAME_RE, value):
            raise RuleError(f"slurm_accounting_{label}: {value!r} is not a MariaDB name (A-Za-z0-9_, at most 32)")
    return [
        "AuthType=auth/munge",
        f"DbdHost={host}",
        "SlurmUser=slurm",
        f"LogFile={LOG_DIR}/slurmdbd.log",
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


FILTERS = {"slurm_cluster": cluster, "slurm_apply": apply_plan}
