"""Netplan safety without the controller: a change that cuts the controller off reverts by itself.

On a lab host whose fabric is converged, the rdma_netplan role applies a file with one extra route: the
controller's own address (the management gateway 10.77.0.1, where the lab's SSH comes from) via a fabric
next hop nobody answers for. From that `netplan apply` on, the host's replies to the controller vanish.
The test sees the change live on the host (through podman exec, out of band) and the controller unable to
reach it, kills ansible-playbook (the controller is gone for good), and then waits
for the host to answer again by itself: its host-side revert timer must have restored the previous file
and re-applied it, with no controller involved. The host must end byte-identical on its old netplan file,
with its old addresses and routes. The revert delay is set short (REVERT_AFTER) to keep the test quick.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, playbook, tail, tool_env

pytestmark = pytest.mark.lab

# Short, to keep the test quick, yet long enough that a loaded machine applies and probes before it fires.
REVERT_AFTER = 30
NETPLAN_FILE = "/etc/netplan/60-rdma-llm-fabric.yaml"


def ssh(ip: str, command: str, timeout: float = 10) -> subprocess.CompletedProcess:
    from lab import cluster

    cmd = cluster.ssh_cmd(ip, "sh", "-s")
    cmd[cmd.index("ConnectTimeout=5")] = "ConnectTimeout=2"
    try:
        return subprocess.run(cmd, input=command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 255, "", "timeout")


def on_host(name: str, *argv: str) -> str:
    """A command's output on the host through podman exec (a console: works while SSH is cut off)."""
    from lab import podman

    proc = podman.run("exec", name, *argv, check=False)
    return proc.stdout + proc.stderr


def host_journal(name: str) -> str:
    return on_host(name, "journalctl", "-q", "--no-pager", "-n", "40")


def wait_for(predicate, seconds: float, step: float = 1.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def test_cut_controller_reverts_on_the_host_alone(lab_cluster, tmp_path: Path) -> None:
    from lab import cluster

    proc = playbook("playbooks/network.yml", timeout=600)
    assert proc.returncode == 0, tail(proc)
    node = cluster.Node(1)
    state = f"sha256sum {NETPLAN_FILE}; ip -o addr show dev rdma0; ip route show"
    before = ssh(node.mgmt_ip, state)
    assert before.returncode == 0, before.stderr

    hosts = yaml.safe_load((ROOT / "inventory" / "lab" / "hosts.yml").read_text())
    iface = hosts["all"]["children"]["rdma_nodes"]["hosts"][node.name]["cluster_fabric_interfaces"][0]
    cutting = {**iface, "routes": [{"to": f"{cluster.MGMT_GW}/32", "via": f"{cluster.FABRIC_PREFIX}.250"}]}
    play = tmp_path / "cut.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "A fabric change that cuts the controller off",
                    "hosts": node.name,
                    "gather_facts": False,
                    "roles": [
                        {
                            "role": "rdma_netplan",
                            "rdma_netplan_interfaces": [cutting],
                            "rdma_netplan_revert_after": REVERT_AFTER,
                            "rdma_netplan_connect_timeout": REVERT_AFTER - 5,
                            "rdma_netplan_check_peers": False,
                        }
                    ],
                }
            ]
        )
    )
    log = (tmp_path / "play.log").open("w")
    run = subprocess.Popen(
        ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), str(play)],
        cwd=ROOT,
        env=tool_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    via = f"{cluster.FABRIC_PREFIX}.250"
    try:
        # Watched out of band (podman exec, like a console): the change is live once the route to the
        # controller leaves through the fabric...
        applied = wait_for(
            lambda: f"via {via} " in on_host(node.name, "ip", "route", "show", f"{cluster.MGMT_GW}/32"), 240
        )
        assert applied, "the change was never applied: " + (tmp_path / "play.log").read_text()[-3000:]
        cut_at = time.monotonic()
        # ... and from then on the controller cannot reach the host.
        probe = ssh(node.mgmt_ip, "true", timeout=10)
        assert probe.returncode != 0, "the change did not cut the controller off"
    finally:
        # The controller is gone: nothing it started may restore the host.
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        log.close()
    back = wait_for(lambda: ssh(node.mgmt_ip, "true", timeout=4).returncode == 0, REVERT_AFTER + 60)
    assert back, f"{node.name} did not come back by itself within {REVERT_AFTER + 60} s:\n" + host_journal(node.name)
    back_after = time.monotonic() - cut_at
    after = ssh(node.mgmt_ip, state)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout, f"before:\n{before.stdout}\nafter:\n{after.stdout}"
    journal = ssh(node.mgmt_ip, "journalctl -q -t rdma-llm-netplan-revert --no-pager")
    assert "previous /etc/netplan/60-rdma-llm-fabric.yaml restored" in journal.stdout, journal.stdout
    assert back_after < REVERT_AFTER + 60, back_after
    # Ansible reaches it again too (its persistent connection from the killed run must not hang later tests).
    ping = subprocess.run(
        ["ansible", "-i", str(ROOT / "inventory" / "lab"), node.name, "-m", "ansible.builtin.ping"],
        cwd=ROOT,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ping.returncode == 0, ping.stdout[-2000:] + ping.stderr[-2000:]
    print(f"{node.name}: cut off, back by itself {back_after:.0f} s after the apply (revert after {REVERT_AFTER} s)")
