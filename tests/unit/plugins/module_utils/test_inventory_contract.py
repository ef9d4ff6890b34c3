"""The inventory contract (plugins/module_utils/inventory_contract.py) as pure-Python tables.

Every bad inventory below is the valid field cluster (inventory/example, values as the action plugin
hands them over: role defaults under the inventory's values) with one change; the validator must return
exactly the listed errors, each naming host and variable. Fast: no Ansible run here (test_preflight.py
runs the real play).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils import inventory_contract as C
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node_check import DEFAULTS as NODE_CHECK_DEFAULTS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import nxos_roce_qos_validate

from tests.conftest import ROOT

pytestmark = pytest.mark.lint


# The example's group_vars/all/qos.yml (CNPs on CoS 2: a 4-queue switch), read from there.
CLUSTER_QOS = yaml.safe_load((ROOT / "inventory" / "example" / "group_vars" / "all" / "qos.yml").read_text())


def node(addr: str, mgmt: str, rank: int, **kw) -> dict:
    iface = {
        "name": "ens192",
        "addresses": [addr],
        "mtu": 9000,
        "routes": [{"to": "192.168.251.0/24", "via": "192.168.250.10"}],
        "nameservers": {"addresses": ["8.8.8.8", "8.8.4.4"]},
    }
    return {
        "ansible_host": mgmt,
        "cluster_fabric_interfaces": [iface],
        "cluster_rdma_devices": ["rocep11s0"],
        "cluster_node_rank": rank,
        "cluster_link_layer": "ethernet",
        "rdma_stack_link_layer": "ethernet",
        **CLUSTER_QOS,
        "common_hostname": mgmt and kw.pop("hostname"),
        "rdma_netplan_file": "/etc/netplan/60-rdma-llm-fabric.yaml",
        "rdma_modules_list": ["ib_umad", "ib_core", "rdma_cm"],
        "rdma_stack_opensm_priority": 15,
        "rdma_stack_opensm_ports": "ALL",
        "rdma_netplan_connect_timeout": 60,
        "rdma_netplan_revert_after": 180,
        # rdma_qos defaults as templated from the example's group_vars/all/qos.yml (CNPs on CoS 2: a 4q switch).
        "rdma_qos_profile": "dcqcn",
        "rdma_qos_roce_dscp": 26,
        "rdma_qos_cnp_dscp": 48,
        "rdma_qos_tcp_dscp": 10,
        "rdma_qos_pfc_priority": 3,
        "rdma_qos_cnp_priority": 2,
        "rdma_qos_tcp_priority": 1,
        "rdma_qos_roce_bandwidth_percent": 50,
        "rdma_qos_tcp_bandwidth_percent": 25,
        "rdma_qos_default_bandwidth_percent": 25,
        "rdma_qos_tcp_lossless": False,
        "rdma_qos_nccl_ib_qps_per_connection": 1,
        "rdma_qos_mark_networks": {"ipv4": ["192.168.250.0/24", "192.168.251.0/24"], "ipv6": []},
        **kw,
    }


SWITCH = {
    "ansible_host": "192.168.48.10",
    "ansible_user": "admin",
    "ansible_password": "secret",
    **CLUSTER_QOS,
    "nxos_roce_qos_roce_dscp": [26],
    "nxos_roce_qos_cnp_dscp": 48,
    "nxos_roce_qos_nodrop_cos": 3,
    "nxos_roce_qos_cnp_qos_group": 2,
    "nxos_roce_qos_queue_scheme": "4q",
    "nxos_roce_qos_mtu": 9216,
    "nxos_roce_qos_roce_bandwidth_percent": 50,
    "nxos_roce_qos_default_bandwidth_percent": 25,
    # The switch's fabric TCP class and profile (names agreed with the switch role, which renders them).
    "nxos_roce_qos_profile": "dcqcn",
    "nxos_roce_qos_tcp_dscp": 10,
    "nxos_roce_qos_tcp_qos_group": 1,
    "nxos_roce_qos_tcp_bandwidth_percent": 25,
    "nxos_roce_qos_ecn_min_threshold_kbytes": 150,
    "nxos_roce_qos_ecn_max_threshold_kbytes": 3000,
    "nxos_roce_qos_interfaces": [{"name": "Ethernet1/1/1"}, {"name": "Ethernet1/1/2", "description": "rank 1"}],
    "nxos_roce_qos_roce_class": "RDMA",
    "nxos_roce_qos_checkpoint_file": "bootflash:nxos_roce_qos.ckpt",
    # The rest of the rendered values, as the role's defaults hand them over.
    "nxos_roce_qos_tcp_lossless": False,
    "nxos_roce_qos_ecn_drop_probability": 7,
    "nxos_roce_qos_ecn_weight": 0,
    "nxos_roce_qos_ecn_thresholds_by_speed": {100000: {"min_kbytes": 150, "max_kbytes": 3000, "source": "Cisco"}},
    "nxos_roce_qos_port_speed": 100000,
    "nxos_roce_qos_cnp_class": "CNP",
    "nxos_roce_qos_tcp_class": "FABRIC_TCP",
    "nxos_roce_qos_marking_policy": "QOS_MARKING",
    "nxos_roce_qos_network_policy": "QOS_NETWORK",
    "nxos_roce_qos_queuing_policy": "QOS_QUEUING",
    "nxos_roce_qos_class_match": "match-any",
    "nxos_roce_qos_pfc_mode": "on",
    "nxos_roce_qos_pfc_cable_length_m": 100,
}


def good() -> C.Inventory:
    return C.Inventory(
        groups={"rdma_nodes": ["n1", "n2"], "subnet_managers": ["n1"], "switches": ["sw"], "ungrouped": []},
        hostvars={
            "n1": node("192.168.250.201/24", "192.168.48.175", 0, hostname="n1"),
            "n2": node("192.168.250.202/24", "192.168.48.176", 1, hostname="n2"),
            "sw": copy.deepcopy(SWITCH),
        },
    )


def iface(inv: C.Inventory, host: str = "n1") -> dict:
    return inv.hostvars[host]["cluster_fabric_interfaces"][0]


def on_all(name: str, value) -> Callable[[C.Inventory], None]:
    def change(inv: C.Inventory) -> None:
        for vars_ in inv.hostvars.values():
            vars_[name] = value

    return change


def setv(host: str, name: str, value) -> Callable[[C.Inventory], None]:
    return lambda inv: inv.hostvars[host].__setitem__(name, value)


def setif(key: str, value, host: str = "n1") -> Callable[[C.Inventory], None]:
    return lambda inv: iface(inv, host).__setitem__(key, value)


def infiniband(inv: C.Inventory) -> None:
    """The same cluster on InfiniBand: IPoIB datagram mode with a 2044 MTU (2K IB MTU)."""
    on_all("cluster_link_layer", "infiniband")(inv)
    on_all("rdma_stack_link_layer", "infiniband")(inv)
    for host in ("n1", "n2"):
        iface(inv, host)["mtu"] = 2044


def both(*changes: Callable[[C.Inventory], None]) -> Callable[[C.Inventory], None]:
    def change(inv: C.Inventory) -> None:
        for c in changes:
            c(inv)

    return change


def second_switch(inv: C.Inventory) -> None:
    inv.groups["switches"] = ["sw", "sw2"]
    inv.hostvars["sw2"] = copy.deepcopy(SWITCH) | {"ansible_host": "192.168.48.11"}


SHARES = "must add up to 100 (the egress shares of the RoCE, fabric TCP and default classes)"
TCP_NOT_ROCE = (
    "only RoCE may carry the no-drop class's DSCP (cluster_tcp_lossless: true marks fabric TCP with it instead)"
)

# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Callable[[C.Inventory], None], list[str]]] = [
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
        "no-interfaces",
        setv("n1", "cluster_fabric_interfaces", []),
        ["n1: cluster_fabric_interfaces must be a non-empty list of interfaces"],
    ),
    (
        "interfaces-missing",
        lambda inv: inv.hostvars["n1"].pop("cluster_fabric_interfaces"),
        ["n1: cluster_fabric_interfaces is required (see docs/design.md)"],
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
        "bad-hostname",
        setv("n1", "common_hostname", "node_1"),
        ["n1: common_hostname must be a hostname (letters, digits, '-', at most 63) (got 'node_1')"],
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
        "rank-not-a-number",
        setv("n2", "cluster_node_rank", "one"),
        ["n2: cluster_node_rank must be an integer >= 0 (got 'one')"],
    ),
    ("roce-dscp-64", on_all("cluster_roce_dscp", 64), ["all: cluster_roce_dscp must be an integer 0-63 (got 64)"]),
    (
        "qos-host-nodrop-differs-from-switch",
        setv("sw", "nxos_roce_qos_nodrop_cos", 1),
        [
            "all: rdma_qos_pfc_priority 3 differs from sw's nxos_roce_qos_nodrop_cos 1: host and switch must agree",
            "sw: nxos_roce_qos_tcp_qos_group must be a queue of the 4q scheme ([1, 2, 3]) other than the no-drop (1) and CNP (2) queues: fabric TCP is lossy, got 1",
        ],
    ),
    (
        "qos-host-cnp-class-differs-from-switch",
        setv("n2", "rdma_qos_cnp_priority", 7),
        ["n2: rdma_qos_cnp_priority 7 differs from sw's nxos_roce_qos_cnp_qos_group 2: host and switch must agree"],
    ),
    (
        "qos-host-dscp-not-classified",
        on_all("rdma_qos_roce_dscp", 24),
        ["all: rdma_qos_roce_dscp 24 is not classified by sw (nxos_roce_qos_roce_dscp [26])"],
    ),
    (
        "qos-host-cnp-dscp-equals-roce",
        on_all("rdma_qos_cnp_dscp", 26),
        [
            "all: rdma_qos_cnp_dscp 26 equals rdma_qos_roce_dscp: CNPs need their own DSCP",
            "all: rdma_qos_cnp_dscp 26 differs from sw's nxos_roce_qos_cnp_dscp 48: host and switch must agree",
        ],
    ),
    (
        "qos-host-cnp-priority-is-pfc",
        setv("n1", "rdma_qos_cnp_priority", 3),
        [
            "n1: rdma_qos_cnp_priority 3 equals rdma_qos_pfc_priority: CNPs need their own strict-priority class",
            "n1: rdma_qos_cnp_priority 3 differs from sw's nxos_roce_qos_cnp_qos_group 2: host and switch must agree",
        ],
    ),
    (
        "qos-mark-host-address",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": ["192.168.250.201/24"], "ipv6": []}),
        [
            "n1: rdma_qos_mark_networks ipv4: '192.168.250.201/24' is not an IPv4 network in CIDR notation (no host bits)"
        ],
    ),
    (
        "qos-mark-injection",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": ["10.0.0.0/8 } accept; {"], "ipv6": []}),
        [
            "n1: rdma_qos_mark_networks ipv4: '10.0.0.0/8 } accept; {' is not an IPv4 network in CIDR notation (no host bits)"
        ],
    ),
    (
        "qos-mark-family",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": [], "ipv6": ["10.0.0.0/8"]}),
        ["n1: rdma_qos_mark_networks ipv6: '10.0.0.0/8' is not an IPv6 network in CIDR notation (no host bits)"],
    ),
    (
        "qos-mark-shape",
        setv("n1", "rdma_qos_mark_networks", ["192.168.250.0/24"]),
        [
            "n1: rdma_qos_mark_networks must be {ipv4: [CIDR ...], ipv6: [CIDR ...]} of network addresses "
            "(got ['192.168.250.0/24'])"
        ],
    ),
    (
        "qos-host-priority-0",
        setv("n1", "rdma_qos_pfc_priority", 0),
        ["n1: rdma_qos_pfc_priority must be an integer 1-7 (got 0)"],
    ),
    (
        "qos-host-ets-not-100",
        both(on_all("rdma_qos_roce_bandwidth_percent", 40), setv("sw", "nxos_roce_qos_roce_bandwidth_percent", 40)),
        [
            f"all: rdma_qos_roce_bandwidth_percent 40 + rdma_qos_tcp_bandwidth_percent 25 + "
            f"rdma_qos_default_bandwidth_percent 25 {SHARES}",
            f"sw: nxos_roce_qos_roce_bandwidth_percent 40 + nxos_roce_qos_tcp_bandwidth_percent 25 + "
            f"nxos_roce_qos_default_bandwidth_percent 25 {SHARES}",
        ],
    ),
    (
        "qos-cluster-shares-not-100",
        on_all("cluster_tcp_bandwidth_percent", 30),
        [
            f"all: cluster_roce_bandwidth_percent 50 + cluster_tcp_bandwidth_percent 30 + "
            f"cluster_default_bandwidth_percent 25 {SHARES}"
        ],
    ),
    (
        # What a real run hands over: the role's and the switch's defaults repeat the cluster_* shares; one report.
        "qos-shares-inherited-reported-once",
        both(
            on_all("cluster_tcp_bandwidth_percent", 30),
            on_all("rdma_qos_tcp_bandwidth_percent", 30),
            setv("sw", "nxos_roce_qos_tcp_bandwidth_percent", 30),
        ),
        [
            f"all: cluster_roce_bandwidth_percent 50 + cluster_tcp_bandwidth_percent 30 + "
            f"cluster_default_bandwidth_percent 25 {SHARES}"
        ],
    ),
    (
        "qos-host-tcp-shares-differ-from-switch",
        both(on_all("rdma_qos_tcp_bandwidth_percent", 20), on_all("rdma_qos_default_bandwidth_percent", 30)),
        [
            "all: rdma_qos_tcp_bandwidth_percent 20 differs from sw's nxos_roce_qos_tcp_bandwidth_percent 25: host and "
            "switch must agree",
            "all: rdma_qos_default_bandwidth_percent 30 differs from sw's nxos_roce_qos_default_bandwidth_percent 25: "
            "host and switch must agree",
        ],
    ),
    (
        "qos-share-type",
        on_all("cluster_tcp_bandwidth_percent", 101),
        ["all: cluster_tcp_bandwidth_percent must be an integer 0-100 (got 101)"],
    ),
    (
        "qos-profile-choice",
        on_all("cluster_qos_profile", "lossless"),
        ["all: cluster_qos_profile must be one of dcqcn, pfc_only (got 'lossless')"],
    ),
    (
        "qos-host-profile-differs-from-switch",
        setv("sw", "nxos_roce_qos_profile", "pfc_only"),
        ["all: rdma_qos_profile dcqcn differs from sw's nxos_roce_qos_profile pfc_only: host and switch must agree"],
    ),
    (
        "qos-tcp-dscp-is-roce",
        on_all("cluster_tcp_dscp", 26),
        [f"all: cluster_tcp_dscp 26 equals cluster_roce_dscp: {TCP_NOT_ROCE}"],
    ),
    (
        # The role's and the switch's defaults repeat the clash of the cluster_* values: reported there, once.
        "qos-tcp-dscp-inherited-reported-once",
        both(on_all("cluster_tcp_dscp", 26), on_all("rdma_qos_tcp_dscp", 26), setv("sw", "nxos_roce_qos_tcp_dscp", 26)),
        [f"all: cluster_tcp_dscp 26 equals cluster_roce_dscp: {TCP_NOT_ROCE}"],
    ),
    (
        "qos-host-tcp-dscp-is-cnp",
        setv("n2", "rdma_qos_tcp_dscp", 48),
        [
            "n2: rdma_qos_tcp_dscp 48 equals rdma_qos_cnp_dscp: fabric TCP must not ride the CNPs' strict-priority "
            "class",
            "n2: rdma_qos_tcp_dscp 48 differs from sw's nxos_roce_qos_tcp_dscp 10: host and switch must agree",
        ],
    ),
    (
        "qos-switch-tcp-dscp-in-roce-list",
        both(setv("sw", "nxos_roce_qos_roce_dscp", [24, 26]), setv("sw", "nxos_roce_qos_tcp_dscp", 24)),
        # The switch's own rules refuse it (one report: the contract steps aside for a value they refuse).
        [
            "sw: nxos_roce_qos_tcp_dscp must be a DSCP value 0-63 other than the RoCE and CNP values (fabric TCP needs its own class), got 24"
        ],
    ),
    (
        "qos-host-tcp-dscp-type",
        setv("n1", "rdma_qos_tcp_dscp", 64),
        ["n1: rdma_qos_tcp_dscp must be an integer 0-63 (got 64)"],
    ),
    (
        "qos-tcp-cos-is-cnp",
        on_all("cluster_tcp_cos", 2),
        ["all: cluster_tcp_cos 2 equals cluster_cnp_cos: fabric TCP must not ride the CNPs' strict-priority class"],
    ),
    (
        "qos-host-tcp-priority-differs-from-switch",
        setv("n1", "rdma_qos_tcp_priority", 4),
        ["n1: rdma_qos_tcp_priority 4 differs from sw's nxos_roce_qos_tcp_qos_group 1: host and switch must agree"],
    ),
    (
        "qos-tcp-dscp-differs-per-host",
        setv("n1", "cluster_tcp_dscp", 12),
        ["all: cluster_tcp_dscp differs between hosts (10, 12): the switch and every node must use one value"],
    ),
    (
        "qos-tcp-lossless-type",
        on_all("cluster_tcp_lossless", "maybe"),
        ["all: cluster_tcp_lossless must be true or false (got 'maybe')"],
    ),
    (
        "qos-qps-per-connection-0",
        on_all("cluster_nccl_ib_qps_per_connection", 0),
        ["all: cluster_nccl_ib_qps_per_connection must be an integer 1-128 (got 0)"],
    ),
    (
        "qos-cnp-cos-differs",
        both(setv("n1", "cluster_cnp_cos", 2), setv("sw", "cluster_cnp_cos", 7)),
        ["all: cluster_cnp_cos differs between hosts (2, 7): the switch and every node must use one value"],
    ),
    (
        "cnp-equals-roce",
        on_all("cluster_cnp_dscp", 26),
        ["all: cluster_cnp_dscp 26 equals cluster_roce_dscp: CNPs need their own DSCP"],
    ),
    ("nodrop-cos-9", on_all("cluster_nodrop_cos", 9), ["all: cluster_nodrop_cos must be an integer 1-7 (got 9)"]),
    (
        "qos-differs-per-host",
        setv("n2", "cluster_roce_dscp", 24),
        ["all: cluster_roce_dscp differs between hosts (24, 26): the switch and every node must use one value"],
    ),
    (
        "link-layer-unknown",
        on_all("cluster_link_layer", "roce"),
        ["all: cluster_link_layer must be one of ethernet, infiniband (got 'roce')"],
    ),
    (
        "infiniband-without-subnet-manager",
        both(infiniband, lambda inv: inv.groups.__setitem__("subnet_managers", [])),
        ["inventory: group subnet_managers is empty: an InfiniBand fabric needs a subnet manager"],
    ),
    (
        "empty-node-group",
        lambda inv: inv.groups.__setitem__("rdma_nodes", []),
        [
            "inventory: group rdma_nodes has no hosts (a misspelt group name leaves it empty)",
            "n1: group subnet_managers holds a host that is not in rdma_nodes",
        ],
    ),
    (
        "subnet-manager-not-a-node",
        lambda inv: inv.groups.__setitem__("subnet_managers", ["sw"]),
        ["sw: group subnet_managers holds a host that is not in rdma_nodes"],
    ),
    (
        "host-in-no-group",
        lambda inv: inv.groups.__setitem__("ungrouped", ["n3"]),
        ["n3: groups puts the host in no group of the contract (rdma_nodes, subnet_managers, switches)"],
    ),
    (
        "module-name-injection",
        setv("n1", "rdma_modules_list", ["ib_umad", "mlx5_ib; reboot"]),
        ["n1: rdma_modules_list [1] must be a module name (a-z, 0-9, '_', '-') (got 'mlx5_ib; reboot')"],
    ),
    (
        "gpudirect-mode-word",
        setv("n1", "rdma_modules_gpudirect", "always"),
        ["n1: rdma_modules_gpudirect must be true, false or auto (got 'always')"],
    ),
    (
        "gpudirect-module-injection",
        setv("n1", "rdma_modules_gpudirect_list", ["nvidia_peermem\nreboot"]),
        [
            "n1: rdma_modules_gpudirect_list [0] must be a module name (a-z, 0-9, '_', '-') (got 'nvidia_peermem\\nreboot')"
        ],
    ),
    (
        "netplan-file-outside",
        setv("n1", "rdma_netplan_file", "/etc/fabric.yaml"),
        ["n1: rdma_netplan_file must be a .yaml file directly in /etc/netplan (got '/etc/fabric.yaml')"],
    ),
    (
        "opensm-priority-16",
        setv("n1", "rdma_stack_opensm_priority", 16),
        ["n1: rdma_stack_opensm_priority must be an integer 0-15 (got 16)"],
    ),
    (
        "opensm-ports-bad",
        setv("n1", "rdma_stack_opensm_ports", ["0x12"]),
        ["n1: rdma_stack_opensm_ports must be ALL or a list of 0x<16 hex digits> port GUIDs (got ['0x12'])"],
    ),
    (
        "netplan-revert-before-reconnect",
        setv("n1", "rdma_netplan_revert_after", 60),
        ["n1: rdma_netplan_revert_after 60 must exceed rdma_netplan_connect_timeout (60) or be 0 (off)"],
    ),
    (
        "switch-port-mtu-below-host",
        lambda inv: inv.hostvars["sw"]["nxos_roce_qos_interfaces"][0].__setitem__("mtu", 1500),
        [
            "sw: nxos_roce_qos_interfaces[Ethernet1/1/1].mtu 1500 is below the hosts' fabric MTU 9000 (n1 cluster_fabric_interfaces[ens192]): frames would be dropped"
        ],
    ),
    (
        "switch-class-mtu-below-host",
        setv("sw", "nxos_roce_qos_mtu", 4000),
        [
            "sw: nxos_roce_qos_mtu 4000 is below the hosts' fabric MTU 9000 (n1 cluster_fabric_interfaces[ens192]): no-drop frames would be discarded",
            "sw: nxos_roce_qos_interfaces[Ethernet1/1/1].mtu 4000 is below the hosts' fabric MTU 9000 (n1 cluster_fabric_interfaces[ens192]): frames would be dropped",
            "sw: nxos_roce_qos_interfaces[Ethernet1/1/2].mtu 4000 is below the hosts' fabric MTU 9000 (n1 cluster_fabric_interfaces[ens192]): frames would be dropped",
        ],
    ),
    (
        "switch-port-odd-mtu",
        lambda inv: inv.hostvars["sw"]["nxos_roce_qos_interfaces"][0].__setitem__("mtu", 9215),
        ["sw: nxos_roce_qos_interfaces Ethernet1/1/1: mtu must be an even number 576-9216, got 9215"],
    ),
    (
        "switch-port-name",
        lambda inv: inv.hostvars["sw"]["nxos_roce_qos_interfaces"][0].__setitem__("name", "eth1/1"),
        [
            "sw: nxos_roce_qos_interfaces item 0: name must be spelled as NX-OS prints it (Ethernet1/1 or Ethernet1/1/2), got 'eth1/1'"
        ],
    ),
    (
        "one-nic-on-two-switches",
        both(
            second_switch,
            setv("sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1/1", "description": "n1 ens192 RoCE"}]),
            setv("sw2", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/3", "peer": "n1", "peer_port": "ens192"}]),
        ),
        [
            "sw2: nxos_roce_qos_host_interfaces n1 ens192 is on sw Ethernet1/1/1 and on sw2 Ethernet1/3: one cable "
            "cannot end on two ports"
        ],
    ),
    (
        "port-peer-unknown",
        setv("sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1/1", "peer": "n9", "peer_port": "ens192"}]),
        ["sw: nxos_roce_qos_host_interfaces sw Ethernet1/1/1: peer 'n9' is no host or switch of the inventory"],
    ),
    (
        "port-peer-injection",
        setv(
            "sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1/1", "peer": "n1", "peer_port": "ens192\nreload"}]
        ),
        [
            "sw: nxos_roce_qos_interfaces Ethernet1/1/1: peer_port must be one word of letters, digits and ._:/@-, "
            "got 'ens192\\nreload'"
        ],
    ),
    (
        "switch-port-twice",
        setv("sw", "nxos_roce_qos_interfaces", [{"name": "Ethernet1/1"}, {"name": "Ethernet1/1"}]),
        ["sw: nxos_roce_qos_interfaces Ethernet1/1 is listed twice"],
    ),
    (
        "switch-cnp-in-roce",
        setv("sw", "nxos_roce_qos_roce_dscp", [26, 48]),
        ["sw: nxos_roce_qos_cnp_dscp must be a DSCP value 0-63 not in nxos_roce_qos_roce_dscp, got 48"],
    ),
    (
        "switch-queue-not-in-scheme",
        setv("sw", "nxos_roce_qos_cnp_qos_group", 7),
        ["sw: nxos_roce_qos_cnp_qos_group must be a queue of the 4q scheme ([1, 2, 3]), got 7"],
    ),
    (
        "switch-bandwidth-over-100",
        setv("sw", "nxos_roce_qos_default_bandwidth_percent", 60),
        [
            "sw: nxos_roce_qos_roce_bandwidth_percent (1-100) + nxos_roce_qos_tcp_bandwidth_percent (1-100) + nxos_roce_qos_default_bandwidth_percent (0-100) must be at most 100, got 50 + 25 + 60"
        ],
    ),
    (
        "switch-class-name",
        setv("sw", "nxos_roce_qos_roce_class", "RDMA CLASS"),
        [
            "sw: nxos_roce_qos_roce_class must be 1-40 characters [A-Za-z0-9_.-] starting with a letter, got 'RDMA CLASS'"
        ],
    ),
    (
        "switch-description-injection",
        lambda inv: inv.hostvars["sw"]["nxos_roce_qos_interfaces"][1].__setitem__(
            "description", "rank 1\nno system qos"
        ),
        [
            "sw: nxos_roce_qos_interfaces Ethernet1/1/2: description contains a line break (it would end the command and inject the rest as config)"
        ],
    ),
    (
        "node-health-unknown-threshold",
        setv("n1", "node_health_thresholds", {"xid_window": 3600}),
        ["n1: node_health_thresholds unknown thresholds xid_window (known: " + ", ".join(NODE_CHECK_DEFAULTS) + ")"],
    ),
    (
        "node-health-bad-threshold",
        on_all("node_health_thresholds", {"sw_power_cap": "fail"}),
        ["all: node_health_thresholds thresholds.sw_power_cap must be one of report, warn"],
    ),
    (
        "node-health-gpus-negative",
        setv("n2", "node_health_gpus", -1),
        ["n2: node_health_gpus must be an integer >= 0 (got -1)"],
    ),
    (
        "node-health-command-relative",
        setv("n1", "node_health_command", "rdma-node-check"),
        ["n1: node_health_command must be an absolute path (got 'rdma-node-check')"],
    ),
    (
        "firewall-guards-ssh",
        on_all("fabric_firewall_extra_ports", [2049, 22]),
        ["all: fabric_firewall_extra_ports has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        "firewall-guards-the-ssh-port-of-one-node",
        both(setv("n2", "ansible_port", 2222), on_all("fabric_firewall_extra_ports", [2222])),
        ["n2: fabric_firewall_extra_ports has 2222, the SSH port: the firewall never guards SSH"],
    ),
    (
        "firewall-port-not-a-number",
        setv("n1", "fabric_firewall_extra_ports", ["ssh"]),
        ["n1: fabric_firewall_extra_ports [0] must be an integer 1-65535 (got 'ssh')"],
    ),
    (
        "firewall-train-group",
        on_all("fabric_firewall_train_group", "Train Group"),
        [
            "all: fabric_firewall_train_group must be a group name (a-z, 0-9, '_', '-', at most 32, not starting with "
            "a digit) (got 'Train Group')"
        ],
    ),
    (
        "reset-packages-not-a-bool",
        setv("n1", "rdma_stack_reset_packages", "sometimes"),
        ["n1: rdma_stack_reset_packages must be true or false (got 'sometimes')"],
    ),
    (
        "switch-no-user",
        lambda inv: inv.hostvars["sw"].pop("ansible_user"),
        ["sw: ansible_user must be set for the switch (the example inventory takes it from vault.yml)"],
    ),
    (
        "switch-vault-without-password",
        lambda inv: inv.unreadable.__setitem__(
            "sw", {"ansible_password": "Attempting to decrypt but no vault secrets found."}
        ),
        [
            "sw: ansible_password cannot be read: Attempting to decrypt but no vault secrets found. (give the vault password: --vault-id <id>@prompt or --ask-vault-pass)"
        ],
    ),
]


def test_good_inventory_passes() -> None:
    assert [str(p) for p in C.check(good())] == []


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
    assert [str(p) for p in C.check(inv)] == []


def test_ipv6_after_the_fabric_address_is_accepted() -> None:
    inv = good()
    iface(inv)["addresses"].append("fd00::201/64")
    assert [str(p) for p in C.check(inv)] == []


def rails(order: dict[str, list[str]]) -> Callable[[C.Inventory], None]:
    """More fabric interfaces per node (a NIC per GPU): rail r on 10.20.<r>.0/24, in the given order per host."""

    def change(inv: C.Inventory) -> None:
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
    assert [str(p) for p in C.check(inv)] == []
    rails({"n1": ["3"]})(inv)  # a rail only one node has: the ladder reports it (rail_gaps), the contract allows it
    assert [str(p) for p in C.check(inv)] == []


def test_rails_listed_in_another_order_on_one_node_are_refused() -> None:
    inv = good()
    rails({"n1": ["1", "2"], "n2": ["2", "1"]})(inv)
    why = "must share a subnet (or a route), as the pair tests and NCCL's rail-aligned rings meet rail i with rail i"
    assert [str(p) for p in C.check(inv)] == [
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
    assert [str(p) for p in C.check(inv) if "(rail 2)" in str(p)] == []


def test_strings_from_extra_vars_are_numbers() -> None:
    """`-e cluster_roce_dscp=24` arrives as a string: accepted as the number it spells."""
    inv = good()
    on_all("cluster_roce_dscp", "24")(inv)
    assert [str(p) for p in C.check(inv)] == []


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in BAD])
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    inv = good()
    change(inv)
    assert [str(p) for p in C.check(inv)] == expected


def test_a_role_alone_sees_the_cluster_clash_its_defaults_repeat() -> None:
    """cluster_cnp_cos on the no-drop CoS, as a real run hands it over: the host's and the switch's defaults repeat
    it. Reported once, under cluster_*; rdma_qos used alone (its own variables only) still fails on it, and so does
    the switch role alone."""
    inv = good()
    both(
        on_all("cluster_cnp_cos", 3), on_all("rdma_qos_cnp_priority", 3), setv("sw", "nxos_roce_qos_cnp_qos_group", 3)
    )(inv)
    clash = "all: cluster_cnp_cos 3 equals cluster_nodrop_cos: CNPs need their own strict-priority class"
    assert [str(p) for p in C.check(inv)] == [clash]
    assert [str(p) for p in C.check(inv, ("rdma_qos_",))] == [clash]
    # The switch role used alone still refuses it: its own rules (its tasks/assert.yml) see the repeated value.
    rendered = {n: inv.get("sw", n) for n in C.NXOS_RENDERED if inv.get("sw", n) is not None}
    assert [p["var"] for p in nxos_roce_qos_validate(rendered)] == ["nxos_roce_qos_cnp_qos_group"]
    assert [str(p) for p in C.check(inv, ("common_",))] == []


def test_every_error_at_once() -> None:
    """Independent mistakes in one inventory: every one is reported, in one run."""
    ids = ("no-prefix", "bad-hostname", "duplicate-rank", "roce-dscp-64", "module-name-injection", "switch-port-name")
    inv, expected = good(), []
    for i, change, errors in BAD:
        if i in ids:
            change(inv)
            expected += errors
    assert sorted(str(p) for p in C.check(inv)) == sorted(expected)


# ------------------------------------------------------------------------------------------------ Slurm (roles/slurm)

MUNGE_KEY = "lab-only-test-key-0123456789abcdefghijklmnopqrstuvwxyz"
DB_PASSWORD = "lab-only-db-password-0123"
# roles/slurm/defaults/main.yml as the action plugin hands them over: templated (cluster_name unset here), the
# package lists left out (the contract does not read them).
SLURM_DEFAULTS = {
    k: v
    for k, v in yaml.safe_load((ROOT / "roles" / "slurm" / "defaults" / "main.yml").read_text()).items()
    if k != "slurm_packages"
} | {"slurm_cluster_name": "cluster"}


def slurm_on(inv: C.Inventory) -> None:
    """n1 is the Slurm controller (and a node); every node has the role's defaults and the one key."""
    inv.groups["slurm_controllers"] = ["n1"]
    for host in ("n1", "n2"):
        inv.hostvars[host].update(copy.deepcopy(SLURM_DEFAULTS), slurm_munge_key=MUNGE_KEY)


