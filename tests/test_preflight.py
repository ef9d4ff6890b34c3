"""The preflight play checks the inventory contract before any host is contacted.

The rules and their exact messages are tested in pure Python
(tests/unit/plugins/module_utils/contract/); here the real play runs: the example and the lab
inventories pass, and a bad one fails with every error at once, naming host and variable, without contacting any
host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, playbook, tail

pytestmark = pytest.mark.lint

EXAMPLE_VAULT_PASSWORD = "rdma-llm-example"  # documented in inventory/example/group_vars/switches/main.yml


# The shared QoS values every inventory carries (group_vars/all/qos.yml), read from the lab inventory.
QOS = yaml.safe_load((ROOT / "inventory" / "lab" / "group_vars" / "all" / "qos.yml").read_text())


def inventory(tmp_path: Path, nodes: dict[str, dict], extra: dict | None = None, switches: dict | None = None) -> Path:
    # Hosts point at a closed loopback port: a check that tried to contact one would fail differently.
    data = {
        "all": {
            "vars": {"ansible_connection": "ssh", "ansible_port": 9, **QOS, **(extra or {})},
            "children": {"rdma_nodes": {"hosts": nodes}, "switches": {"hosts": switches or {}}},
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def node(addr: str, mgmt: str = "", **kw) -> dict:
    # Each node on a loopback address of its own (127.0.0.<the fabric address's last byte>): one machine each.
    mgmt = mgmt or "127.0.0." + addr.split("/")[0].split(".")[-1]
    iface = {"name": "ens192", "addresses": [addr], "mtu": 9000}
    iface.update(kw.pop("iface", {}))
    return {"ansible_host": mgmt, "cluster_fabric_interfaces": [iface], **kw}


def preflight(inv: Path, *args: str):
    """The contract alone: no node or switch is contacted (the switch login: tests/switch/test_site_stops.py)."""
    return playbook(
        "playbooks/preflight.yml",
        *("-e", "preflight_check_facts=false", "-e", "preflight_check_switches=false", *args),
        inventory=inv,
        timeout=120,
    )


def test_good_inventory_passes(tmp_path: Path) -> None:
    proc = preflight(inventory(tmp_path, {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")}))
    assert proc.returncode == 0, tail(proc)


def test_a_limit_that_names_nodes_and_the_switches_passes_the_gate(tmp_path: Path) -> None:
    """The gate before any change counts the nodes of the limit only: `--limit n1,switches` (how the scale bench and a
    user re-run one node and the fabric) once counted the switch as a node that had not passed."""
    switch = {
        "sw1": {
            "ansible_host": "127.0.0.1",
            "ansible_user": "admin",
            "ansible_password": "lab-only",
            "nxos_roce_qos_host_interfaces": [{"name": "Ethernet1/1"}, {"name": "Ethernet1/2"}],
        }
    }
    inv = inventory(tmp_path, {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")}, switches=switch)
    proc = preflight(inv, "--limit", "n1,switches")
    assert proc.returncode == 0, tail(proc)
    assert "gate | Stop before any change if a targeted host did not answer" in proc.stdout, tail(proc)


def test_bad_inventory_fails_before_contact_with_every_error(tmp_path: Path) -> None:
    """Mistakes on nodes and on the switch (whose play runs last) are all reported by the first task."""
    nodes = {
        "n1": node("192.168.250.201", common_hostname="twin"),
        "n2": node("192.168.250.202/24", common_hostname="twin", iface={"mut": 9000}),
    }
    switch = {"sw1": {"ansible_host": "127.0.0.1", "ansible_user": "admin", "nxos_roce_qos_mtu": 1500}}
    proc = preflight(inventory(tmp_path, nodes, {"cluster_roce_dscp": 64}, switch))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    for message in (
        "n1: cluster_fabric_interfaces[ens192].addresses has '192.168.250.201', which is not a host address",
        "n1: common_hostname 'twin' is also the hostname of n2",
        "n2: cluster_fabric_interfaces[ens192] has unknown key(s) mut",
        "all: cluster_roce_dscp must be an integer 0-63 (got 64)",
        "sw1: nxos_roce_qos_mtu 1500 is below the hosts' fabric MTU 9000",
        "sw1: ansible_password (or ansible_ssh_private_key_file) must be set for the switch",
    ):
        assert message in out, (message, out[-3000:])
    assert "UNREACHABLE" not in out, out[-3000:]


def test_example_inventory_passes(tmp_path: Path) -> None:
    """The field cluster as a user writes it (inventory/example), vault included, is a valid inventory."""
    secret = tmp_path / "vault-pass"
    secret.write_text(EXAMPLE_VAULT_PASSWORD + "\n")
    proc = preflight(ROOT / "inventory" / "example", "--vault-id", f"example@{secret}")
    assert proc.returncode == 0, tail(proc)


def test_example_inventory_without_vault_password_is_refused() -> None:
    proc = preflight(ROOT / "inventory" / "example")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert "nexus1: variables cannot be read" in out and "give the vault password" in out, out[-3000:]


def lab_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """inventory/lab with the hosts.yml `lab up --hosts 8` writes (written to a copy, no lab started)."""
    import shutil

    from lab import cluster

    inv = tmp_path / "lab"
    shutil.copytree(ROOT / "inventory" / "lab" / "group_vars", inv / "group_vars")
    monkeypatch.setattr(cluster, "INVENTORY", inv / "hosts.yml")
    cluster.write_inventory([cluster.Node(i) for i in range(1, cluster.EMULATOR_PORTS + 1)], 2222)
    return inv


def test_lab_inventory_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm on (lab-node1 the controller), its munge key decrypted with the lab's vault id (tests/conftest.py)."""
    inv = lab_copy(tmp_path, monkeypatch)
    assert "slurm_controllers:\n      hosts:\n        lab-node1:" in (inv / "hosts.yml").read_text()
    proc = preflight(inv)
    assert proc.returncode == 0, tail(proc)


def test_lab_inventory_without_its_vault_password_names_the_munge_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the lab's vault id the key cannot be read: every Slurm host says so (the switch reads no Slurm
    variable), before any host is contacted."""
    inv = lab_copy(tmp_path, monkeypatch)
    wrong = tmp_path / "wrong-pass"
    wrong.write_text("not-the-lab-password\n")
    proc = playbook(
        "playbooks/preflight.yml",
        "-e",
        "preflight_check_facts=false",
        inventory=inv,
        timeout=120,
        ANSIBLE_VAULT_IDENTITY_LIST=f"lab@{wrong}",
    )
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    for i in range(1, 9):
        assert f"lab-node{i}: slurm_munge_key cannot be read" in out, out[-3000:]
    assert "give the vault password" in out and "lab-switch: slurm" not in out, out[-3000:]


@pytest.mark.parametrize("flag", ["reset_packages", "reset_train_runs"])
def test_reset_refuses_a_mistyped_boolean_before_any_change(tmp_path: Path, flag: str) -> None:
    """`-e reset_packages=ture` was read as false (a deprecation warning, the packages kept without a word): it is
    refused in reset.yml's first play, on the controller, before any node is contacted (the nodes' port is closed)."""
    inv = inventory(tmp_path, {"n1": node("192.168.250.201/24")})
    proc = playbook("playbooks/reset.yml", "-e", "reset_confirm=yes", "-e", f"{flag}=ture", inventory=inv, timeout=120)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, tail(proc)
    assert f"-e {flag}='ture': not a boolean" in out, tail(proc)
    assert "List the training units on the node" not in proc.stdout, "a node was contacted"
    good = playbook("playbooks/reset.yml", "-e", "reset_confirm=yes", "-e", f"{flag}=false", inventory=inv, timeout=120)
    assert "Refuse a reset option that is not a boolean" in good.stdout and ": not a boolean (" not in good.stdout, (
        tail(good)
    )
