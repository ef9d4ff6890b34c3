"""The slurm role's decisions (plugins/module_utils/slurm/conf.py) on recorded outputs and fake host trees.

Recorded samples and where they come from: tests/fixtures/slurm/README.md. The cluster's configuration is
checked line by line: what the role writes to /etc/slurm is what these tests expect.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import conf as S

from lab import cluster as lab
from tests.conftest import ROOT

pytestmark = pytest.mark.lint

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# ------------------------------------------------------------------------------------------- the host probe


@pytest.mark.parametrize(
    ("sample", "mode", "usable", "why"),
    [
        ("mountinfo_host_hybrid.txt", "hybrid", True, ""),
        ("mountinfo_lab_privileged.txt", "hybrid", True, ""),
        (
            "mountinfo_podman_unprivileged.txt",
            "v1",
            False,
            "cgroup v1 controller(s) freezer, cpuset, memory, devices mounted read-only",
        ),
        ("mountinfo_v1_legacy.txt", "v1", True, ""),
        ("mountinfo_v2_unified.txt", "v2", True, ""),
    ],
)
def test_cgroup_mode_from_recorded_mountinfo(sample: str, mode: str, usable: bool, why: str) -> None:
    assert S.cgroup_state(fixture(sample)) == {"mode": mode, "usable": usable, "why": why}


def test_cgroup_mode_without_cgroups_or_with_a_read_only_v2() -> None:
    assert S.cgroup_state("") == {"mode": "none", "usable": False, "why": "no cgroup file system on /sys/fs/cgroup"}
    ro = fixture("mountinfo_v2_unified.txt").replace(" rw,nosuid", " ro,nosuid", 1)
    assert S.cgroup_state(ro) == {
        "mode": "v2",
        "usable": False,
        "why": "/sys/fs/cgroup (cgroup v2) is mounted read-only",
    }
    # A controller the plugins need, missing: named.
    no_freezer = "".join(line for line in fixture("mountinfo_v1_legacy.txt").splitlines(True) if "freezer" not in line)
    assert S.cgroup_state(no_freezer)["why"] == "cgroup v1 controller(s) freezer not mounted"


def test_cpus_and_memory_as_slurmd_counts_them() -> None:
    """The same machine's `slurmd -C` (recorded): CPUs=2 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
    RealMemory=24105."""
    recorded = dict(part.split("=", 1) for part in fixture("slurmd_C_lab.txt").split() if "=" in part)
    shape = S.cpu_topology(fixture("cpuinfo_lab.txt"))
    assert shape == {"cpus": 2, "sockets": 1, "cores_per_socket": 2, "threads_per_core": 1}
    assert (shape["cpus"], shape["cores_per_socket"], shape["threads_per_core"]) == (
        int(recorded["CPUs"]),
        int(recorded["CoresPerSocket"]),
        int(recorded["ThreadsPerCore"]),
    )
    assert S.memory_mb(fixture("meminfo_lab.txt")) == int(recorded["RealMemory"])
    assert S.memory_mb("MemTotal:        1048575 kB\n") == 1023  # rounded down, as slurmd does


def test_cpu_shape_unknown_where_cpuinfo_does_not_say() -> None:
    """ARM's /proc/cpuinfo has no physical id / core id: CPUs only (slurmd then counts the shape itself)."""
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n"
    assert S.cpu_topology(arm) == {"cpus": 2, "sockets": None, "cores_per_socket": None, "threads_per_core": None}
    assert S.node_line("n1", "10.0.0.1", {"cpus": 2, "sockets": None, "memory_mb": 100}, 0) == (
        "NodeName=n1 NodeAddr=10.0.0.1 CPUs=2 RealMemory=100 State=UNKNOWN"
    )


