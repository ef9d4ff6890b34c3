"""A leaf-spine lab fabric: the lab's own fabric plan and inventory (lab/cluster.py, `lab up --leaves 2
--spines 1`) with three emulators, converged by one run of playbooks/switch.yml.

The emulators run in the test's own directories on random loopback ports (never the lab's
`.lab/fabric`), so the test needs no lab lock; they are stopped by their PIDs at the end.
"""

from __future__ import annotations

import json
import os

import pytest

from lab import cluster
from tests.switch.conftest import ROOT, run_playbook

pytestmark = pytest.mark.switch


def _log(directory) -> list[dict]:
    path = directory / "state.json.commands.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _policy(render, host: str) -> str:
    """The rendered policy without the comment header and the ports (what must be equal fabric-wide)."""
    text = (render / f"{host}.cfg").read_text()
    return "\n".join(ln for ln in text.split("\ninterface ")[0].splitlines() if not ln.startswith("!"))


def test_fabric_plan_wires_hosts_to_leaves_and_leaves_to_spines():
    nodes = [cluster.Node(i) for i in range(1, 6)]
    plan = {sw.name: sw for sw in cluster.fabric_plan(nodes, leaves=2, spines=2)}
    assert list(plan) == ["lab-leaf1", "lab-leaf2", "lab-spine1", "lab-spine2"]
    assert [p["description"] for p in plan["lab-leaf1"].host_interfaces] == [
        "lab-node1 rdma0",
        "lab-node3 rdma0",
        "lab-node5 rdma0",
    ]
    assert [p["name"] for p in plan["lab-leaf2"].uplink_interfaces] == ["Ethernet1/8", "Ethernet1/7"]
    assert plan["lab-spine2"].uplink_interfaces == (
        {"name": "Ethernet1/1", "description": "lab-leaf1 Ethernet1/7"},
        {"name": "Ethernet1/2", "description": "lab-leaf2 Ethernet1/7"},
    )
    with pytest.raises(SystemExit, match="more than 8 ports"):
        cluster.fabric_plan([cluster.Node(i) for i in range(1, 9)], leaves=1, spines=1)


def test_two_leaves_and_a_spine_converge_with_one_policy_and_rerun_sends_only_reads(tmp_path):
    nodes = [cluster.Node(i) for i in range(1, 5)]
    fabric = cluster.fabric_plan(nodes, leaves=2, spines=1)
    dirs = {sw.name: tmp_path / "emulators" / sw.name for sw in fabric}
    try:
        ports = {sw.name: cluster.start_emulator(sw.name, dirs[sw.name]) for sw in fabric}
        inventory = tmp_path / "inventory"
        inventory.mkdir()
        (inventory / "hosts.yml").write_text(cluster.inventory_text(nodes, None, fabric, ports))
        (inventory / "group_vars").symlink_to(ROOT / "inventory" / "lab" / "group_vars")
        render = tmp_path / "render"

        first = run_playbook(inventory / "hosts.yml", extra_vars={"nxos_roce_qos_render_dir": str(render)})
        assert first.rc == 0, first.explain()
        for sw in fabric:
            result = first.fact(sw.name, "nxos_roce_qos_result")
            assert result["passed"] and result["changed"], (sw.name, result)
        assert _policy(render, "lab-leaf1") == _policy(render, "lab-leaf2") == _policy(render, "lab-spine1")

        running = {name: json.loads((d / "state.json").read_text())["running"] for name, d in dirs.items()}
        for sw in fabric:
            for port in (*sw.host_interfaces, *sw.uplink_interfaces):
                assert (
                    f"interface {port['name']}\n  description {port['description']}\n"
                    "  priority-flow-control mode on\n" in running[sw.name]
                ), (sw.name, port)
            assert "service-policy type queuing output ROCE_QUEUING\n" in running[sw.name]
        # The spine has only uplinks: its ports 1/3.. stay factory.
        assert "interface Ethernet1/3\n\n" in running["lab-spine1"]

        marks = {name: len(_log(d)) for name, d in dirs.items()}
        second = run_playbook(inventory / "hosts.yml", extra_vars={"nxos_roce_qos_render_dir": str(render)})
        assert second.rc == 0, second.explain()
        for name, directory in dirs.items():
            assert second.stats(name)["changed"] == 0, (name, second.explain())
            sent = [e["line"] for e in _log(directory)[marks[name] :]]
            assert sent, f"{name}: the second run read the switch"
            config = [line for line in sent if not line.startswith(("show ", "terminal "))]
            assert config == [], f"{name}: a converged switch gets only reads, got {config}"
    finally:
        for directory in dirs.values():
            cluster.stop_emulator(directory)


def test_lab_down_stops_every_fabric_emulator(tmp_path, monkeypatch):
    """What `lab down` and `lab status` do with the fabric, in a private FABRIC_DIR."""
    monkeypatch.setattr(cluster, "FABRIC_DIR", tmp_path / "fabric")
    fabric = cluster.fabric_plan([cluster.Node(1), cluster.Node(2)], leaves=2, spines=0)
    try:
        ports = cluster.start_fabric(fabric)
        running = cluster.fabric_emulators()
        assert sorted(running) == ["lab-leaf1", "lab-leaf2"]
        assert {name: port for name, (_, port) in running.items()} == ports
        assert cluster.start_fabric(fabric) == ports, "idempotent: running emulators are kept"
        pids = [pid for pid, _ in running.values()]
    finally:
        cluster.stop_fabric()
    assert cluster.fabric_emulators() == {}
    assert not any((tmp_path / "fabric").iterdir())
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
