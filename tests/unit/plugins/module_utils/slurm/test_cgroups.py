"""The cgroup plugins and each node's cgroup.conf (plugins/module_utils/slurm/cgroups.py) from the nodes' probes.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.cgroups import cgroup_plan

from tests.unit.plugins.module_utils.slurm.samples import facts

pytestmark = pytest.mark.lint


def test_cgroup_plugins_where_every_node_can_create_cgroups() -> None:
    plan = cgroup_plan(
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
    plan = cgroup_plan({"n1": facts("n1"), "n2": facts("n2", "mountinfo_podman_unprivileged.txt")})
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
