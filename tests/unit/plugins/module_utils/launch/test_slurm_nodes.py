"""The Slurm nodes of a launch (plugins/module_utils/launch/slurm_nodes.py) on recorded Slurm outputs: each host's
node, the states that keep a job off it, a job of the run still queued, and the topology.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_nodes as N
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_state as Q

from tests.unit.plugins.module_utils.launch.slurm_samples import fixture

pytestmark = pytest.mark.lint

# ------------------------------------------------------------------------------------------- the nodes

ALIASES = {"lab-node1": ["mol-slurm-1", "10.0.0.1"], "lab-node2": ["lab-node2", "mol-slurm-2"]}


def test_node_map_finds_each_host_by_any_of_its_names() -> None:
    found = N.node_map(fixture("scontrol_show_nodes_idle.txt"), ALIASES)
    assert {h: n["NodeName"] for h, n in found.items()} == {"lab-node1": "mol-slurm-1", "lab-node2": "mol-slurm-2"}
    assert N.node_problems(sorted(ALIASES), found, ALIASES) == []
    assert N.node_problems(sorted(ALIASES), found, ALIASES, partition="train") == []


def test_node_problems_name_the_host_and_the_drain_reason() -> None:
    nodes = (
        fixture("scontrol_show_nodes_idle.txt").splitlines()[0]
        + "\n"
        + fixture("scontrol_show_node_drained_by_check.txt")
    )
    aliases = {**ALIASES, "lab-node3": ["lab-node3", "10.0.0.3"]}
    found = N.node_map(nodes, aliases)
    assert N.node_problems(["lab-node1", "lab-node2", "lab-node3"], found, aliases, partition="gpu") == [
        "lab-node1: Slurm node mol-slurm-1 is not in partition gpu (its partitions: train)",
        "lab-node2: Slurm node mol-slurm-2 is not in partition gpu (its partitions: train)",
        "lab-node2: Slurm node mol-slurm-2 is IDLE+DRAIN: rdma-node-check: test failure [root@2026-11-26T13:06:53]"
        " (the job would wait until it returns)",
        "lab-node3: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of lab-node3, 10.0.0.3)",
    ]


@pytest.mark.parametrize(
    ("state", "words"),
    [("IDLE", ["IDLE"]), ("IDLE+DRAIN", ["IDLE", "DRAIN"]), ("DOWN*", ["DOWN", "NOT_RESPONDING"])],
)
def test_node_words(state, words) -> None:
    assert N.node_words({"State": state}) == words


def test_aliases_are_the_names_slurm_may_know_a_host_by() -> None:
    hostvars = {
        "lab-node1.example": {
            "__train_launch_reg_hostname": {"stdout": "node1\n"},
            "ansible_host": "192.0.2.1",
            "__train_launch_fabric_ip": "10.0.0.1",
        }
    }
    assert N.aliases(["lab-node1.example"], hostvars) == {
        "lab-node1.example": ["node1", "lab-node1.example", "lab-node1", "192.0.2.1", "10.0.0.1"]
    }


def test_a_second_launch_of_a_run_still_queued_is_refused_naming_the_job() -> None:
    problems = N.queue_problems(Q.parse_queue(fixture("squeue_name.txt")), "run1")
    assert problems[0] == (
        "Slurm job 7 of run run1 is still PENDING (Resources): stop it first (playbooks/train_stop.yml -e run_id=run1)"
    )
    assert len(problems) == 2 and N.queue_problems([], "run1") == []


# ------------------------------------------------------------------------------------------- the topology


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("mol-slurm-[1-2]", ["mol-slurm-1", "mol-slurm-2"]),
        ("n[01-03,7],login", ["n01", "n02", "n03", "n7", "login"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("", []),
    ],
)
def test_expand_hostlist(text, names) -> None:
    assert N.expand_hostlist(text) == names


def test_the_topology_slurm_reports_against_the_inventorys() -> None:
    reported = fixture("scontrol_show_topology_leaf_spine.txt")
    assert N.parse_topology(reported) == {
        "lab-leaf1": {"nodes": ["mol-slurm-1"], "switches": []},
        "lab-leaf2": {"nodes": ["mol-slurm-2"], "switches": []},
        "lab-spine1": {"nodes": [], "switches": ["lab-leaf1", "lab-leaf2"]},
    }
    conf = [
        "SwitchName=lab-leaf1 Nodes=mol-slurm-1",
        "SwitchName=lab-leaf2 Nodes=mol-slurm-2",
        "SwitchName=lab-spine1 Switches=lab-leaf[1-2]",
    ]
    assert N.topology_differences(conf, reported) == []
    moved = ["SwitchName=lab-leaf1 Nodes=mol-slurm-[1-2]", "SwitchName=lab-spine1 Switches=lab-leaf1"]
    assert N.topology_differences(moved, reported) == [
        "lab-leaf1: nodes mol-slurm-1 in Slurm, mol-slurm-1,mol-slurm-2 from the inventory",
        "Slurm has switch lab-leaf2, which the inventory's switches do not give",
        "lab-spine1: switches lab-leaf1,lab-leaf2 in Slurm, lab-leaf1 from the inventory",
    ]
    assert N.topology_differences(conf, fixture("scontrol_show_topology_none.txt")) == [
        f"switch {sw} is missing in Slurm's topology" for sw in ("lab-leaf1", "lab-leaf2", "lab-spine1")
    ]
