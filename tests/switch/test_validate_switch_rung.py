"""The validation ladder's switch rung (roles/cluster_validate tasks switch_read.yml + switch.yml) against the
NX-OS emulator, through cisco.nxos.nxos_command: counters read before the stress rungs, moved the way traffic
would move them (the emulator's counters file), read again after, judged.

No containers: the nodes are never contacted (every task of these files runs once on the controller or on
the switch), so the rung's wiring and decision are tested without the lab.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, tool_env

pytestmark = pytest.mark.switch

NODES = ["lab-node1", "lab-node2", "lab-node3"]

PLAY = """\
- name: Switch rung between two counter reads
  hosts: rdma_nodes
  gather_facts: false
  roles:
    - role: rdma_llm.cluster.cluster_defaults
  tasks:
    - name: Start an empty ladder
      ansible.builtin.set_fact:
        __cluster_validate_rungs: []
        __cluster_validate_stop: false
        __cluster_validate_left_out: {}
      run_once: true

    - name: Read the counters before
      ansible.builtin.include_role:
        name: cluster_validate
        tasks_from: switch_read.yml
      vars:
        cluster_validate_switch_reading: before

    - name: Traffic moves the counters
      ansible.builtin.copy:
        content: "{{ traffic | to_json }}"
        dest: "{{ counters_file }}"
        mode: "0644"
      delegate_to: localhost
      run_once: true

    - name: Read again and judge
      ansible.builtin.include_role:
        name: cluster_validate
        tasks_from: switch.yml

    - name: Keep the rung
      ansible.builtin.copy:
        content: "{{ __cluster_validate_rungs | to_json }}"
        dest: "{{ rung_file }}"
        mode: "0644"
      delegate_to: localhost
      run_once: true
"""


def switch_rung(tmp_path: Path, port: int, counters_file: Path, traffic: dict) -> tuple[dict, str]:
    """Run the two reads around a counter change; return the recorded rung and the console output."""
    inventory = tmp_path / "inventory"
    inventory.mkdir(parents=True)
    hosts = {
        "all": {
            "children": {
                "rdma_nodes": {"hosts": {n: {"ansible_connection": "local"} for n in NODES}},
                "switches": {"hosts": {"lab-switch": {"ansible_host": "127.0.0.1", "ansible_port": port}}},
            }
        }
    }
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (inventory / "group_vars").symlink_to(ROOT / "inventory" / "lab" / "group_vars")
    (tmp_path / "play.yml").write_text(PLAY)
    rung_file = tmp_path / "rungs.json"
    extra = {"traffic": traffic, "counters_file": str(counters_file), "rung_file": str(rung_file)}
    playbook = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(tmp_path / "play.yml")]
    proc = subprocess.run(
        [*playbook, "-e", json.dumps(extra)],
        cwd=ROOT,
        env=tool_env(ANSIBLE_DEPRECATION_WARNINGS="False"),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    (rung,) = json.loads(rung_file.read_text())
    return rung, proc.stdout


def test_switch_rung_passes_with_pauses_and_marks_and_names_the_port_that_drops(emulator, tmp_path) -> None:
    counters = emulator.workdir / "counters.json"
    # Lossless class doing its job: PFC pauses and ECN marks in qos-group 3, drops only in the lossy class 0.
    healthy = {
        "Ethernet1/1": {"3": {"tx-pause": 150, "rx-pause": 20, "ecn-marked": 42, "tx-pkts": 100000}},
        "Ethernet1/2": {"0": {"dropped": 7, "tx-pkts": 5000}},
    }
    rung, out = switch_rung(tmp_path / "healthy", emulator.port, counters, healthy)
    assert rung["name"] == "switch" and rung["status"] == "pass", rung
    assert rung["value"] == 0 and rung["threshold"] == 0 and rung["unit"] == "packets"
    # Every RoCE port of the lab switch (one per node) was read, each named with the node behind it.
    assert sorted(rung["deltas"]) == [f"lab-switch:Ethernet1/{i}" for i in (1, 2, 3)], rung["deltas"]
    assert rung["deltas"]["lab-switch:Ethernet1/1"]["pause_tx"] == 150
    assert rung["deltas"]["lab-switch:Ethernet1/1"]["pause_rx"] == 20
    assert rung["deltas"]["lab-switch:Ethernet1/1"]["ecn_q3"] == 42
    assert rung["deltas"]["lab-switch:Ethernet1/2"]["drops_q0"] == 7
    port1 = next(c for c in rung["checks"] if "Ethernet1/1" in c["detail"])
    assert port1["host"] == "lab-node1" and "150 sent" in port1["detail"] and "42 ECN-marked" in port1["detail"]
    assert (
        "[PASS] switch" in out
        and rung["reason"] == "no drops in qos-group 3 on 3 port(s); 170 PFC pauses, 42 ECN-marked"
    )

    # Then three packets dropped in the lossless class on lab-node3's port: only what grew between reads counts.
    dropped = {**healthy, "Ethernet1/3": {"3": {"dropped": 3, "tx-pause": 9}}}
    rung, out = switch_rung(tmp_path / "drops", emulator.port, counters, dropped)
    assert rung["status"] == "fail" and rung["value"] == 3, rung
    assert rung["bad_hosts"] == ["lab-node3"], rung
    assert "lab-switch Ethernet1/3 (lab-node3): 3 dropped in qos-group 3" in rung["reason"], rung["reason"]
    assert "[FAIL] switch" in out