def slurm(*changes: Callable[[C.Inventory], None]) -> Callable[[C.Inventory], None]:
    return both(slurm_on, *changes)


def on_nodes(name: str, value) -> Callable[[C.Inventory], None]:
    return both(setv("n1", name, value), setv("n2", name, copy.deepcopy(value)))


TOPOLOGY_FIX = "so topology.conf cannot place it: describe its port as '<host> <nic>' or set slurm_topology: none"
VAULT_HINT = "(give the vault password: --vault-id <id>@prompt or --ask-vault-pass)"

SLURM_BAD: list[tuple[str, Callable[[C.Inventory], None], list[str]]] = [
    (
        "slurm-two-controllers",
        slurm(lambda inv: inv.groups.__setitem__("slurm_controllers", ["n1", "n2"])),
        [
            "inventory: group slurm_controllers holds n1, n2: put exactly one host there (a backup SlurmctldHost "
            "needs a StateSaveLocation both controllers share, which the slurm role does not set up)"
        ],
    ),
    (
        "slurm-controller-is-a-switch",
        slurm(lambda inv: inv.groups.__setitem__("slurm_controllers", ["sw"])),
        [
            "sw: group slurm_controllers holds a host that is also in switches",
            "sw: slurm_munge_key is required on every Slurm host: one key, in ansible-vault (roles/slurm/README.md)",
        ],
    ),
    (
        "slurm-controller-name",
        slurm(
            lambda inv: inv.groups.__setitem__("slurm_controllers", ["head_1.lab"]),
            lambda inv: inv.hostvars.__setitem__(
                "head_1.lab", {"ansible_host": "192.168.48.5", "slurm_munge_key": MUNGE_KEY}
            ),
        ),
        [
            "head_1.lab: inventory_hostname must start with a hostname (letters, digits, '-', at most 63): "
            "slurmctld checks SlurmctldHost against it"
        ],
    ),
    (
        "slurm-address",
        slurm(setv("n2", "ansible_host", "node 2")),
        ["n2: ansible_host 'node 2' must be an IP address or a DNS name: Slurm's NodeAddr and SlurmctldHost use it"],
    ),
    (
        "slurm-munge-key-missing",
        slurm(lambda inv: [inv.hostvars[h].pop("slurm_munge_key") for h in ("n1", "n2")]),
        ["all: slurm_munge_key is required on every Slurm host: one key, in ansible-vault (roles/slurm/README.md)"],
    ),
    (
        "slurm-munge-key-short",
        slurm(setv("n2", "slurm_munge_key", "short")),
        ["n2: slurm_munge_key must be a string of at least 32 characters (munged refuses a shorter key)"],
    ),
    (
        "slurm-munge-keys-differ",
        slurm(setv("n2", "slurm_munge_key", MUNGE_KEY.upper())),
        ["all: slurm_munge_key differs between Slurm hosts (n1, n2): MUNGE needs the same key on every host"],
    ),
    (
        "slurm-munge-key-vault-without-password",
        slurm(
            lambda inv: inv.unreadable.update(
                {h: {"slurm_munge_key": "Attempting to decrypt but no vault secrets found."} for h in ("n1", "n2")}
            )
        ),
        [
            f"n1: slurm_munge_key cannot be read: Attempting to decrypt but no vault secrets found. {VAULT_HINT}",
            f"n2: slurm_munge_key cannot be read: Attempting to decrypt but no vault secrets found. {VAULT_HINT}",
        ],
    ),
    (
        "slurm-partition-unknown-group",
        slurm(on_nodes("slurm_partitions", {"train": "rdma_nodes", "gpu": "gpu_nodes"})),
        ["all: slurm_partitions[gpu] names group 'gpu_nodes', which has no hosts in the inventory (a misspelt group?)"],
    ),
    (
        "slurm-partition-not-nodes",
        slurm(
            lambda inv: inv.groups.__setitem__("login", ["sw"]),
            on_nodes("slurm_partitions", {"train": "rdma_nodes", "login": "login"}),
        ),
        [
            "all: slurm_partitions[login] names group login, which holds sw, not in rdma_nodes: only rdma nodes run "
            "slurmd"
        ],
    ),
    (
        "slurm-default-partition",
        slurm(on_nodes("slurm_partition_default", "gpu")),
        ["all: slurm_partition_default 'gpu' is not one of slurm_partitions (train)"],
    ),
    (
        "slurm-network-word",
        slurm(on_nodes("slurm_node_network", "ib")),
        ["all: slurm_node_network must be one of management, fabric (got 'ib')"],
    ),
    (
        "slurm-topology-unplaced",
        slurm(second_switch),
        [
            f"n1: slurm_topology auto: no port of sw, sw2 names n1 first in its description "
            f"(nxos_roce_qos_host_interfaces), {TOPOLOGY_FIX}",
            f"n2: slurm_topology auto: no port of sw, sw2 names n2 first in its description "
            f"(nxos_roce_qos_host_interfaces), {TOPOLOGY_FIX}",
        ],
    ),
    (
        "slurm-gpus-disagree-with-the-ladder",
        slurm(setv("n1", "slurm_node_gpus", 4), on_nodes("cluster_validate_gpus_per_node", 8)),
        [
            "n1: slurm_node_gpus 4 differs from cluster_validate_gpus_per_node 8: the ladder and the scheduler must "
            "expect the same GPUs"
        ],
    ),
    (
        "slurm-gpus-word",
        slurm(setv("n1", "slurm_node_gpus", "eight")),
        ["n1: slurm_node_gpus must be an integer >= 0 (got 'eight')"],
    ),
    (
        "slurm-config-node-line",
        slurm(on_nodes("slurm_config", {"NodeName": "evil CPUs=1"})),
        ["all: slurm_config sets NodeName, which the slurm role renders from the inventory (groups, slurm_partitions)"],
    ),
    (
        "slurm-config-injection",
        slurm(on_nodes("slurm_config", {"MaxJobCount": "1\nNodeName=evil"})),
        ["all: slurm_config MaxJobCount: the value must be one line"],
    ),
    (
        "slurm-health-check-relative",
        slurm(on_nodes("slurm_health_check_program", "nhc")),
        ["all: slurm_health_check_program must be an absolute path without spaces, or empty (got 'nhc')"],
    ),
    (
        "slurm-prolog-relative",
        slurm(on_nodes("slurm_prolog", "rdma-node-health-prolog")),
        ["all: slurm_prolog must be an absolute path without spaces, or empty (got 'rdma-node-health-prolog')"],
    ),
    (
        "slurm-accounting-without-password",
        slurm(on_nodes("slurm_accounting", True)),
        [
            "n1: slurm_accounting_password is required with slurm_accounting: the password of slurmdbd's MariaDB "
            "user, in ansible-vault (roles/slurm/README.md)"
        ],
    ),
    (
        "slurm-accounting-password-breaks-its-line",
        slurm(on_nodes("slurm_accounting", "yes"), setv("n1", "slurm_accounting_password", DB_PASSWORD + " #")),
        [
            "n1: slurm_accounting_password must be 16-128 printable ASCII characters without spaces, '#', quotes or "
            "backslashes (slurmdbd.conf reads it on one line)"
        ],
    ),
    (
        "slurm-accounting-database-name",
        slurm(
            on_nodes("slurm_accounting", True),
            setv("n1", "slurm_accounting_password", DB_PASSWORD),
            on_nodes("slurm_accounting_database", "acct`; DROP"),
        ),
        ["all: slurm_accounting_database must be a MariaDB name (A-Za-z0-9_, at most 32) (got 'acct`; DROP')"],
    ),
    (
        "slurm-accounting-word",
        slurm(on_nodes("slurm_accounting", "maybe")),
        ["all: slurm_accounting must be true or false (got 'maybe')"],
    ),
]


