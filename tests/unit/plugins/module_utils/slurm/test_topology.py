"""topology.conf from the switches' RoCE ports (plugins/module_utils/slurm/topology.py), on the lab's fabric plans."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.topology import topology

from lab import cluster as lab

pytestmark = pytest.mark.lint


def lab_fabric(n: int, leaves: int, spines: int) -> tuple[dict, list[str], dict]:
    """The lab's own leaf-spine plan (lab/cluster.py fabric_plan, what `lab up --leaves --spines` writes)."""
    nodes = [lab.Node(i) for i in range(1, n + 1)]
    plan = lab.fabric_plan(nodes, leaves, spines)
    ports = {sw.name: [*sw.host_interfaces, *sw.uplink_interfaces] for sw in plan}
    names = {x.name: x.name for x in nodes} | {sw.name: sw.name for sw in plan}
    return ports, [x.name for x in nodes], names


def test_topology_of_the_lab_leaf_spine_fabric() -> None:
    ports, nodes, names = lab_fabric(4, 2, 1)
    got = topology(ports, nodes, names, {n: n.replace("lab-", "") for n in nodes})
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
    same = topology(ports, nodes, names, {n: n for n in nodes})
    assert topology(keyed, nodes, names, {n: n for n in nodes}) == same and same["unplaced"] == []


def test_topology_with_two_spines_lists_the_leaves_under_each() -> None:
    ports, nodes, names = lab_fabric(5, 2, 2)
    got = topology(ports, nodes, names, {n: n for n in nodes})
    assert got["lines"] == [
        "SwitchName=lab-leaf1 Nodes=lab-node1,lab-node3,lab-node5",
        "SwitchName=lab-leaf2 Nodes=lab-node2,lab-node4",
        "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
        "SwitchName=lab-spine2 Switches=lab-leaf1,lab-leaf2",
    ]


def test_leaves_without_a_spine_are_separate_trees_and_the_run_says_so() -> None:
    ports, nodes, names = lab_fabric(2, 2, 0)
    got = topology(ports, nodes, names, {n: n for n in nodes})
    assert got["lines"] == ["SwitchName=lab-leaf1 Nodes=lab-node1", "SwitchName=lab-leaf2 Nodes=lab-node2"]
    assert got["notes"] == ["the switches form 2 separate trees: a job spans the nodes of one only (topology.conf(5))"]


def test_one_switch_holds_every_node_even_with_undescribed_ports() -> None:
    """The lab's single switch: ports Ethernet1/N without descriptions (inventory/lab/group_vars/switches)."""
    ports = {"lab-switch": [{"name": "Ethernet1/1"}, {"name": "Ethernet1/2"}]}
    got = topology(ports, ["lab-node1", "lab-node2"], {}, {"lab-node1": "lab-node1", "lab-node2": "lab-node2"})
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
    got = topology(ports, nodes, names, {n: n for n in nodes})
    assert got["unplaced"] == ["lab-node4"]
    assert got["lines"][0] == "SwitchName=lab-leaf1 Nodes=lab-node1,lab-node3"
    assert got["notes"] == ["lab-node1 is on lab-leaf1 and lab-leaf2: placed on lab-leaf1"]


def test_no_switch_no_topology() -> None:
    assert topology({}, ["n1"], {}, {"n1": "n1"}) == {
        "lines": [],
        "unplaced": [],
        "notes": ["no switch in the inventory: no topology.conf"],
    }
