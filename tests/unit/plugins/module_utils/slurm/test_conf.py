"""The cluster's Slurm configuration (plugins/module_utils/slurm/conf.py), checked line by line: what the role writes
to /etc/slurm is what these tests expect.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import re

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.conf import FILTERS, cluster
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.nodes import node_address
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.restart import apply_plan

from lab import cluster as lab
from tests.unit.plugins.module_utils.slurm.samples import LAB_CONF, facts

pytestmark = pytest.mark.lint


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


def test_the_lab_cluster() -> None:
    hostvars, groups = lab_hostvars()
    got = cluster(hostvars, groups, SETTINGS)
    constrain = ["ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes"]
    assert got["hosts"]["lab-node1"] == {
        "nodename": "lab-node1",
        "files": {
            "slurm.conf": LAB_CONF,
            "topology.conf": ["SwitchName=lab-switch Nodes=lab-node1,lab-node2"],
            "cgroup.conf": ["CgroupPlugin=cgroup/v1", *constrain],
            "gres.conf": None,
        },
        "dropin": None,
        "slurmdbd.conf": None,
    }
    assert got["hosts"]["lab-node2"]["files"]["slurm.conf"] == LAB_CONF
    assert got["notes"] == [LAB_CONF[0][2:]]


ACCOUNTING = {"enabled": True, "database": "slurm_acct_db", "user": "slurm"}


def test_accounting_puts_slurmdbd_beside_slurmctld() -> None:
    """slurm.conf points every daemon at slurmdbd on the controller; only the controller gets slurmdbd.conf (its
    password is the role's to add, so it is in no line here)."""
    hostvars, groups = lab_hostvars()
    got = cluster(hostvars, groups, {**SETTINGS, "accounting": ACCOUNTING})["hosts"]
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
    off = cluster(hostvars, groups, {**SETTINGS, "accounting": {**ACCOUNTING, "enabled": False}})["hosts"]
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
        cluster(hostvars, groups, {**SETTINGS, "accounting": {**ACCOUNTING, **accounting}})


def test_a_controller_that_is_no_node_gets_slurm_conf_only() -> None:
    hostvars, groups = lab_hostvars()
    hostvars["head"] = {"ansible_host": "10.77.0.5", "ansible_facts": {"slurm_host": facts("head1")}}
    groups["slurm_controllers"] = ["head"]
    got = cluster(hostvars, groups, SETTINGS)
    assert got["hosts"]["head"]["files"]["cgroup.conf"] is None
    assert "SlurmctldHost=head1(10.77.0.5)" in got["hosts"]["head"]["files"]["slurm.conf"]
    assert not [line for line in got["hosts"]["head"]["files"]["slurm.conf"] if line.startswith("NodeName=head")]


def test_the_fabric_as_the_scheduler_network() -> None:
    hostvars, groups = lab_hostvars()
    conf = cluster(hostvars, groups, {**SETTINGS, "network": "fabric"})["hosts"]["lab-node2"]["files"]["slurm.conf"]
    assert "SlurmctldHost=lab-node1(10.77.250.11)" in conf
    assert [line.split()[1] for line in conf if line.startswith("NodeName=")] == [
        "NodeAddr=10.77.250.11",
        "NodeAddr=10.77.250.12",
    ]
    # A host without a fabric address (a head node) keeps its management address.
    assert node_address({"head": {"ansible_host": "10.0.0.5"}}, "head", "fabric") == "10.0.0.5"
    assert node_address({"head": {}}, "head", "management") == "head"


def test_gpu_nodes_get_gres() -> None:
    hostvars, groups = lab_hostvars()
    hostvars["lab-node2"]["ansible_facts"]["slurm_host"].update(
        gpus=2, gpu_devices=["/dev/nvidia0", "/dev/nvidia1"], nvml=True, slurm_nvml=False
    )
    hostvars["lab-node2"]["slurm_node_gpus"] = 2
    got = cluster(hostvars, groups, SETTINGS)
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
    conf = cluster(hostvars, groups, settings)["hosts"]["lab-node1"]["files"]["slurm.conf"]
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
    conf = cluster(hostvars, groups, {**settings, "prolog": "/usr/local/sbin/check"})["hosts"]["lab-node2"]
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
        cluster(hostvars, groups, SETTINGS)


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
        cluster(hostvars, groups, {**SETTINGS, **settings})


CONFIGLESS = {**SETTINGS, "configless": True}
DROPIN = [
    "[Unit]",
    "ConditionPathExists=",
    "[Service]",
    "Environment=SLURMD_OPTIONS=--conf-server=10.77.0.11",
    "Restart=on-failure",
    "RestartSec=10",
]


def test_configless_the_controller_serves_every_file_and_the_nodes_keep_none() -> None:
    """A node added or removed changes the controller's files alone: the nodes have no /etc/slurm files, their
    slurmd fetches them from slurmctld (the drop-in); the controller, a node too here, reads its own."""
    hostvars, groups = lab_hostvars()
    got = cluster(hostvars, groups, CONFIGLESS)["hosts"]
    served = got["lab-node1"]["files"]
    assert served["slurm.conf"] == [
        *LAB_CONF[:22],
        "SlurmctldParameters=enable_configless",
        *LAB_CONF[22:],
    ]
    assert served["topology.conf"] == ["SwitchName=lab-switch Nodes=lab-node1,lab-node2"]
    assert served["cgroup.conf"][0] == "CgroupPlugin=cgroup/v1" and served["gres.conf"] is None
    assert got["lab-node1"]["dropin"] is None
    assert got["lab-node2"]["files"] == dict.fromkeys(served)
    assert got["lab-node2"]["dropin"] == DROPIN


def test_configless_a_head_node_serves_cgroup_conf_and_gres_conf_names_each_node() -> None:
    hostvars, groups = lab_hostvars()
    hostvars["head"] = {"ansible_host": "10.77.0.5", "ansible_facts": {"slurm_host": facts("head1")}}
    groups["slurm_controllers"] = ["head"]
    for host, gpus in (("lab-node1", 1), ("lab-node2", 2)):
        hostvars[host]["ansible_facts"]["slurm_host"].update(
            gpus=gpus, gpu_devices=[f"/dev/nvidia{i}" for i in range(gpus)], nvml=host == "lab-node1", slurm_nvml=True
        )
    got = cluster(hostvars, groups, CONFIGLESS)["hosts"]
    assert got["head"]["files"]["cgroup.conf"][0] == "CgroupPlugin=cgroup/v1" and got["head"]["dropin"] is None
    assert got["head"]["files"]["gres.conf"] == [
        "NodeName=lab-node1 AutoDetect=nvml",
        "NodeName=lab-node2 Name=gpu File=/dev/nvidia0",
        "NodeName=lab-node2 Name=gpu File=/dev/nvidia1",
    ]
    assert got["lab-node1"]["dropin"][3] == "Environment=SLURMD_OPTIONS=--conf-server=10.77.0.5"
    assert got["lab-node1"]["files"]["gres.conf"] is None


def test_configless_keeps_the_inventorys_slurmctld_settings() -> None:
    hostvars, groups = lab_hostvars()
    config = {"slurmctldparameters": "idle_on_node_suspend", "SlurmctldPort": "6900-6901"}
    got = cluster(hostvars, groups, {**CONFIGLESS, "config": config})["hosts"]
    conf = got["lab-node1"]["files"]["slurm.conf"]
    assert "slurmctldparameters=idle_on_node_suspend,enable_configless" in conf
    assert "SlurmctldParameters=enable_configless" not in conf
    # slurmctld listens on the first port of a range.
    assert got["lab-node2"]["dropin"][3] == "Environment=SLURMD_OPTIONS=--conf-server=10.77.0.11:6900"
    kept = cluster(hostvars, groups, {**CONFIGLESS, "config": {"SlurmctldParameters": "enable_configless"}})
    assert "SlurmctldParameters=enable_configless" in kept["hosts"]["lab-node1"]["files"]["slurm.conf"]
    # Off, nothing of it.
    plain = cluster(hostvars, groups, SETTINGS)["hosts"]
    assert not [line for line in plain["lab-node1"]["files"]["slurm.conf"] if "configless" in line]
    assert plain["lab-node2"]["dropin"] is None


def test_what_configless_refuses() -> None:
    hostvars, groups = lab_hostvars()
    with pytest.raises(RuleError, match=r"slurm_config: SlurmctldPort '6817 -Z' is not a port"):
        cluster(hostvars, groups, {**CONFIGLESS, "config": {"SlurmctldPort": "6817 -Z"}})
    # One cgroup.conf for every node: a v2 node beside v1 nodes cannot fetch its own.
    hostvars["lab-node2"]["ansible_facts"]["slurm_host"] = facts("lab-node2", cgroup="mountinfo_v2_unified.txt")
    with pytest.raises(
        RuleError,
        match=r"slurm_configless: the nodes need different cgroup.conf files \(lab-node1: CgroupPlugin=cgroup/v1, "
        r".*; lab-node2: CgroupPlugin=cgroup/v2, IgnoreSystemd=yes, CgroupAutomount=yes\)",
    ):
        cluster(hostvars, groups, CONFIGLESS)
    assert (
        cluster(hostvars, groups, SETTINGS)["hosts"]["lab-node2"]["files"]["cgroup.conf"][0] == "CgroupPlugin=cgroup/v2"
    )


def test_filters_are_the_table() -> None:
    assert {"slurm_cluster": cluster, "slurm_apply": apply_plan} == FILTERS
