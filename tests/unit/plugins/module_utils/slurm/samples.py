"""What the slurm tests share: the recorded samples (tests/fixtures/slurm/, where they come from:
tests/fixtures/slurm/README.md), a lab host's probe, and the lab's slurm.conf as the role writes it."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.probe import cgroup_state

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def facts(host: str, cgroup: str = "mountinfo_lab_privileged.txt", box: str = "podman", **kw) -> dict:
    base = {
        "hostname": host,
        "cpus": 2,
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "memory_mb": 24105,
        "cgroup": cgroup_state(fixture(cgroup)),
        "container": box,
        "gpus": 0,
        "gpu_devices": [],
        "nvml": False,
        "slurm_nvml": False,
        "units": {"munge": "inactive", "slurmctld": "inactive", "slurmd": "inactive"},
    }
    return {**base, **kw}


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
