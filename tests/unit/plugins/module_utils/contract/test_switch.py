"""The inventory contract's switch rules (plugins/module_utils/contract/switch.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest

from tests.unit.plugins.module_utils.contract.inventories import Change, cases, reports, setv

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
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
    (
        "switch-vault-other-password",
        lambda inv: inv.unreadable.__setitem__(
            "sw", {"variables": "Decryption failed (no vault secrets were found that could decrypt)."}
        ),
        [
            "sw: variables cannot be read: Decryption failed (no vault secrets were found that could decrypt). (give the vault password that encrypted it, the one given does not decrypt it: --vault-id <id>@prompt or --ask-vault-pass)"
        ],
    ),
    (
        # Both port lists empty (a host_vars file not read, a misspelt key): the switch would lose the policy on every
        # port that has it. Refused before any change unless the inventory names the ports meant to lose it.
        "switch-without-ports",
        setv("sw", "nxos_roce_qos_interfaces", []),
        [
            "sw: nxos_roce_qos_interfaces is empty (nxos_roce_qos_host_interfaces and nxos_roce_qos_uplink_interfaces): the run would configure no RoCE port and take the role's policy off every port that has it; list the switch's RoCE ports in nxos_roce_qos_host_interfaces / nxos_roce_qos_uplink_interfaces (its host_vars), or name the ports meant to lose the policy in nxos_roce_qos_release_interfaces"
        ],
    ),
    (
        "switch-releases-a-roce-port",
        setv("sw", "nxos_roce_qos_release_interfaces", ["Ethernet1/1/1"]),
        [
            "sw: nxos_roce_qos_release_interfaces Ethernet1/1/1 is also a RoCE port (nxos_roce_qos_interfaces): a port is configured or released, not both"
        ],
    ),
    (
        # The vault was decrypted (its password given) but lacks the name: no hint to give the password.
        "switch-vault-lacks-the-variable",
        lambda inv: inv.unreadable.__setitem__("sw", {"ansible_password": "'vault_nexus_password' is undefined"}),
        ["sw: ansible_password cannot be read: 'vault_nexus_password' is undefined"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected
