"""The fabric firewall's plan (module_utils/host/firewall.py): the cluster's fabric networks as sources, this node's
fabric addresses and interfaces as the guarded ones, the project's ports sorted once."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.firewall import fabric_firewall_plan

NODE1 = [
    {
        "name": "rdma0",
        "addresses": ["10.77.250.11/24", "fd00:77::11/64"],
        "routes": [{"to": "10.77.252.0/24", "via": "10.77.250.1"}],
    },
    {"name": "rdma1", "addresses": ["10.77.251.11/24"]},
]
NODE2 = [{"name": "rdma0", "addresses": ["10.77.250.12/24"]}, {"name": "rdma1", "addresses": ["10.77.251.12/24"]}]


def test_sources_are_every_nodes_subnets_and_routes_and_the_guarded_addresses_this_nodes() -> None:
    plan = fabric_firewall_plan([NODE1, NODE2], NODE1, ["29500", 29499, 18515, 18516, 29500])
    assert plan == {
        "fabric_v4": ["10.77.250.0/24", "10.77.252.0/24", "10.77.251.0/24"],
        "fabric_v6": ["fd00:77::/64"],
        "local_v4": ["10.77.250.11", "10.77.251.11"],
        "local_v6": ["fd00:77::11"],
        "interfaces": ["rdma0", "rdma1"],
        "ports": [18515, 18516, 29499, 29500],
        "scrape_ports": [],
        "scrape_v4": [],
        "scrape_v6": [],
    }
    # A node with another subnet (a routed leaf) adds its own as a source for everyone.
    other = [{"name": "ens1", "addresses": ["10.88.0.5/24"]}]
    assert "10.88.0.0/24" in fabric_firewall_plan([NODE1, NODE2, other], NODE2, [])["fabric_v4"]


@pytest.mark.parametrize(
    ("own", "ports", "error"),
    [
        ([], [29500], "no fabric interface with an IPv4 address"),
        ([{"name": "rdma0", "addresses": ["fd00::1/64"]}], [29500], "no fabric interface with an IPv4 address"),
        (NODE2, [0], "port 0 must be an integer 1-65535"),
        (NODE2, ["ssh"], "port 'ssh' must be an integer 1-65535"),
        ([{"name": "rdma0", "addresses": ["not-an-address"]}], [], "is not an address"),
    ],
)
def test_what_cannot_be_rendered_is_refused(own, ports, error) -> None:
    with pytest.raises(RuleError, match=error):
        fabric_firewall_plan([NODE1, NODE2], own, ports)


def test_with_monitoring_the_exporters_answer_the_monitoring_hosts_only() -> None:
    plan = fabric_firewall_plan([NODE1, NODE2], NODE2, [29500], [9100, "9100"], ["10.77.0.11", "[fd00:77::5]"])
    assert (plan["scrape_ports"], plan["scrape_v4"], plan["scrape_v6"]) == ([9100], ["10.77.0.11"], ["fd00:77::5"])


@pytest.mark.parametrize(
    ("scrape_ports", "sources", "error"),
    [
        ([9100], [], "would answer nobody"),
        ([9100], ["lab-node1"], "'lab-node1' is no IP address"),
        ([29500], ["10.77.0.11"], "port 29500 is both a fabric-only port and an exporter's"),
        ([70000], ["10.77.0.11"], "port 70000 must be an integer 1-65535"),
    ],
)
def test_exporter_guards_that_cannot_be_rendered_are_refused(scrape_ports, sources, error) -> None:
    with pytest.raises(RuleError, match=error):
        fabric_firewall_plan([NODE1, NODE2], NODE2, [29500], scrape_ports, sources)
