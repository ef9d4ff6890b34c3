"""Host roles rdma_netplan and rdma_modules: bad input is refused before any change; lock-out protection.

The bad-input tests run ansible-playbook against a throwaway inventory whose only host is an address
nothing answers on (SSH to port 9 on loopback: refused at once, no traffic leaves this machine) and
gather_facts false: the role's validation runs on the controller, so the run must fail with the
validation message naming the variable and the host must never have been contacted (no "UNREACHABLE").
Nothing on this machine is touched: no local connection is ever used.

The lock-out protection is proven by the side_effect step of the Molecule scenario molecule/rdma_netplan
(run by tests/test_molecule.py with every other scenario; one scenario saves a second netplan install):
after converge and idempotence it moves host 1 to a subnet no peer is on, asserts the role failed naming
the host and eth1, that the previous file and address are back and host 2 was untouched, and that eth0
(the connection's interface) is refused; verify then checks the converged state is intact.
test_lockout_scenario_is_wired guards that wiring here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run, tail

pytestmark = pytest.mark.molecule

GOOD_IFACE = {"name": "ens192", "addresses": ["192.168.250.201/24"], "mtu": 9000}
# A valid host QoS; each rdma_qos case below breaks one thing in it.
QOS_VARS = {
    "cluster_fabric_interfaces": [GOOD_IFACE],
    **yaml.safe_load((ROOT / "inventory" / "example" / "group_vars" / "all" / "qos.yml").read_text()),
}


def _play(tmp_path: Path, role: str, host_vars: dict) -> tuple[Path, Path]:
    inventory = {
        "all": {
            "children": {
                "rdma_nodes": {
                    "hosts": {
                        "badnode1": {
                            "ansible_host": "127.0.0.1",
                            "ansible_port": 9,
                            "ansible_connection": "ssh",
                            "ansible_user": "nobody",
                            "ansible_ssh_common_args": "-o ConnectTimeout=2 -o BatchMode=yes",
                            **host_vars,
                        }
                    }
                }
            }
        }
    }
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump(inventory))
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": f"Bad input for {role}",
                    "hosts": "rdma_nodes",
                    "gather_facts": False,
                    "roles": [{"role": role}],
                }
            ]
        )
    )
    return inv, play


@pytest.mark.parametrize(
    ("role", "host_vars", "expected"),
    [
        pytest.param(
            "rdma_netplan",
            {"cluster_fabric_interfaces": [{**GOOD_IFACE, "addresses": ["192.168.250.201"]}]},
            [
                "badnode1: cluster_fabric_interfaces[ens192].addresses has '192.168.250.201'",
                "not a host address with a prefix length",
            ],
            id="cidr-without-prefix",
        ),
        pytest.param(
            "rdma_netplan",
            {"cluster_fabric_interfaces": [{**GOOD_IFACE, "mtu": 100000}]},
            ["badnode1: cluster_fabric_interfaces[ens192].mtu 100000 must lie within 576-9216"],
            id="mtu-100000",
        ),
        pytest.param(
            "rdma_netplan",
            {"cluster_fabric_interfaces": [{**GOOD_IFACE, "mtu": "jumbo"}]},
            # The role's argument spec refuses it first (type int), before the contract runs.
            ["rdma_netplan_interfaces", "mtu", "cannot be converted to an int"],
            id="mtu-not-a-number",
        ),
        pytest.param(
            "rdma_modules",
            {"rdma_modules_list": ["ib_umad", "mlx5_ib; reboot"]},
            ["badnode1: rdma_modules_list [1] must be a module name", "mlx5_ib; reboot"],
            id="bad-module-name",
        ),
        pytest.param(
            "rdma_modules",
            {"rdma_modules_list": ["IB_UMAD"]},
            ["badnode1: rdma_modules_list [0] must be a module name", "IB_UMAD"],
            id="upper-case-module-name",
        ),
        pytest.param(
            "rdma_qos",
            {**QOS_VARS, "cluster_cnp_cos": 3},
            # rdma_qos_cnp_priority repeats it (its default): reported once, under the shared variable.
            ["badnode1: cluster_cnp_cos 3 equals cluster_nodrop_cos: CNPs need their own strict-priority"],
            id="qos-cnp-on-the-nodrop-priority",
        ),
        pytest.param(
            "rdma_qos",
            {**QOS_VARS, "cluster_tcp_dscp": 26},
            ["badnode1: cluster_tcp_dscp 26 equals cluster_roce_dscp: only RoCE may carry the no-drop class's DSCP"],
            id="qos-tcp-marked-with-the-roce-dscp",
        ),
        pytest.param(
            "rdma_qos",
            {**QOS_VARS, "rdma_qos_mark_networks": {"ipv4": ["10.0.0.0/8 } accept; {"], "ipv6": []}},
            ["badnode1: rdma_qos_mark_networks ipv4: '10.0.0.0/8 } accept; {' is not an IPv4 network"],
            id="qos-mark-networks-injection",
        ),
    ],
)
def test_bad_input_fails_before_any_change(tmp_path: Path, role: str, host_vars: dict, expected: list[str]) -> None:
    inv, play = _play(tmp_path, role, host_vars)
    proc = run(["ansible-playbook", "-i", str(inv), str(play)], timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"bad input was accepted:\n{tail(proc)}"
    flat = " ".join(out.split())
    for text in expected:
        assert text in flat, f"{text!r} not in the failure:\n{tail(proc)}"
    # Validation ran on the controller: the unreachable host was never contacted.
    assert "UNREACHABLE" not in out, f"the host was contacted before validation failed:\n{tail(proc)}"
    assert "changed=0" in out and "unreachable=0" in out, tail(proc)


@pytest.mark.parametrize("role", ["rdma_netplan", "rdma_modules"])
def test_good_input_only_fails_on_the_connection(tmp_path: Path, role: str) -> None:
    """Control: with valid input the same play passes validation and only then fails to connect."""
    inv, play = _play(tmp_path, role, {"cluster_fabric_interfaces": [GOOD_IFACE]})
    proc = run(["ansible-playbook", "-i", str(inv), str(play)], timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "UNREACHABLE" in out, tail(proc)
    assert "rule(s) of the contract" not in out, tail(proc)


def test_lockout_scenario_is_wired() -> None:
    """molecule/rdma_netplan breaks host 1's fabric after a good converge and asserts the rollback."""
    scenario = ROOT / "molecule" / "rdma_netplan"
    sequence = yaml.safe_load((scenario / "molecule.yml").read_text())["scenario"]["test_sequence"]
    assert (
        sequence.index("converge")
        < sequence.index("idempotence")
        < sequence.index("side_effect")
        < sequence.index("verify")
    )
    side_effect = (scenario / "side_effect.yml").read_text()
    for needle in (
        "lost fabric connectivity on interface eth1",
        "restored and re-applied",
        "10.78.9.11/24",
        "carries the Ansible connection",
    ):
        assert needle in side_effect, needle