def test_a_slurm_cluster_passes() -> None:
    inv = good()
    slurm_on(inv)
    assert [str(p) for p in C.check(inv)] == []


def test_a_leaf_spine_slurm_cluster_whose_ports_name_the_nodes_passes() -> None:
    inv = good()
    slurm(second_switch)(inv)
    inv.hostvars["sw"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1", "description": "n1 ens192"}]
    inv.hostvars["sw2"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1", "description": "n2 ens192"}]
    assert [str(p) for p in C.check(inv)] == []
    on_nodes("slurm_topology", "none")(inv)
    inv.hostvars["sw2"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1"}]
    assert [str(p) for p in C.check(inv)] == []


def test_without_a_controller_slurm_asks_nothing() -> None:
    """No host in slurm_controllers: the Slurm play runs nowhere, no key is needed; the role's defaults (layered
    under every node) still have to be valid."""
    inv = good()
    slurm_on(inv)
    inv.groups["slurm_controllers"] = []
    for host in ("n1", "n2"):
        inv.hostvars[host].pop("slurm_munge_key")
    assert [str(p) for p in C.check(inv)] == []
    on_nodes("slurm_topology", "always")(inv)
    assert [str(p) for p in C.check(inv)] == ["all: slurm_topology must be one of auto, none (got 'always')"]


def test_the_munge_key_is_never_printed() -> None:
    for key in ("short-secret", MUNGE_KEY.upper()):
        inv = good()
        slurm(setv("n2", "slurm_munge_key", key))(inv)
        problems = " ".join(str(p) for p in C.check(inv))
        assert problems and key not in problems and MUNGE_KEY not in problems


def test_accounting_with_its_password_passes_and_the_password_is_never_printed() -> None:
    inv = good()
    slurm(on_nodes("slurm_accounting", True), setv("n1", "slurm_accounting_password", DB_PASSWORD))(inv)
    assert [str(p) for p in C.check(inv)] == []
    # Only the controller runs slurmdbd: the nodes need no password.
    assert "slurm_accounting_password" not in inv.hostvars["n2"]
    for bad in ("short-pass", DB_PASSWORD + "'"):
        setv("n1", "slurm_accounting_password", bad)(inv)
        problems = " ".join(str(p) for p in C.check(inv))
        assert problems and bad not in problems


def test_slurm_rules_are_checked_by_the_role_alone() -> None:
    """roles/slurm/tasks/assert.yml's prefixes keep the Slurm problems and leave the others to their roles."""
    inv = good()
    slurm(setv("n2", "slurm_munge_key", "short"), setif("mtu", 100000))(inv)
    prefixes = ("slurm_", "group slurm_controllers", "ansible_host", "inventory_hostname")
    assert [str(p) for p in C.check(inv, prefixes)] == [
        "n2: slurm_munge_key must be a string of at least 32 characters (munged refuses a shorter key)"
    ]


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in SLURM_BAD])
def test_bad_slurm_inventory_names_host_and_variable(change, expected) -> None:
    inv = good()
    change(inv)
    assert [str(p) for p in C.check(inv)] == expected