def fake_host(root: Path, gpus: int = 0, nvml: bool = False, slurm_nvml: bool = False, box: str = "") -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(fixture("cpuinfo_lab.txt"))
    (root / "proc/meminfo").write_text(fixture("meminfo_lab.txt"))
    (root / "proc/self/mountinfo").write_text(fixture("mountinfo_lab_privileged.txt"))
    (root / "dev").mkdir()
    for i in range(gpus):
        (root / f"proc/driver/nvidia/gpus/0000:{i + 0x18:02x}:00.0").mkdir(parents=True)
        (root / f"dev/nvidia{i}").touch()
    for extra in ("nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (root / "dev" / extra).touch()
    if nvml:
        (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
        (root / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").touch()
    if slurm_nvml:
        (root / "usr/lib/x86_64-linux-gnu/slurm-wlm").mkdir(parents=True)
        (root / "usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so").touch()
    if box:
        (root / "run/systemd").mkdir(parents=True)
        (root / "run/systemd/container").write_text(box + "\n")
    return root


def test_host_facts_of_a_lab_host(tmp_path: Path) -> None:
    got = S.host_facts(str(fake_host(tmp_path, box="podman")), "lab-node1.lab", {"munge": "active"})
    assert got == {
        "hostname": "lab-node1",
        "cpus": 2,
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "memory_mb": 24105,
        "cgroup": {"mode": "hybrid", "usable": True, "why": ""},
        "container": "podman",
        "gpus": 0,
        "gpu_devices": [],
        "nvml": False,
        "slurm_nvml": False,
        "units": {"munge": "active"},
    }


def test_host_facts_of_a_gpu_host(tmp_path: Path) -> None:
    """GPUs from /proc/driver/nvidia/gpus, device files in numeric order (nvidia10 after nvidia9), control nodes
    (nvidiactl, nvidia-uvm) left out, NVML and the Slurm build's plugin found where they are."""
    got = S.host_facts(str(fake_host(tmp_path, gpus=11, nvml=True, slurm_nvml=True)), "gpu1")
    assert got["gpus"] == 11 and got["nvml"] and got["slurm_nvml"] and got["container"] == ""
    assert got["gpu_devices"] == [f"/dev/nvidia{i}" for i in range(11)]


# ------------------------------------------------------------------------------------------- cgroups


def facts(host: str, cgroup: str = "mountinfo_lab_privileged.txt", box: str = "podman", **kw) -> dict:
    base = {
        "hostname": host,
        "cpus": 2,
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "memory_mb": 24105,
        "cgroup": S.cgroup_state(fixture(cgroup)),
        "container": box,
        "gpus": 0,
        "gpu_devices": [],
        "nvml": False,
        "slurm_nvml": False,
        "units": {"munge": "inactive", "slurmctld": "inactive", "slurmd": "inactive"},
    }
    return {**base, **kw}


def test_cgroup_plugins_where_every_node_can_create_cgroups() -> None:
    plan = S.cgroup_plan(
        {
            "n1": facts("n1"),
            "n2": facts("n2", "mountinfo_v2_unified.txt", box=""),
            "n3": facts("n3", "mountinfo_v2_unified.txt"),
        }
    )
    assert plan["plugins"] == {
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup,task/affinity",
        "JobAcctGatherType": "jobacct_gather/cgroup",
    }
    constrain = ["ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes"]
    assert plan["cgroup_conf"] == {
        "n1": ["CgroupPlugin=cgroup/v1", *constrain],
        "n2": ["CgroupPlugin=cgroup/v2", *constrain],
        "n3": ["CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes", "CgroupAutomount=yes", *constrain],
    }
    assert plan["note"] == (
        "cgroups: proctrack/cgroup, task/cgroup,task/affinity, jobacct_gather/cgroup (n1 hybrid in podman, n2 v2, "
        "n3 v2 in podman)"
    )


def test_one_node_without_cgroups_takes_the_whole_cluster_to_linuxproc_and_says_why() -> None:
    plan = S.cgroup_plan({"n1": facts("n1"), "n2": facts("n2", "mountinfo_podman_unprivileged.txt")})
    assert plan["plugins"] == {
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/affinity",
        "JobAcctGatherType": "jobacct_gather/none",
    }
    assert plan["cgroup_conf"] == {"n1": [], "n2": []}
    assert plan["note"] == (
        "no cgroups: proctrack/linuxproc, task/affinity, jobacct_gather/none (jobs are not confined to their cores "
        "and memory, and no usage is gathered) because Slurm cannot create cgroups on n2 (cgroup v1 controller(s) "
        "freezer, cpuset, memory, devices mounted read-only)"
    )


# ------------------------------------------------------------------------------------------- topology


def lab_fabric(n: int, leaves: int, spines: int) -> tuple[dict, list[str], dict]:
    """The lab's own leaf-spine plan (lab/cluster.py fabric_plan, what `lab up --leaves --spines` writes)."""
    nodes = [lab.Node(i) for i in range(1, n + 1)]
    plan = lab.fabric_plan(nodes, leaves, spines)
    ports = {sw.name: [*sw.host_interfaces, *sw.uplink_interfaces] for sw in plan}
    names = {x.name: x.name for x in nodes} | {sw.name: sw.name for sw in plan}
    return ports, [x.name for x in nodes], names


def test_topology_of_the_lab_leaf_spine_fabric() -> None:
    ports, nodes, names = lab_fabric(4, 2, 1)
    got = S.topology(ports, nodes, names, {n: n.replace("lab-", "") for n in nodes})
    assert got == {
        "lines": [
            "SwitchName=lab-leaf1 Nodes=node1,node3",
            "SwitchName=lab-leaf2 Nodes=node2,node4",
            "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
        ],
        "unplaced": [],
        "notes": [],
    }


def test_topology_reads_the_ports_peer_keys_as_the_ladder_does() -> None:
    """Ports that name their far end with `peer` (and describe it otherwise, or not at all) place their nodes and
    link their switches as descriptions do: one reading of the port map (cabling.far_end)."""
    ports, nodes, names = lab_fabric(4, 2, 1)
    keyed = {
        sw: [{"name": p["name"], "peer": p["description"].split()[0], "peer_port": p["description"].split()[1]}
             for p in items]
        for sw, items in ports.items()
    }  # fmt: skip
    same = S.topology(ports, nodes, names, {n: n for n in nodes})
    assert S.topology(keyed, nodes, names, {n: n for n in nodes}) == same and same["unplaced"] == []


def test_topology_with_two_spines_lists_the_leaves_under_each() -> None:
    ports, nodes, names = lab_fabric(5, 2, 2)
    got = S.topology(ports, nodes, names, {n: n for n in nodes})
    assert got["lines"] == [
        "SwitchName=lab-leaf1 Nodes=lab-node1,lab-node3,lab-node5",
        "SwitchName=lab-leaf2 Nodes=lab-node2,lab-node4",
        "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
        "SwitchName=lab-spine2 Switches=lab-leaf1,lab-leaf2",
    ]


def test_leaves_without_a_spine_are_separate_trees_and_the_run_says_so() -> None:
    ports, nodes, names = lab_fabric(2, 2, 0)
    got = S.topology(ports, nodes, names, {n: n for n in nodes})
    assert got["lines"] == ["SwitchName=lab-leaf1 Nodes=lab-node1", "SwitchName=lab-leaf2 Nodes=lab-node2"]
    assert got["notes"] == ["the switches form 2 separate trees: a job spans the nodes of one only (topology.conf(5))"]


def test_one_switch_holds_every_node_even_with_undescribed_ports() -> None:
    """The lab's single switch: ports Ethernet1/N without descriptions (inventory/lab/group_vars/switches)."""
    ports = {"lab-switch": [{"name": "Ethernet1/1"}, {"name": "Ethernet1/2"}]}
    got = S.topology(ports, ["lab-node1", "lab-node2"], {}, {"lab-node1": "lab-node1", "lab-node2": "lab-node2"})
    assert got["lines"] == ["SwitchName=lab-switch Nodes=lab-node1,lab-node2"] and got["unplaced"] == []


def test_the_example_inventory_ports_name_their_hosts() -> None:
    """inventory/example's Nexus: `ubunturdma2 ens192 RoCE` names ubunturdma2 (a port without `peer` keys is tied
    to its host by its description)."""
    ports = [{"name": "Ethernet1/1/2", "description": "ubunturdma2 ens192 RoCE"}, {"name": "Ethernet1/1/1"}]
    assert cabling.description_owner(ports[0]["description"], {"ubunturdma2": "ubunturdma2"}) == "ubunturdma2"
    assert cabling.description_owner("rank 1", {"ubunturdma2": "ubunturdma2"}) is None
    assert cabling.description_owner(None, {"x": "x"}) is None


def test_a_node_no_port_names_is_unplaced_and_one_on_two_leaves_is_placed_once() -> None:
    ports, nodes, names = lab_fabric(4, 2, 1)
    ports["lab-leaf2"] = [p for p in ports["lab-leaf2"] if not p["description"].startswith("lab-node4")]
    ports["lab-leaf2"].append({"name": "Ethernet1/5", "description": "lab-node1 rdma1"})
    got = S.topology(ports, nodes, names, {n: n for n in nodes})
    assert got["unplaced"] == ["lab-node4"]
    assert got["lines"][0] == "SwitchName=lab-leaf1 Nodes=lab-node1,lab-node3"
    assert got["notes"] == ["lab-node1 is on lab-leaf1 and lab-leaf2: placed on lab-leaf1"]


def test_no_switch_no_topology() -> None:
    assert S.topology({}, ["n1"], {}, {"n1": "n1"}) == {
        "lines": [],
        "unplaced": [],
        "notes": ["no switch in the inventory: no topology.conf"],
    }


# ------------------------------------------------------------------------------------------- GPUs


def test_gres_nvml_only_where_the_library_and_the_slurm_plugin_are() -> None:
    gpu = facts("g1", gpus=2, gpu_devices=["/dev/nvidia0", "/dev/nvidia1"], nvml=True, slurm_nvml=True)
    assert S.gres_conf("g1", gpu, 2) == (["AutoDetect=nvml"], None)
    debian = {**gpu, "slurm_nvml": False}
    assert S.gres_conf("g1", debian, 2) == (
        ["Name=gpu File=/dev/nvidia0", "Name=gpu File=/dev/nvidia1"],
        "g1: 2 GPU(s) listed by device file in gres.conf (this Slurm build has no gpu/nvml plugin)",
    )
    assert S.gres_conf("g1", {**debian, "nvml": False}, 2)[1].endswith("(no NVML library (libnvidia-ml.so.1))")
    assert S.gres_conf("c1", facts("c1"), 0) == ([], None)
    with pytest.raises(RuleError, match=r"g1: 3 GPU\(s\) but only 2 /dev/nvidia<N> device file\(s\)"):
        S.gres_conf("g1", debian, 3)


def test_declared_gpus_must_be_the_gpus_the_host_shows() -> None:
    assert S.node_gpus("g1", facts("g1", gpus=8), None) == 8
    assert S.node_gpus("g1", facts("g1", gpus=8), 8) == 8
    with pytest.raises(RuleError, match=r"g1: slurm_node_gpus is 8 but the host shows 0 GPU\(s\)"):
        S.node_gpus("g1", facts("g1"), 8)


# ------------------------------------------------------------------------------------------- the cluster

SETTINGS = {
    "cluster_name": "RDMA-LLM-Lab",
    "network": "management",
    "partitions": {"train": "rdma_nodes"},
    "default_partition": "train",
    "topology": "auto",
    "config": {},
    "health_check_program": "",
    "health_check_interval": 300,
}


def lab_hostvars(n: int = 2, switch: bool = True) -> tuple[dict, dict]:
    """The lab as `lab up --hosts n` writes it, each host's probe in ansible_facts.slurm_host."""
    nodes = [lab.Node(i) for i in range(1, n + 1)]
    hostvars = {
        x.name: {
            "ansible_host": x.mgmt_ip,
            "cluster_fabric_interfaces": [{"name": "rdma0", "addresses": [x.fabric_cidr], "mtu": 9000}],
            "ansible_facts": {"slurm_host": facts(x.name)},
        }
        for x in nodes
    }
    groups = {"rdma_nodes": [x.name for x in nodes], "slurm_controllers": [nodes[0].name], "switches": []}
    if switch:
        hostvars["lab-switch"] = {
            "nxos_roce_qos_host_interfaces": [{"name": f"Ethernet1/{i}"} for i in range(1, n + 1)]
        }
        groups["switches"] = ["lab-switch"]
    return hostvars, groups


LAB_CONF = [
    "# cgroups: proctrack/cgroup, task/cgroup,task/affinity, jobacct_gather/cgroup (lab-node1 hybrid in podman, "
    "lab-node2 hybrid in podman)",
    "ClusterName=rdma-llm-lab",
    "SlurmctldHost=lab-node1(10.77.0.11)",
    "AuthType=auth/munge",
    "CredType=cred/munge",
    "SlurmUser=slurm",
    "StateSaveLocation=/var/lib/slurm/slurmctld",
    "SlurmdSpoolDir=/var/lib/slurm/slurmd",
    "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
    "SlurmdLogFile=/var/log/slurm/slurmd.log",
    "SlurmctldPidFile=/run/slurmctld.pid",
    "SlurmdPidFile=/run/slurmd.pid",
    "SchedulerType=sched/backfill",
    "SelectType=select/cons_tres",
    "SelectTypeParameters=CR_Core",
    "ProctrackType=proctrack/cgroup",
    "TaskPlugin=task/cgroup,task/affinity",
    "JobAcctGatherType=jobacct_gather/cgroup",
    "MpiDefault=none",
    "ReturnToService=1",
    "SlurmdParameters=config_overrides",
    "TopologyPlugin=topology/tree",
    "NodeName=lab-node1 NodeAddr=10.77.0.11 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 "
    "State=UNKNOWN",
    "NodeName=lab-node2 NodeAddr=10.77.0.12 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 "
    "State=UNKNOWN",
    "PartitionName=train Nodes=lab-node1,lab-node2 Default=YES MaxTime=INFINITE State=UP",
]


def test_the_lab_cluster() -> None:
    hostvars, groups = lab_hostvars()
    got = S.cluster(hostvars, groups, SETTINGS)
    constrain = ["ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes"]
    assert got["hosts"]["lab-node1"] == {
        "nodename": "lab-node1",
        "files": {
            "slurm.conf": LAB_CONF,
            "topology.conf": ["SwitchName=lab-switch Nodes=lab-node1,lab-node2"],
            "cgroup.conf": ["CgroupPlugin=cgroup/v1", *constrain],
            "gres.conf": None,
        },
        "slurmdbd.conf": None,
    }
    assert got["hosts"]["lab-node2"]["files"]["slurm.conf"] == LAB_CONF
    assert got["notes"] == [LAB_CONF[0][2:]]


ACCOUNTING = {"enabled": True, "database": "slurm_acct_db", "user": "slurm"}


def test_accounting_puts_slurmdbd_beside_slurmctld() -> None:
    """slurm.conf points every daemon at slurmdbd on the controller; only the controller gets slurmdbd.conf (its
    password is the role's to add, so it is in no line here)."""
    hostvars, groups = lab_hostvars()
    got = S.cluster(hostvars, groups, {**SETTINGS, "accounting": ACCOUNTING})["hosts"]
    conf = got["lab-node2"]["files"]["slurm.conf"]
    assert conf == got["lab-node1"]["files"]["slurm.conf"]
    assert [line for line in conf if line.startswith("Accounting")] == [
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=10.77.0.11",
    ]
    # Usage sampling stays as the cgroup plan chose it: switching it with job steps running is what slurm.conf(5)
    # warns against.
    assert "JobAcctGatherType=jobacct_gather/cgroup" in conf
    assert got["lab-node1"]["slurmdbd.conf"] == [
        "AuthType=auth/munge",
        "DbdHost=lab-node1",
        "SlurmUser=slurm",
        "LogFile=/var/log/slurm/slurmdbd.log",
        "PidFile=/run/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=localhost",
        "StorageLoc=slurm_acct_db",
        "StorageUser=slurm",
    ]
    assert got["lab-node2"]["slurmdbd.conf"] is None
    off = S.cluster(hostvars, groups, {**SETTINGS, "accounting": {**ACCOUNTING, "enabled": False}})["hosts"]
    assert off["lab-node1"]["slurmdbd.conf"] is None and off["lab-node1"]["files"]["slurm.conf"] == LAB_CONF


@pytest.mark.parametrize(
    ("accounting", "error"),
    [
        ({"database": "acct;DROP"}, "slurm_accounting_database: 'acct;DROP' is not a MariaDB name"),
        ({"user": "s" * 33}, "slurm_accounting_user: '" + "s" * 33 + "' is not a MariaDB name"),
        ({"user": ""}, "slurm_accounting_user: '' is not a MariaDB name"),
    ],
)
def test_accounting_names_that_would_break_slurmdbd_conf_or_sql(accounting: dict, error: str) -> None:
    hostvars, groups = lab_hostvars()
    with pytest.raises(RuleError, match=re.escape(error)):
        S.cluster(hostvars, groups, {**SETTINGS, "accounting": {**ACCOUNTING, **accounting}})


def test_a_controller_that_is_no_node_gets_slurm_conf_only() -> None:
    hostvars, groups = lab_hostvars()
    hostvars["head"] = {"ansible_host": "10.77.0.5", "ansible_facts": {"slurm_host": facts("head1")}}
    groups["slurm_controllers"] = ["head"]
    got = S.cluster(hostvars, groups, SETTINGS)
    assert got["hosts"]["head"]["files"]["cgroup.conf"] is None
    assert "SlurmctldHost=head1(10.77.0.5)" in got["hosts"]["head"]["files"]["slurm.conf"]
    assert not [line for line in got["hosts"]["head"]["files"]["slurm.conf"] if line.startswith("NodeName=head")]


def test_the_fabric_as_the_scheduler_network() -> None:
    hostvars, groups = lab_hostvars()
    conf = S.cluster(hostvars, groups, {**SETTINGS, "network": "fabric"})["hosts"]["lab-node2"]["files"]["slurm.conf"]
    assert "SlurmctldHost=lab-node1(10.77.250.11)" in conf
    assert [line.split()[1] for line in conf if line.startswith("NodeName=")] == [
        "NodeAddr=10.77.250.11",
        "NodeAddr=10.77.250.12",
    ]
    # A host without a fabric address (a head node) keeps its management address.
    assert S.node_address({"head": {"ansible_host": "10.0.0.5"}}, "head", "fabric") == "10.0.0.5"
    assert S.node_address({"head": {}}, "head", "management") == "head"


def test_gpu_nodes_get_gres() -> None:
    hostvars, groups = lab_hostvars()
    hostvars["lab-node2"]["ansible_facts"]["slurm_host"].update(
        gpus=2, gpu_devices=["/dev/nvidia0", "/dev/nvidia1"], nvml=True, slurm_nvml=False
    )
    hostvars["lab-node2"]["slurm_node_gpus"] = 2
    got = S.cluster(hostvars, groups, SETTINGS)
    conf = got["hosts"]["lab-node1"]["files"]["slurm.conf"]
    assert "GresTypes=gpu" in conf
    assert next(line for line in conf if line.startswith("NodeName=lab-node2")).endswith(
        "RealMemory=24105 Gres=gpu:2 State=UNKNOWN"
    )
    assert got["hosts"]["lab-node1"]["files"]["gres.conf"] is None
    assert got["hosts"]["lab-node2"]["files"]["gres.conf"] == [
        "Name=gpu File=/dev/nvidia0",
        "Name=gpu File=/dev/nvidia1",
    ]
    assert (
        "lab-node2: 2 GPU(s) listed by device file in gres.conf (this Slurm build has no gpu/nvml plugin)"
        in got["notes"]
    )


def test_settings_reach_slurm_conf() -> None:
    hostvars, groups = lab_hostvars(switch=False)
    groups["debug_nodes"] = ["lab-node2"]
    settings = {
        **SETTINGS,
        "partitions": {"train": "rdma_nodes", "debug": "debug_nodes"},
        "health_check_program": "/usr/sbin/nhc",
        "config": {"proctracktype": "proctrack/pgid", "MaxJobCount": 20000},
    }
    conf = S.cluster(hostvars, groups, settings)["hosts"]["lab-node1"]["files"]["slurm.conf"]
    assert "ProctrackType=proctrack/cgroup" not in conf and "proctracktype=proctrack/pgid" in conf
    assert "MaxJobCount=20000" in conf
    assert conf[-2:] == [
        "PartitionName=train Nodes=lab-node1,lab-node2 Default=YES MaxTime=INFINITE State=UP",
        "PartitionName=debug Nodes=lab-node2 MaxTime=INFINITE State=UP",
    ]
    assert "HealthCheckProgram=/usr/sbin/nhc" in conf and "HealthCheckInterval=300" in conf
    assert not [line for line in conf if line.startswith(("TopologyPlugin", "Prolog", "SchedulerParameters"))]
    assert "# no switch in the inventory: no topology.conf" in conf
    # A prolog runs on every node of a job at allocation, and a job it turns away goes back to the queue unheld.
    conf = S.cluster(hostvars, groups, {**settings, "prolog": "/usr/local/sbin/check"})["hosts"]["lab-node2"]
    assert [line for line in conf["files"]["slurm.conf"] if line.startswith(("Prolog", "SchedulerParameters"))] == [
        "Prolog=/usr/local/sbin/check",
        "PrologFlags=Alloc",
        "SchedulerParameters=nohold_on_prolog_fail",
    ]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda hv, g: g.__setitem__("slurm_controllers", []), r"group slurm_controllers must hold exactly one host"),
        (lambda hv, g: hv["lab-node2"].pop("ansible_facts"), r"lab-node2: no Slurm facts"),
        (
            lambda hv, g: hv["lab-node2"]["ansible_facts"]["slurm_host"].update(hostname="lab-node1"),
            r"hostname\(s\) lab-node1 on more than one Slurm host",
        ),
        (lambda hv, g: g.__setitem__("switches", ["sw1", "sw2"]), r"slurm_topology auto: no switch port names "),
    ],
)
def test_what_the_cluster_refuses(change, error: str) -> None:
    hostvars, groups = lab_hostvars()
    change(hostvars, groups)
    with pytest.raises(RuleError, match=error):
        S.cluster(hostvars, groups, SETTINGS)


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"config": {"NodeName": "x"}}, r"slurm_config: 'NodeName' is not a slurm.conf key this role lets you set"),
        ({"config": {"MaxJobCount": "1\nNodeName=evil"}}, r"slurm_config: the value of MaxJobCount must be one line"),
        ({"partitions": {"train": "nowhere"}}, r"partition train names group 'nowhere', which has no hosts"),
        ({"partitions": {"train": "slurm_controllers"}, "default_partition": "train"}, r"not in rdma_nodes"),
        ({"default_partition": "gpu"}, r"slurm_partition_default 'gpu' is not one of slurm_partitions \(train\)"),
    ],
)
def test_what_the_settings_may_not_say(settings: dict, error: str) -> None:
    hostvars, groups = lab_hostvars()
    hostvars["head"] = {"ansible_facts": {"slurm_host": facts("head")}}
    groups["slurm_controllers"] = ["head"]
    with pytest.raises(RuleError, match=error):
        S.cluster(hostvars, groups, {**SETTINGS, **settings})


