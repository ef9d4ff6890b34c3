"""The inventory contract's fabric rules (plugins/module_utils/contract/fabric.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import Inventory

from tests.unit.plugins.module_utils.contract.inventories import (
    Change,
    both,
    cases,
    good,
    iface,
    infiniband,
    node,
    reports,
    setif,
    setv,
)

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "no-prefix",
        setif("addresses", ["192.168.250.201"]),
        [
            "n1: cluster_fabric_interfaces[ens192].addresses has '192.168.250.201', which is not a host address "
            "with a prefix length such as 192.168.250.201/24"
        ],
    ),
    (
        "network-address",
        setif("addresses", ["192.168.250.0/24"]),
        [
            "n1: cluster_fabric_interfaces[ens192].addresses has '192.168.250.0/24', which is not a host address "
            "with a prefix length such as 192.168.250.201/24"
        ],
    ),
    (
        "duplicate-address",
        setif("addresses", ["192.168.250.202/24"]),
        [
            "n1: cluster_fabric_interfaces has fabric address 192.168.250.202, also on n2",
            "n2: cluster_fabric_interfaces has fabric address 192.168.250.202, also on n1",
        ],
    ),
    (
        "mtu-too-big",
        setif("mtu", 100000),
        ["n1: cluster_fabric_interfaces[ens192].mtu 100000 must lie within 576-9216 (ethernet)"],
    ),
    (
        "mtu-not-a-number",
        setif("mtu", "jumbo"),
        ["n1: cluster_fabric_interfaces[ens192].mtu 'jumbo' must lie within 576-9216 (ethernet)"],
    ),
    (
        "mtu-ipv6-below-1280",
        both(setif("mtu", 1000), setif("addresses", ["192.168.250.201/24", "fd00::1/64"])),
        ["n1: cluster_fabric_interfaces[ens192].mtu 1000 must lie within 1280-9216 (ethernet, IPv6)"],
    ),
    (
        "ipoib-datagram-mtu-too-big",
        both(infiniband, setif("mtu", 65520), setv("sw", "nxos_roce_qos_mtu", 9216)),
        ["n1: cluster_fabric_interfaces[ens192].mtu 65520 must lie within 576-4092 (infiniband, IPoIB datagram mode)"],
    ),
    (
        "ipoib-mode-on-ethernet",
        setif("ipoib_mode", "connected"),
        [
            "n1: cluster_fabric_interfaces[ens192].ipoib_mode must be datagram or connected, and only on an "
            "infiniband fabric (got 'connected' on ethernet)"
        ],
    ),
    (
        "misspelt-interface-key",
        setif("mut", 9000),
        [
            "n1: cluster_fabric_interfaces[ens192] has unknown key(s) mut (known: name, addresses, mtu, routes, nameservers, ipoib_mode)"
        ],
    ),
    (
        "bad-interface-name",
        setif("name", "ens192; reboot"),
        [
            "n1: cluster_fabric_interfaces[ens192; reboot].name must be a Linux interface name (at most 15 of A-Za-z0-9_.-), got 'ens192; reboot'"
        ],
    ),
    (
        "no-addresses",
        setif("addresses", []),
        [
            "n1: cluster_fabric_interfaces[ens192].addresses must list at least one address in CIDR form (192.168.250.201/24)"
        ],
    ),
    (
        "route-via-off-subnet",
        setif("routes", [{"to": "192.168.251.0/24", "via": "10.0.0.1"}]),
        [
            "n1: cluster_fabric_interfaces[ens192].routes has route to '192.168.251.0/24' via '10.0.0.1': 'via' must be an address inside one of 192.168.250.201/24 (not the host's own)"
        ],
    ),
    (
        "route-to-default",
        setif("routes", [{"to": "default", "via": "192.168.250.10"}]),
        [
            "n1: cluster_fabric_interfaces[ens192].routes has route to 'default' via '192.168.250.10': a default route over the fabric would take the management path; list the remote fabric networks instead"
        ],
    ),
    (
        "route-to-not-a-network",
        setif("routes", [{"to": "192.168.251.1/24", "via": "192.168.250.10"}]),
        [
            "n1: cluster_fabric_interfaces[ens192].routes has route to '192.168.251.1/24' via '192.168.250.10': 'to' must be a network in CIDR form (192.168.251.0/24)"
        ],
    ),
    (
        "route-metric-negative",
        setif("routes", [{"to": "192.168.251.0/24", "via": "192.168.250.10", "metric": -1}]),
        [
            "n1: cluster_fabric_interfaces[ens192].routes has route to '192.168.251.0/24' via '192.168.250.10': 'metric' must be a non-negative integer"
        ],
    ),
    (
        "route-family-mix",
        setif("routes", [{"to": "fd01::/64", "via": "192.168.250.10"}]),
        [
            "n1: cluster_fabric_interfaces[ens192].routes has route to 'fd01::/64' via '192.168.250.10': 'to' and 'via' are of different address families"
        ],
    ),
    (
        "resolver-not-an-ip",
        setif("nameservers", {"addresses": ["dns.example"]}),
        ["n1: cluster_fabric_interfaces[ens192].nameservers.addresses has 'dns.example', which is not an IP address"],
    ),
    (
        "fabric-address-ipv6",
        both(setif("addresses", ["fd00::1/64"]), setif("routes", [])),
        [
            "n1: cluster_fabric_interfaces[ens192].addresses starts with fd00::1/64: the fabric address (first address of the first interface) must be IPv4; IPv6 addresses may follow it",
            "n1: cluster_fabric_interfaces reaches no subnet or route holding n2's fabric address 192.168.250.202: put it on a shared subnet or add a route",
        ],
    ),
    (
        "fabric-address-outside-subnet",
        setif("addresses", ["192.168.252.201/24"], host="n2"),
        [
            "n2: cluster_fabric_interfaces[ens192].routes has route to '192.168.251.0/24' via '192.168.250.10': 'via' must be an address inside one of 192.168.252.201/24 (not the host's own)",
            "n1: cluster_fabric_interfaces reaches no subnet or route holding n2's fabric address 192.168.252.201: put it on a shared subnet or add a route",
            "n2: cluster_fabric_interfaces reaches no subnet or route holding n1's fabric address 192.168.250.201: put it on a shared subnet or add a route",
        ],
    ),
    (
        "fabric-on-management-network",
        both(setif("addresses", ["192.168.48.201/22"]), setif("routes", [])),
        [
            "n1: cluster_fabric_interfaces[ens192].addresses has 192.168.48.201/22, whose subnet holds the management address (ansible_host) of n1, n2, sw: the fabric must not overlap the management network",
            "n1: cluster_fabric_interfaces reaches no subnet or route holding n2's fabric address 192.168.250.202: put it on a shared subnet or add a route",
            "n2: cluster_fabric_interfaces reaches no subnet or route holding n1's fabric address 192.168.48.201: put it on a shared subnet or add a route",
        ],
    ),
    (
        "duplicate-hostname",
        setv("n2", "common_hostname", "n1"),
        ["n1: common_hostname 'n1' is also the hostname of n2", "n2: common_hostname 'n1' is also the hostname of n1"],
    ),
    (
        "duplicate-management-address",
        setv("n2", "ansible_host", "192.168.48.175"),
        [
            "n1: ansible_host 192.168.48.175 (port 22) is also the management address of n2: each node is one machine",
            "n2: ansible_host 192.168.48.175 (port 22) is also the management address of n1: each node is one machine",
        ],
    ),
    (
        "duplicate-rank",
        setv("n2", "cluster_node_rank", 0),
        ["n1: cluster_node_rank 0 is also the rank of n2", "n2: cluster_node_rank 0 is also the rank of n1"],
    ),
    (
        "rank-out-of-range",
        setv("n2", "cluster_node_rank", 2),
        ["n2: cluster_node_rank 2 must lie within 0-1 (2 nodes in rdma_nodes)"],
    ),
    (
        "infiniband-without-subnet-manager",
        both(infiniband, lambda inv: inv.groups.__setitem__("subnet_managers", [])),
        ["inventory: group subnet_managers is empty: an InfiniBand fabric needs a subnet manager"],
    ),
    (
        "netplan-revert-before-reconnect",
        setv("n1", "rdma_netplan_revert_after", 60),
        ["n1: rdma_netplan_revert_after 60 must exceed rdma_netplan_connect_timeout (60) or be 0 (off)"],
    ),
]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(setif("mtu", 65520), id="ipoib-connected-65520"),
        pytest.param(setif("mtu", 4092), id="ipoib-datagram-4092"),
    ],
)
def test_infiniband_connected_mode_is_accepted(change) -> None:
    inv = good()
    infiniband(inv)
    for h in ("n1", "n2"):
        iface(inv, h)["ipoib_mode"] = "connected"
    change(inv)
    assert [str(p) for p in check(inv)] == []


def test_ipv6_after_the_fabric_address_is_accepted() -> None:
    inv = good()
    iface(inv)["addresses"].append("fd00::201/64")
    assert [str(p) for p in check(inv)] == []


def rails(order: dict[str, list[str]]) -> Change:
    """More fabric interfaces per node (a NIC per GPU): rail r on 10.20.<r>.0/24, in the given order per host."""

    def change(inv: Inventory) -> None:
        for host, nets in order.items():
            last = iface(inv, host)["addresses"][0].split(".")[3].split("/")[0]
            ifaces = inv.hostvars[host]["cluster_fabric_interfaces"]
            ifaces += [
                {"name": f"ens{192 + 32 * (len(ifaces) + i)}", "addresses": [f"10.20.{net}.{last}/24"], "mtu": 9000}
                for i, net in enumerate(nets)
            ]

    return change


def test_rails_that_meet_by_position_pass() -> None:
    inv = good()
    rails({"n1": ["1", "2"], "n2": ["1", "2"]})(inv)
    assert [str(p) for p in check(inv)] == []


SAME_RAILS = "every node needs the same rails, in the same order (NCCL's rail-aligned rings and the pair tests meet rail i with rail i)"


def third_node(inv: Inventory) -> None:
    inv.groups["rdma_nodes"].append("n3")
    inv.hostvars["n3"] = node("192.168.250.203/24", "192.168.48.177", 2, hostname="n3")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            rails({"n1": ["1"]}),
            [f"n1: cluster_fabric_interfaces[ens224] is rail 2, which n2 lacks: {SAME_RAILS}"],
            id="a-rail-on-one-of-two-nodes",
        ),
        pytest.param(
            both(third_node, rails({"n1": ["1"], "n2": ["1"]})),
            [
                f"n3: cluster_fabric_interfaces lacks rail 2 (n1 cluster_fabric_interfaces[ens224], n2 cluster_fabric_interfaces[ens224]): {SAME_RAILS}"
            ],
            id="a-node-without-a-rail-the-others-have",
        ),
        pytest.param(
            both(third_node, rails({"n1": ["1", "2"], "n2": ["1"], "n3": ["1"]})),
            [f"n1: cluster_fabric_interfaces[ens256] is rail 3, which n2, n3 lack: {SAME_RAILS}"],
            id="a-third-rail-on-one-of-three-nodes",
        ),
    ],
)
def test_a_rail_some_nodes_lack_is_refused(change, expected) -> None:
    """A rail one node has alone (or lacks alone): NCCL's rings and the ladder would meet it with nothing."""
    assert reports(change) == expected


