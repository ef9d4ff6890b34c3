"""The lab's shape without starting it: `lab up --rails R` gives every host R fabric NICs, each on a network of its
own and listed in the lab inventory, which the validation ladder then pings and measures rail by rail."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing

from lab import cluster


def test_rails_in_the_inventory_and_on_the_hosts() -> None:
    nodes = [cluster.Node(1), cluster.Node(2)]
    inventory = yaml.safe_load(cluster.inventory_text(nodes, None, rails=2))
    hosts = inventory["all"]["children"]["rdma_nodes"]["hosts"]
    assert hosts["lab-node2"]["cluster_fabric_interfaces"] == [
        {"name": "rdma0", "addresses": ["10.77.250.12/24"], "mtu": 9000},
        {"name": "rdma1", "addresses": ["10.77.251.12/24"], "mtu": 9000},
    ]
    # One rail: the lab as it always was.
    single = yaml.safe_load(cluster.inventory_text(nodes, None))["all"]["children"]["rdma_nodes"]["hosts"]
    assert [i["name"] for i in single["lab-node1"]["cluster_fabric_interfaces"]] == ["rdma0"]
    # Each rail's NIC on its own network, named as the inventory names it; the shape is labelled, so `lab up`
    # with another number of rails starts the host again.
    args = cluster.node_run_args(nodes[0], rails=2)
    networks = [args[i + 1] for i, a in enumerate(args) if a == "--network"]
    # Each NIC's address fixed (a restarted host keeps it, as a server's NIC does), one per host and rail.
    assert networks == [f"{cluster.MGMT_NET}:ip=10.77.0.11",
                        "rdmalab-fabric:interface_name=rdma0,mac=02:72:6c:00:00:01",
                        "rdmalab-fabric2:interface_name=rdma1,mac=02:72:6c:01:00:01"]  # fmt: skip
    macs = {cluster.Node(i).rail_mac(r) for i in range(1, 300) for r in range(4)}
    assert len(macs) == 299 * 4 and all(int(m.split(":")[0], 16) & 0b11 == 0b10 for m in macs)  # local, unicast
    assert f"{cluster.RAILS_LABEL}=2" in args
    assert f"--cpu-shares={cluster.NODE_CPU_SHARES}" in args  # ahead of the Molecule queue's containers
    # The ladder's rails of that inventory: lab-node1 pings lab-node2 on both, the second from its own rail.
    rails = {h: pairing.fabric_rails(v["cluster_fabric_interfaces"]) for h, v in hosts.items()}
    assert json.loads(pairing.ping_targets(rails, "lab-node1")) == [
        {"peer": "lab-node2", "address": "10.77.250.12"},
        {"peer": "lab-node2/rdma1", "address": "10.77.251.12", "source": "10.77.251.11"},
    ]


@pytest.mark.parametrize("rails", [0, cluster.MAX_RAILS + 1])
def test_rails_out_of_range_are_refused_before_anything_starts(rails: int) -> None:
    with pytest.raises(SystemExit, match=f"--rails must be 1..{cluster.MAX_RAILS}, got {rails}"):
        cluster.up(2, rails=rails)


def test_slurm_controller_in_the_lab_inventory() -> None:
    """Slurm on by default (the first node is the controller); `lab up --no-slurm` leaves the group empty, so
    playbooks/slurm.yml matches no host."""
    nodes = [cluster.Node(1), cluster.Node(2)]
    on = yaml.safe_load(cluster.inventory_text(nodes, 2222))["all"]["children"]["slurm_controllers"]
    off = yaml.safe_load(cluster.inventory_text(nodes, 2222, slurm=False))["all"]["children"]["slurm_controllers"]
    assert on == {"hosts": {"lab-node1": None}} and off == {"hosts": {}}