# ------------------------------------------------------------------------------------------- applying a change

BEFORE = "\n".join(["#", "# Ansible managed", "#", *LAB_CONF]) + "\n"


def edit(old: str, new: str) -> str:
    assert old in BEFORE
    return BEFORE.replace(old, new)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (BEFORE, {"slurmctld": [], "slurmd": [], "reconfigure": []}),
        (
            edit("PartitionName=train Nodes=lab-node1,lab-node2", "PartitionName=train Nodes=lab-node1"),
            {"slurmctld": [], "slurmd": [], "reconfigure": ["PartitionName train"]},
        ),
        (
            edit("ReturnToService=1", "ReturnToService=2"),
            {"slurmctld": [], "slurmd": [], "reconfigure": ["returntoservice"]},
        ),
        (
            edit("lab-node2 NodeAddr=10.77.0.12 CPUs=2", "lab-node2 NodeAddr=10.77.0.12 CPUs=4"),
            {"slurmctld": ["NodeName lab-node2"], "slurmd": ["NodeName lab-node2"], "reconfigure": []},
        ),
        (
            edit("ProctrackType=proctrack/cgroup", "ProctrackType=proctrack/linuxproc"),
            {"slurmctld": ["proctracktype"], "slurmd": ["proctracktype"], "reconfigure": []},
        ),
        (
            edit("StateSaveLocation=/var/lib/slurm/slurmctld", "StateSaveLocation=/srv/slurm"),
            {"slurmctld": ["statesavelocation"], "slurmd": [], "reconfigure": []},
        ),
        (
            edit("MpiDefault=none", "MpiDefault=none\nTaskPlugin=task/affinity"),
            {"slurmctld": [], "slurmd": ["taskplugin"], "reconfigure": []},
        ),
        # A comment (the run's notes) is no change at all.
        (
            edit("# cgroups: proctrack", "# cgroups (again): proctrack"),
            {"slurmctld": [], "slurmd": [], "reconfigure": []},
        ),
    ],
)
def test_what_a_slurm_conf_change_needs(after: str, expected: dict) -> None:
    assert S.conf_changes(BEFORE, after) == expected


