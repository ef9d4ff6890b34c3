"""The node_health role on the controller alone (no lab): it installs rdma-node-check and its config (from the
inventory and the newest passing verdict), again without a change, and the installed command runs by itself on a
fake root (the recorded H100 node's sysfs, recorded tool outputs on its PATH) with the exit codes a scheduler reads.

The node is this machine (local connection); the install paths point into the test's directory. Molecule: not yet
(the role only writes three files and runs the command; this test runs it on a real host, the controller).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import build

from tests.conftest import ROOT, playbook, tail

pytestmark = pytest.mark.lint

FIX = ROOT / "tests" / "fixtures" / "node_check"


def inventory(tmp_path: Path) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventory" / "lab" / "group_vars", inv / "group_vars")
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "cluster_fabric_interfaces": [{"name": "lo", "addresses": ["10.99.0.2/24"], "mtu": 9000}],
        "cluster_rdma_devices": ["mlx5_0"],
        "node_health_command": str(tmp_path / "sbin" / "rdma-node-check"),
        "node_health_slurm_command": str(tmp_path / "sbin" / "rdma-node-health-slurm"),
        "node_health_config_file": str(tmp_path / "etc" / "node-check.json"),
        "node_health_state_dir": str(tmp_path / "state"),
        "node_health_verdict_dir": str(tmp_path / "validate"),
        "node_health_thresholds": {"xid_window_s": 3600},
    }
    data = {"all": {"children": {"rdma_nodes": {"hosts": {"here": host}}, "switches": {"hosts": {}}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))
    return inv


def verdict(tmp_path: Path) -> None:
    """A passing verdict of the ladder that validated `here` with an InfiniBand rail at 400 Gb/s."""
    folder = tmp_path / "validate" / "20251117-080000"
    folder.mkdir(parents=True)
    rung = {"name": "node_health", "status": "pass", "rail_speeds": {"here": {"mlx5_0:1": 400.0}}, "checks": []}
    data = {"status": "pass", "finished": "2025-11-17T08:10:00Z", "hosts": ["here"], "rungs": [rung]}
    (folder / "verdict.json").write_text(json.dumps(data))


def fake_node(tmp_path: Path) -> tuple[Path, dict]:
    """The recorded H100 node's RDMA devices under a fake root, and a PATH of tools that print recordings."""
    root = tmp_path / "root"
    shutil.copytree(FIX / "sysfs_h100", root / "sys/class/infiniband")
    (root / "proc").mkdir()
    (root / "proc/stat").write_text("btime 1763000000\n")
    net = root / "sys/class/net/lo"
    net.mkdir(parents=True)
    for name, value in {"operstate": "unknown", "carrier": "1", "mtu": "65536"}.items():
        (net / name).write_text(value + "\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in {"ibv_devinfo": (ROOT / "tests/fixtures/validate/ibv_devinfo_ib.txt").read_text()}.items():
        (tools / f"{name}.out").write_text(text)
        script = tools / name
        script.write_text(f"#!/bin/sh\ncat '{tools / name}.out'\n")
        script.chmod(0o755)
    # The command's `#!/usr/bin/python3` is this machine's; nothing else of this machine is on PATH.
    env = {**os.environ, "PATH": str(tools)}
    return root, env


def test_role_installs_the_command_and_its_config_and_the_command_runs_alone(tmp_path: Path) -> None:
    verdict(tmp_path)
    inv = inventory(tmp_path)
    first = playbook("playbooks/node_health.yml", inventory=inv, timeout=300)
    assert first.returncode == 0, tail(first)
    assert "changed=2" in first.stdout or "changed=3" in first.stdout, tail(first)
    command = tmp_path / "sbin" / "rdma-node-check"
    config = json.loads((tmp_path / "etc" / "node-check.json").read_text())
    # The installed command is the zipapp of module_utils/node/ (lookup node_check_zipapp), byte for byte.
    assert command.read_bytes() == build.archive(build.files())
    assert os.access(command, os.X_OK)
    # Slurm's HealthCheckProgram (no arguments): the command with this node's config and state, as Slurm's check.
    wrapper = tmp_path / "sbin" / "rdma-node-health-slurm"
    config_file, state_dir = tmp_path / "etc" / "node-check.json", tmp_path / "state"
    assert os.access(wrapper, os.X_OK) and wrapper.read_text().splitlines()[-1] == (
        f"exec {command} --config {config_file} --state-dir {state_dir} --brief --slurm"
    )
    # The config: the inventory's values, every threshold written out, this node's baseline.
    assert config["host"] == "here" and config["interfaces"] == [{"name": "lo", "address": "10.99.0.2", "mtu": 9000}]
    assert config["devices"] == ["mlx5_0"] and config["thresholds"]["xid_window_s"] == 3600
    assert config["thresholds"]["xids"][0] == 48 and config["baseline"]["rail_gbps"] == {"mlx5_0:1": 400.0}
    assert config["baseline"]["verdict"] == "20251117-080000/verdict.json"
    # It ran once on this machine and said so, whatever its verdict (the play never fails on it).
    assert "here: " in first.stdout and any(w in first.stdout for w in ("pass: ", "warn: ", "fail: ")), tail(first)
    # Idempotent.
    again = playbook("playbooks/node_health.yml", inventory=inv, timeout=300)
    assert again.returncode == 0 and "changed=0" in again.stdout, tail(again)
    # Check mode on a fresh node changes nothing and runs nothing.
    (tmp_path / "etc" / "node-check.json").unlink()
    dry = playbook("playbooks/node_health.yml", "--check", inventory=inv, timeout=300)
    assert dry.returncode == 0 and not (tmp_path / "etc" / "node-check.json").exists(), tail(dry)
    playbook("playbooks/node_health.yml", inventory=inv, timeout=300)

    # The installed command alone, as a scheduler calls it, on the recorded H100 node.
    root, env = fake_node(tmp_path)
    args = [str(command), "--config", str(tmp_path / "etc" / "node-check.json"), "--root", str(root)]
    args += ["--state-dir", str(tmp_path / "node-state")]

    def check(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([*args, *extra], env=env, text=True, capture_output=True, timeout=60, check=False)

    # lo is up but not bound to an RDMA port; the ports are InfiniBand on an Ethernet inventory, the NDR port runs
    # at 400 Gb/s as it passed the ladder: the verdict names the binding.
    run = check()
    result = json.loads(run.stdout)
    assert run.returncode == 2 and result["status"] == "fail" and result["exit"] == 2, run.stdout
    assert result["reason"] == "lo: no RDMA port is bound to lo (devices: mlx5_0, mlx5_bond_0)", result["reason"]
    skipped = {c["check"]: c["detail"] for c in result["checks"] if c["status"] == "skip"}
    assert skipped["gpus"] == "no GPU" and skipped["port counters"].startswith("first reading: 2 port(s)")
    brief = check("--brief")
    assert brief.returncode == 2 and brief.stdout == f"fail: {result['reason']}\n"
    # Its counters between two runs: one that grows fails, naming device, port and counter.
    counter = root / "sys/class/infiniband/mlx5_0/ports/1/counters/link_downed"
    counter.write_text("1\n")
    grew = check("--only", "counters", "--brief")
    assert grew.returncode == 2 and grew.stdout.startswith("fail: mlx5_0 port 1: link_downed +1 (since "), grew.stdout
    assert check("--only", "counters", "--brief").returncode == 0
    # A usage error is 3, never the 2 of a failed node.
    assert check("--only", "everything").returncode == 3
