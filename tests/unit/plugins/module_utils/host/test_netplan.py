"""The rdma_netplan role's decisions as tables: which interfaces carry the Ansible connection, and whether the
wanted fabric addresses and MTU are live already. Facts are shaped as `setup: gather_subset: network` gives
them on Debian 12 (recorded in the lab: eth0 management, rdma0 fabric)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import netplan as F

FACTS = {
    "interfaces": ["lo", "eth0", "rdma0", "ib-0"],
    "default_ipv4": {"interface": "eth0", "address": "10.77.0.11"},
    "eth0": {"mtu": 1500, "ipv4": {"address": "10.77.0.11", "prefix": "24"}},
    "rdma0": {
        "mtu": 9000,
        "ipv4": {"address": "10.77.250.11", "prefix": "24"},
        "ipv4_secondaries": [{"address": "10.78.0.11", "prefix": "16"}],
        "ipv6": [{"address": "fd00:77::b", "prefix": "64", "scope": "global"}, {"address": "fe80::1", "prefix": "64"}],
    },
    "ib_0": {"mtu": 2044, "ipv4": {"address": "192.168.9.1", "prefix": "24"}},
    "lo": {"mtu": 65536, "ipv4": {"address": "127.0.0.1", "prefix": "8"}},
}


@pytest.mark.parametrize(
    ("facts", "ansible_host", "expected"),
    [
        (FACTS, "10.77.0.11", ["eth0"]),
        (FACTS, "lab-node1", ["eth0"]),
        (FACTS, "", ["eth0"]),
        # ansible_host on the fabric (or on a secondary address): that interface carries the connection too
        (FACTS, "10.78.0.11", ["eth0", "rdma0"]),
        (FACTS, "192.168.9.1", ["eth0", "ib-0"]),
        # no default route: only the interface holding ansible_host
        ({**FACTS, "default_ipv4": {}}, "10.77.250.11", ["rdma0"]),
        ({"interfaces": []}, "10.0.0.1", []),
    ],
)
def test_conn_ifaces(facts, ansible_host, expected) -> None:
    assert F.conn_ifaces(facts, ansible_host) == expected


@pytest.mark.parametrize(
    ("interfaces", "expected"),
    [
        ([{"name": "rdma0", "addresses": ["10.77.250.11/24"], "mtu": 9000}], True),
        ([{"name": "rdma0", "addresses": ["10.77.250.11/24", "10.78.0.11/16"]}], True),
        # IPv6 in another spelling of the same address
        ([{"name": "rdma0", "addresses": ["fd00:77:0:0::b/64"]}], True),
        ([{"name": "rdma0", "addresses": ["10.77.250.11/24"], "mtu": None}], True),
        ([{"name": "ib-0", "addresses": ["192.168.9.1/24"], "mtu": 2044}], True),
        # another prefix, a missing address, another MTU, a missing interface
        ([{"name": "rdma0", "addresses": ["10.77.250.11/16"]}], False),
        ([{"name": "rdma0", "addresses": ["10.77.250.12/24"]}], False),
        ([{"name": "rdma0", "addresses": ["10.77.250.11/24"], "mtu": 4200}], False),
        ([{"name": "rdma1", "addresses": ["10.77.251.11/24"]}], False),
        (
            [
                {"name": "rdma0", "addresses": ["10.77.250.11/24"]},
                {"name": "ib-0", "addresses": ["192.168.9.1/24"], "mtu": 4092},
            ],
            False,
        ),
        ([], True),
    ],
)
def test_live(interfaces, expected) -> None:
    assert F.live(interfaces, FACTS) is expected


def test_live_refuses_a_wanted_value_that_is_no_address() -> None:
    with pytest.raises(RuleError, match="'not-an-ip' is not an address/prefix"):
        F.live([{"name": "rdma0", "addresses": ["not-an-ip"]}], FACTS)
