"""site.yml stops before any change anywhere when preflight fails on a node: the switch (a recording emulator) is
not even logged in to, and no play after preflight runs a task.

Controller-only: the nodes are unreachable addresses, or the controller itself over the local connection with a
fabric interface that carries the Ansible connection (run in --check, so that a regression could not change this
machine either).
"""

from __future__ import annotations

import sys

import pytest
import yaml

from lab.cluster import switch_inventory
from tests.switch.conftest import run_playbook

pytestmark = pytest.mark.switch


def _later_tasks(run) -> list[str]:
    """Every task that ran in a play after preflight, as `play: task`."""
    return [
        f"{play['play']['name']}: {task['task']['name']}"
        for play in run.data.get("plays", [])
        if not play["play"]["name"].startswith("Preflight |")
        for task in play.get("tasks", [])
    ]


def _nodes(**node_vars) -> dict:
    return {
        f"lab-node{i}": {
            "cluster_fabric_interfaces": [{"name": "rdma0", "addresses": [f"10.77.250.1{i}/24"], "mtu": 9000}],
            **node_vars,
        }
        for i in (1, 2)
    }


def _site(tmp_path, emu, nodes: dict, *args: str):
    inventory = switch_inventory(
        tmp_path / "inventory", {"lab-switch": {"ansible_host": "127.0.0.1", "ansible_port": emu.port}}
    )
    hosts = tmp_path / "inventory" / "host_vars"
    hosts.mkdir()
    for name, values in nodes.items():
        (hosts / f"{name}.yml").write_text(yaml.safe_dump(values))
    extra = {"nxos_roce_qos_render_dir": str(tmp_path / "render")}
    return run_playbook(inventory, *args, playbook="playbooks/site.yml", extra_vars=extra, timeout=300)


def test_every_node_unreachable_stops_site_before_the_switch(tmp_path, emulator) -> None:
    # A closed port on loopback: every node refuses the connection at once.
    run = _site(tmp_path, emulator, _nodes(ansible_host="127.0.0.1", ansible_port=9))
    assert run.rc != 0, run.explain()
    assert _later_tasks(run) == [], run.explain()
    assert emulator.log() == [], f"the switch was contacted: {emulator.log()[:5]}"
    assert "preflight: lab-node1, lab-node2 did not pass the host checks" in run.proc.stdout, run.explain()


def test_fabric_interface_carrying_the_connection_stops_site_in_preflight(tmp_path, emulator) -> None:
    """The node is this controller (local connection) and its fabric interface `lo` holds ansible_host: not the
    default-route NIC, the case only the network play used to catch, after earlier plays had changed hosts."""
    nodes = {
        "lab-node1": {
            "ansible_connection": "local",
            "ansible_host": "127.0.0.1",
            "ansible_python_interpreter": sys.executable,
            "cluster_fabric_interfaces": [{"name": "lo", "addresses": ["10.77.250.11/24"], "mtu": 9000}],
        },
        "lab-node2": {
            "ansible_connection": "local",
            "ansible_host": "127.0.0.1",
            "ansible_python_interpreter": sys.executable,
            "cluster_fabric_interfaces": [{"name": "lo", "addresses": ["10.77.250.12/24"], "mtu": 9000}],
        },
    }
    run = _site(tmp_path, emulator, nodes, "--check")
    assert run.rc != 0, run.explain()
    assert _later_tasks(run) == [], run.explain()
    assert emulator.log() == [], f"the switch was contacted: {emulator.log()[:5]}"
    assert "fabric interface 'lo' carries the Ansible connection" in run.proc.stdout, run.explain()
