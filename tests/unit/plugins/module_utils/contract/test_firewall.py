"""The inventory contract's fabric_firewall rule (plugins/module_utils/contract/firewall.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check

from tests.unit.plugins.module_utils.contract.inventories import Change, both, cases, good, on_all, reports, setv

pytestmark = pytest.mark.lint


def second_rail(inv) -> None:
    """Every node gets a second fabric interface (a rail) on its own subnet."""
    for n, host in enumerate(inv.members("rdma_nodes"), start=1):
        rails = inv.hostvars[host]["cluster_fabric_interfaces"]
        rails.append({"name": "ens224", "addresses": [f"192.168.252.{n}/24"], "mtu": 9000})


def add_group(name: str, members: list[str]):
    def change(inv) -> None:
        inv.groups[name] = members

    return change


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
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
        # Port 22 stays SSH's where Ansible connects on another: sshd may listen on both.
        "firewall-guards-22-where-ansible-uses-another-port",
        both(setv("n2", "ansible_port", 2222), on_all("fabric_firewall_extra_ports", [22])),
        ["all: fabric_firewall_extra_ports has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        # A rendezvous on the SSH port: the firewall would reset every new SSH connection from the controller.
        "rendezvous-on-the-ssh-port",
        on_all("train_launch_rdzv_port", 22),
        ["all: train_launch_rdzv_port has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        "preflight-all-reduce-on-one-nodes-ssh-port",
        both(setv("n1", "ansible_port", 2200), on_all("train_launch_check_port", 2200)),
        ["n1: train_launch_check_port has 2200, the SSH port: the firewall never guards SSH"],
    ),
    (
        "ladder-all-reduce-on-the-ssh-port",
        on_all("cluster_validate_allreduce_port", 22),
        ["all: cluster_validate_allreduce_port has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        # The pair tests listen on the first rail's port + 1 per further rail: a second rail reaches SSH.
        "pair-tests-second-rail-on-the-ssh-port",
        both(on_all("cluster_validate_pair_port", 21), second_rail),
        ["all: cluster_validate_pair_port has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        "pair-tests-past-the-last-port",
        both(on_all("cluster_validate_pair_port", 65535), second_rail),
        ["all: cluster_validate_pair_port gives the pair tests port 65536 on the last rail: it must be 1-65535"],
    ),
    (
        # The model server on the rendezvous's port: one of them cannot bind.
        "model-server-on-the-rendezvous-port",
        both(on_all("train_launch_rdzv_port", 29500), on_all("serve_port", 29500)),
        [
            "all: serve_port has 29500, also train_launch_rdzv_port's: two of the project's servers cannot listen "
            "on one port"
        ],
    ),
    (
        "pair-tests-second-rail-on-the-ladder-all-reduce-port-of-one-node",
        both(
            on_all("cluster_validate_pair_port", 18515),
            setv("n2", "cluster_validate_allreduce_port", 18516),
            second_rail,
        ),
        [
            "n2: cluster_validate_allreduce_port has 18516, also cluster_validate_pair_port's: two of the project's "
            "servers cannot listen on one port"
        ],
    ),
    (
        "model-server-on-the-ssh-port",
        on_all("serve_port", 22),
        ["all: serve_port has 22, the SSH port: the firewall never guards SSH"],
    ),
    (
        "model-server-device-injected",
        on_all("serve_device", "cpu --trust-remote-code"),
        ["all: serve_device must be auto, cpu, cuda or cuda:<n> (got 'cpu --trust-remote-code')"],
    ),
    (
        "rendezvous-port-past-65535",
        on_all("train_launch_rdzv_port", 70000),
        ["all: train_launch_rdzv_port must be an integer 1-65535 (got 70000)"],
    ),
    (
        "firewall-ports-past-65535",
        on_all("fabric_firewall_extra_ports", [2049, 65536]),
        ["all: fabric_firewall_extra_ports [1] must be an integer 1-65535 (got 65536)"],
    ),
    (
        # The allow-list is the group's fabric: a group without hosts lets no fabric packet in.
        "firewall-group-without-hosts",
        both(on_all("fabric_firewall_group", "gpu_nodes"), add_group("gpu_nodes", [])),
        [
            "n1: fabric_firewall_group 'gpu_nodes' has no hosts: the firewall's allow-list would be empty and drop"
            " every fabric packet",
            "n2: fabric_firewall_group 'gpu_nodes' has no hosts: the firewall's allow-list would be empty and drop"
            " every fabric packet",
        ],
    ),
    (
        "firewall-interfaces-with-a-malformed-address",
        setv("n2", "fabric_firewall_interfaces", [{"name": "ens192", "addresses": ["192.168.250.300/24"]}]),
        [
            "n2: fabric_firewall_interfaces '192.168.250.300/24' of ens192 is not an address: '192.168.250.300/24'"
            " does not appear to be an IPv4 or IPv6 interface"
        ],
    ),
]


def test_the_firewall_play_s_plan_refuses_what_the_contract_refuses() -> None:
    """The contract's allow-list check is the role's own plan (host/firewall.py), not a copy: an interface list the
    plan refuses is refused by the contract with the plan's words."""
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.firewall import fabric_firewall_plan

    bad = [{"name": "ens192", "addresses": ["fe80::1/64"]}]
    with pytest.raises(RuleError) as plan:
        fabric_firewall_plan([bad], bad, [])
    inv = good()
    setv("n1", "fabric_firewall_interfaces", bad)(inv)
    assert [str(p) for p in check(inv)] == [f"n1: fabric_firewall_interfaces {str(plan.value).split(': ', 1)[1]}"]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected
