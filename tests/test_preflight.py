"""The preflight play rejects a bad inventory with a clear message before any host is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, playbook, tail

pytestmark = pytest.mark.lint


def inventory(tmp_path: Path, nodes: dict[str, dict], extra: dict | None = None) -> Path:
    # Hosts point at a closed loopback port: a check that tried to contact one would fail differently.
    data = {
        "all": {
            "vars": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9, **(extra or {})},
            "children": {"rdma_nodes": {"hosts": nodes}, "switches": {"hosts": {}}},
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def node(addr: str, **kw) -> dict:
    iface = {"name": "ens192", "addresses": [addr], "mtu": 9000}
    iface.update(kw.pop("iface", {}))
    return {"cluster_fabric_interfaces": [iface], **kw}


def preflight(inv: Path):
    return playbook("playbooks/preflight.yml", "-e", "preflight_check_facts=false", inventory=inv, timeout=120)


def test_good_inventory_passes(tmp_path: Path) -> None:
    proc = preflight(inventory(tmp_path, {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")}))
    assert proc.returncode == 0, tail(proc)


@pytest.mark.parametrize(
    ("nodes", "extra", "message"),
    [
        (
            {"n1": node("192.168.250.201"), "n2": node("192.168.250.202/24")},
            None,
            "not a host address with a prefix length",
        ),
        (
            {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.201/24")},
            None,
            "duplicate fabric addresses: 192.168.250.201",
        ),
        (
            {"n1": node("192.168.250.201/24", iface={"mtu": 100000}), "n2": node("192.168.250.202/24")},
            None,
            "mtu 100000 must be within 576-9216",
        ),
        (
            {
                "n1": node("192.168.250.201/24", cluster_node_rank=0),
                "n2": node("192.168.250.202/24", cluster_node_rank=0),
            },
            None,
            "duplicate cluster_node_rank: 0",
        ),
        (
            {
                "n1": node("192.168.250.201/24", common_hostname="ubunturdma1"),
                "n2": node("192.168.250.202/24", common_hostname="ubunturdma1"),
            },
            None,
            "duplicate hostnames: ubunturdma1",
        ),
        (
            {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")},
            {"cluster_roce_dscp": 64},
            "cluster_roce_dscp (64)",
        ),
        (
            {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")},
            {"cluster_nodrop_cos": 9},
            "cluster_nodrop_cos (9)",
        ),
        (
            {
                "n1": node("192.168.250.201/24", iface={"routes": [{"to": "192.168.251.0/24", "via": "10.0.0.1"}]}),
                "n2": node("192.168.250.202/24"),
            },
            None,
            "route to '192.168.251.0/24' via '10.0.0.1'",
        ),
        (
            {
                "n1": {"cluster_fabric_interfaces": [{"addresses": ["192.168.250.201/24"]}]},
                "n2": node("192.168.250.202/24"),
            },
            None,
            "missing required arguments: name",
        ),
    ],
)
def test_bad_inventory_fails_before_contact(tmp_path: Path, nodes, extra, message) -> None:
    proc = preflight(inventory(tmp_path, nodes, extra))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert message in " ".join(out.split()), out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]


def test_example_inventory_passes() -> None:
    """The field cluster as a user writes it (inventory/example) is a valid inventory."""
    proc = playbook(
        "playbooks/preflight.yml",
        "-e",
        "preflight_check_facts=false",
        inventory=ROOT / "inventory" / "example",
        timeout=120,
    )
    assert proc.returncode == 0, tail(proc)
