"""The inventory the contract's tests change: the valid field cluster (inventory/example, values as the action plugin
hands them over: role defaults under the inventory's values), and the changes they make to it.

The tests of plugins/module_utils/contract/ are pure-Python tables: each bad inventory is this one with one change,
and the contract must return exactly the listed errors, each naming host and variable. Fast: no Ansible run here
(tests/test_preflight.py runs the real play).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import Inventory

from tests.conftest import ROOT

# A change to the good inventory (a row of a BAD table).
Change = Callable[[Inventory], None]

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


def good() -> Inventory:
    return Inventory(
        groups={"rdma_nodes": ["n1", "n2"], "subnet_managers": ["n1"], "switches": ["sw"], "ungrouped": []},
        hostvars={
            "n1": node("192.168.250.201/24", "192.168.48.175", 0, hostname="n1"),
            "n2": node("192.168.250.202/24", "192.168.48.176", 1, hostname="n2"),
            "sw": copy.deepcopy(SWITCH),
        },
    )


def iface(inv: Inventory, host: str = "n1") -> dict:
    return inv.hostvars[host]["cluster_fabric_interfaces"][0]


def on_all(name: str, value) -> Change:
    def change(inv: Inventory) -> None:
        for vars_ in inv.hostvars.values():
            vars_[name] = value

    return change


def setv(host: str, name: str, value) -> Change:
    return lambda inv: inv.hostvars[host].__setitem__(name, value)


def setif(key: str, value, host: str = "n1") -> Change:
    return lambda inv: iface(inv, host).__setitem__(key, value)


def infiniband(inv: Inventory) -> None:
    """The same cluster on InfiniBand: IPoIB datagram mode with a 2044 MTU (2K IB MTU)."""
    on_all("cluster_link_layer", "infiniband")(inv)
    on_all("rdma_stack_link_layer", "infiniband")(inv)
    for host in ("n1", "n2"):
        iface(inv, host)["mtu"] = 2044


def both(*changes: Change) -> Change:
    def change(inv: Inventory) -> None:
        for c in changes:
            c(inv)

    return change


def second_switch(inv: Inventory) -> None:
    inv.groups["switches"] = ["sw", "sw2"]
    inv.hostvars["sw2"] = copy.deepcopy(SWITCH) | {"ansible_host": "192.168.48.11"}


def reports(change: Change) -> list[str]:
    """What the contract says of the good inventory with one change: every problem, as its message."""
    inv = good()
    change(inv)
    return [str(p) for p in check(inv)]


def cases(bad: list[tuple[str, Change, list[str]]]) -> list:
    """A test file's table of (id, change, exact errors) as pytest parameters."""
    return [pytest.param(change, expected, id=name) for name, change, expected in bad]