def test_rails_listed_in_another_order_on_one_node_are_refused() -> None:
    inv = good()
    rails({"n1": ["1", "2"], "n2": ["2", "1"]})(inv)
    why = "must share a subnet (or a route), as the pair tests and NCCL's rail-aligned rings meet rail i with rail i"
    assert [str(p) for p in check(inv)] == [
        f"n1: cluster_fabric_interfaces[ens224].addresses (rail 2) reaches no subnet or route holding n2's rail 2 "
        f"address 10.20.2.202: rail 2 of every node {why}",
        f"n1: cluster_fabric_interfaces[ens256].addresses (rail 3) reaches no subnet or route holding n2's rail 3 "
        f"address 10.20.1.202: rail 3 of every node {why}",
        f"n2: cluster_fabric_interfaces[ens224].addresses (rail 2) reaches no subnet or route holding n1's rail 2 "
        f"address 10.20.1.201: rail 2 of every node {why}",
        f"n2: cluster_fabric_interfaces[ens256].addresses (rail 3) reaches no subnet or route holding n1's rail 3 "
        f"address 10.20.2.201: rail 3 of every node {why}",
    ]
    # a route on the rail to the peer's rail subnet is a way to meet it (routed rails)
    for host, other in (("n1", "2"), ("n2", "1")):
        ens224 = inv.hostvars[host]["cluster_fabric_interfaces"][1]
        ens224["routes"] = [{"to": f"10.20.{other}.0/24", "via": ens224["addresses"][0].rsplit(".", 1)[0] + ".1"}]
    assert [str(p) for p in check(inv) if "(rail 2)" in str(p)] == []


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected
