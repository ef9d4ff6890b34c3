"""Which hosts remove.yml may remove (plugins/module_utils/lifecycle/remove.py), and the inventory of their reset."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle import remove

GROUPS = {
    "rdma_nodes": ["n1", "n2"],
    "removed_nodes": ["n3"],
    "slurm_controllers": ["n1"],
    "monitoring": ["n2"],
    "subnet_managers": ["n1"],
}


def test_a_node_moved_to_removed_nodes_may_go() -> None:
    assert remove.problems(["n3"], GROUPS) == []


@pytest.mark.parametrize(
    ("groups", "rdzv", "why"),
    [
        ({**GROUPS, "rdma_nodes": ["n1", "n2", "n3"]}, (), "n3 is still in rdma_nodes: move it out of that group"),
        ({**GROUPS, "slurm_controllers": ["n3"]}, (), "n3 is the Slurm controller"),
        ({**GROUPS, "monitoring": ["n3"]}, (), "n3 is the monitoring host"),
        ({**GROUPS, "subnet_managers": ["n3"]}, (), "n3 runs the subnet manager (OpenSM)"),
        (GROUPS, ("n3",), "n3 is the rendezvous host (train_launch_rdzv_host)"),
        ({**GROUPS, "rdma_nodes": []}, (), "no node would be left in rdma_nodes"),
    ],
)
def test_a_host_the_cluster_cannot_lose_is_refused_naming_it(groups, rdzv, why) -> None:
    found = remove.problems(["n3"], groups, rdzv)
    assert len(found) == 1 and found[0].startswith(why), found


def test_nothing_to_remove_is_refused_and_every_problem_is_listed() -> None:
    assert remove.problems([], GROUPS)[0].startswith("no host to remove: move each node to remove")
    both = remove.problems(["n2", "n1"], {**GROUPS, "rdma_nodes": ["n1", "n2"]})
    assert [line.split()[0] for line in both] == ["n1", "n1", "n1", "n2", "n2", "no"], both


def test_the_reset_inventory_puts_the_removed_nodes_in_rdma_nodes() -> None:
    assert remove.reset_inventory(["n4", "n3"]) == {
        "all": {"children": {"rdma_nodes": {"hosts": {"n3": None, "n4": None}}}}
    }