def result(name: str, before: str | None = None, after: str = "", changed: bool = True) -> dict:
    diff = {"before": before, "after": after} if name == "slurm.conf" else {}
    return {"item": {"key": name, "value": []}, "changed": changed, "diff": diff}


RUNNING = {"munge": "active", "slurmctld": "active", "slurmd": "active"}


def test_nothing_changed_nothing_restarted() -> None:
    plan = S.apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], RUNNING, True, True)
    assert plan == {
        "state": {"munge": "started", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": False,
        "why": [],
    }


def test_a_new_partition_is_a_reconfigure_not_a_restart() -> None:
    after = edit("PartitionName=train Nodes=lab-node1,lab-node2", "PartitionName=train Nodes=lab-node1")
    plan = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan == {
        "state": {"munge": "started", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": True,
        "why": ["scontrol reconfigure for PartitionName train"],
    }


def test_prolog_flags_restart_both_daemons_the_prolog_itself_is_a_reconfigure() -> None:
    after = edit("ReturnToService=1", "ReturnToService=1\nPrologFlags=Alloc\nProlog=/usr/local/sbin/check")
    plan = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan["state"] == {"munge": "started", "slurmctld": "restarted", "slurmd": "restarted"}, plan
    assert S.conf_changes(BEFORE, edit("ReturnToService=1", "ReturnToService=1\nProlog=/x"))["reconfigure"] == [
        "prolog"
    ]


def test_a_controller_key_restarts_slurmctld_only() -> None:
    after = edit("StateSaveLocation=/var/lib/slurm/slurmctld", "StateSaveLocation=/srv/slurm")
    ctl = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, False)
    assert ctl["state"] == {"munge": "started", "slurmctld": "restarted"}
    assert ctl["why"] == ["slurmctld restarted for statesavelocation (slurm.conf(5))"] and not ctl["reconfigure"]
    node = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, False, True)
    # The node's slurmd keeps running and re-reads its copy when slurmctld asks it to.
    assert node["state"] == {"munge": "started", "slurmd": "started"} and node["reconfigure"]


