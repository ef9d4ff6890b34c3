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
    """Each node on a loopback address of its own (127.0.0.<i>, one machine each), unless node_vars say."""
    return {
        f"lab-node{i}": {
            "ansible_host": f"127.0.0.{i}",
            "cluster_fabric_interfaces": [{"name": "rdma0", "addresses": [f"10.77.250.1{i}/24"], "mtu": 9000}],
            **node_vars,
        }
        for i in (1, 2)
    }


def _site(tmp_path, emu, nodes: dict, *args: str, switch_port: int | None = None, head: dict | None = None):
    """site.yml on the two lab nodes and the emulator (or a switch at `switch_port`); with `head`, a Slurm controller
    `lab-head` outside rdma_nodes (a head node) with those host vars."""
    inventory = switch_inventory(
        tmp_path / "inventory",
        {"lab-switch": {"ansible_host": "127.0.0.1", "ansible_port": switch_port or emu.port}},
    )
    if head is not None:
        data = yaml.safe_load(inventory.read_text())
        data["all"]["children"]["slurm_controllers"] = {"hosts": {"lab-head": None}}
        inventory.write_text(yaml.safe_dump(data, sort_keys=False))
        nodes = {**nodes, "lab-head": head}
    hosts = tmp_path / "inventory" / "host_vars"
    hosts.mkdir()
    for name, values in nodes.items():
        (hosts / f"{name}.yml").write_text(yaml.safe_dump(values))
    extra = {"nxos_roce_qos_render_dir": str(tmp_path / "render")}
    return run_playbook(inventory, *args, playbook="playbooks/site.yml", extra_vars=extra, timeout=300)


def test_every_node_unreachable_stops_site_before_the_switch(tmp_path, emulator) -> None:
    # A closed port on loopback: every node refuses the connection at once.
    run = _site(tmp_path, emulator, _nodes(ansible_port=9))
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
            "ansible_host": "127.0.0.2",
            "ansible_python_interpreter": sys.executable,
            "cluster_fabric_interfaces": [{"name": "lo", "addresses": ["10.77.250.12/24"], "mtu": 9000}],
        },
    }
    run = _site(tmp_path, emulator, nodes, "--check")
    assert run.rc != 0, run.explain()
    assert _later_tasks(run) == [], run.explain()
    assert emulator.log() == [], f"the switch was contacted: {emulator.log()[:5]}"
    assert "fabric interface 'lo' carries the Ansible connection" in run.proc.stdout, run.explain()


# A closed port on loopback: nothing listens there, every connection is refused at once.
CLOSED = {"ansible_port": 9}


def test_a_switch_that_does_not_answer_stops_site_before_any_change(tmp_path, emulator) -> None:
    """The switch play runs last: a switch that is down once let six concerns change every node before the run
    failed on it. Preflight logs in to it (after the nodes' gate) and stops the run before any play changes a host.
    The nodes' host checks are off (`preflight_check_facts=false`), so the nodes pass without being contacted."""
    run = _site(tmp_path, emulator, _nodes(**CLOSED), "-e", "preflight_check_facts=false", switch_port=9)
    assert run.rc != 0, run.explain()
    assert _later_tasks(run) == [], run.explain()
    assert "preflight: lab-switch does not answer at 127.0.0.1:9 as admin" in run.proc.stdout, run.explain()
    assert "nothing was changed on any node or switch" in run.proc.stdout, run.explain()


def test_the_switch_login_passes_and_sends_no_configuration(tmp_path, emulator) -> None:
    """The same run against the emulator: preflight logs in (one `show`, no configuration command) and the run goes
    past preflight (to the nodes, which are not there)."""
    run = _site(tmp_path, emulator, _nodes(**CLOSED), "-e", "preflight_check_facts=false")
    log = emulator.log()
    login = [e for e in log if e["session"] == log[0]["session"]]
    assert "show hostname" in [e["line"] for e in login], log
    assert [e for e in emulator.config_commands() if e["session"] == log[0]["session"]] == [], log
    assert _later_tasks(run) != [], run.explain()
    assert "does not answer at" not in run.proc.stdout, run.explain()


def test_a_slurm_controller_outside_the_nodes_stops_with_them(tmp_path, emulator) -> None:
    """A head-node Slurm controller (in slurm_controllers, not in rdma_nodes) was left out of the preflight plays:
    after the gate had stopped every node and switch, the Slurm play still ran on it. It is checked (it must answer)
    and stopped with them."""
    run = _site(tmp_path, emulator, _nodes(**CLOSED), head={"ansible_host": "127.0.0.3", **CLOSED})
    assert run.rc != 0, run.explain()
    assert _later_tasks(run) == [], run.explain()
    assert emulator.log() == [], f"the switch was contacted: {emulator.log()[:5]}"
    assert "preflight: lab-head, lab-node1, lab-node2 did not pass the host checks" in run.proc.stdout, run.explain()