def test_a_node_change_restarts_both_and_a_gres_change_is_a_reconfigure() -> None:
    after = edit("lab-node2 NodeAddr=10.77.0.12 CPUs=2", "lab-node2 NodeAddr=10.77.0.12 CPUs=4")
    plan = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan["state"] == {"munge": "started", "slurmctld": "restarted", "slurmd": "restarted"}
    assert not plan["reconfigure"]
    gres = S.apply_plan(
        [result("slurm.conf", BEFORE, BEFORE, changed=False), result("gres.conf")], RUNNING, False, True
    )
    assert gres["state"] == {"munge": "started", "slurmd": "started"}
    assert gres["reconfigure"] and gres["why"] == ["scontrol reconfigure for gres.conf"]


def test_first_start_and_a_new_key() -> None:
    """Daemons not running yet start with the new files: no restart, no reconfigure; a new MUNGE key restarts a
    running munged (the daemons talk to it through its socket)."""
    fresh = {"munge": "active", "slurmctld": "inactive", "slurmd": "inactive"}
    plan = S.apply_plan([result("slurm.conf", "", BEFORE), result("cgroup.conf")], fresh, True, True, key_changed=True)
    assert plan == {
        "state": {"munge": "restarted", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": False,
        "why": [],
    }


def test_slurmdbd_starts_first_restarts_for_its_file_and_stops_when_accounting_goes() -> None:
    """slurmdbd reads slurmdbd.conf only at start; slurmctld restarts when it is pointed at slurmdbd
    (AccountingStorageType), and that restart comes after slurmdbd in the loop's order."""
    after = edit("ReturnToService=1", "ReturnToService=1\nAccountingStorageType=accounting_storage/slurmdbd")
    first = S.apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True, dbd="changed")
    assert list(first["state"].items()) == [
        ("munge", "started"),
        ("slurmdbd", "started"),
        ("slurmctld", "restarted"),
        ("slurmd", "started"),
    ]
    assert first["why"][0] == "slurmctld restarted for accountingstoragetype (slurm.conf(5))", first
    running = {**RUNNING, "slurmdbd": "active"}
    same = S.apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True, dbd="same")
    assert same["state"]["slurmdbd"] == "started" and same["why"] == [] and not same["reconfigure"]
    new_file = S.apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True, dbd="changed")
    assert new_file["state"]["slurmdbd"] == "restarted" and new_file["state"]["slurmctld"] == "started"
    assert new_file["why"] == ["slurmdbd restarted for slurmdbd.conf (it reads it only at start)"]
    off = S.apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True)
    assert off["state"]["slurmdbd"] == "stopped" and off["why"] == ["slurmdbd stopped: accounting is off"]
    # A node never runs slurmdbd; a controller without one leaves the unit alone.
    assert "slurmdbd" not in S.apply_plan([], running, False, True, dbd="changed")["state"]
    assert "slurmdbd" not in S.apply_plan([], RUNNING, True, True)["state"]


# ------------------------------------------------------------------------------------------- the daemons' answers


def test_recorded_node_states() -> None:
    idle = S.node_state(fixture("scontrol_show_node_idle.txt"))
    assert idle == {"state": "IDLE", "flags": [], "responding": True, "reason": ""}
    assert S.node_ready(idle) == (True, "IDLE")
    down = S.node_state(fixture("scontrol_show_node_down.txt"))
    assert down["state"] == "DOWN" and down["reason"] == "taken out for a test [root@2026-11-26T11:48:04]"
    assert S.node_ready(down) == (
        False,
        "slurmctld holds the node DOWN: taken out for a test [root@2026-11-26T11:48:04]",
    )
    drain = S.node_state(fixture("scontrol_show_node_drain.txt"))
    assert drain["flags"] == ["DRAIN", "NOT_RESPONDING"] and not drain["responding"]
    assert S.node_ready(drain) == (False, "slurmctld has not heard from this node")


def test_a_drain_someone_set_is_not_a_failure() -> None:
    """Derived from the recorded drain line, once the node answered again (the NOT_RESPONDING flag gone)."""
    line = fixture("scontrol_show_node_drain.txt").replace("State=IDLE+DRAIN+NOT_RESPONDING", "State=IDLE+DRAIN")
    assert S.node_ready(S.node_state(line)) == (True, "IDLE")
    assert not S.node_state("State=IDLE* Reason=x")["responding"]  # sinfo's short form
    assert not S.node_state("State=UNKNOWN")["responding"]
    assert S.node_state("") == {"state": "", "flags": [], "responding": False, "reason": ""}


def test_ping() -> None:
    assert S.ping_up(fixture("scontrol_ping_up.txt"))
    assert not S.ping_up("Slurmctld(primary) at mol-slurm-ctl is DOWN\n")


def test_filters_are_the_table() -> None:
    assert {"slurm_cluster": S.cluster, "slurm_apply": S.apply_plan} == S.FILTERS
