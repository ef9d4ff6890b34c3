"""The lab's hosts by name from the lab tests: a command over SSH, Slurm's view of a node, a fabric link shaped."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.plan import parse

from lab import cluster


def ssh(node: str, *command: str) -> subprocess.CompletedProcess:
    ip = cluster.Node(int(node.removeprefix("lab-node"))).mgmt_ip
    return subprocess.run(cluster.ssh_cmd(ip, *command), capture_output=True, text=True, timeout=60, check=False)


def squeue(node: str, *args: str) -> str:
    done = ssh(node, "squeue", "--noheader", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def main_pid(node: str, unit: str) -> str:
    done = ssh(node, "systemctl", "show", "--property=MainPID", "--value", unit)
    assert done.returncode == 0 and done.stdout.strip() not in ("", "0"), (unit, done.stdout, done.stderr)
    return done.stdout.strip()


def slurm_node(node: str) -> dict[str, str]:
    line = ssh(node, "scontrol", "show", "node", node, "--oneliner").stdout
    return {"State": re.search(r"State=(\S+)", line)[1], "Reason": (re.search(r"Reason=(.*)", line) or [""] * 2)[1]}


def host_side_veth(node: str, ifname: str = "rdma0") -> str:
    """The controller-side end of a lab host's fabric veth (its peer ifindex is the container's iflink)."""
    iflink = ssh(node, "cat", f"/sys/class/net/{ifname}/iflink").stdout.strip()
    for path in Path("/sys/class/net").iterdir():
        if (path / "ifindex").read_text().strip() == iflink:
            return path.name
    raise AssertionError(f"no host interface with ifindex {iflink} for {node}")


def throttle(node: str, ifname: str = "rdma0"):
    """Shape a lab host's fabric link to 10 Mbit/s both ways (tbf on both ends of its veth; built into the
    kernel); returns the function that undoes it."""
    outer = host_side_veth(node, ifname)
    shape = ["root", "tbf", "rate", "10mbit", "burst", "32kb", "latency", "100ms"]
    inner = ssh(node, "tc", "qdisc", "replace", "dev", ifname, *shape)
    assert inner.returncode == 0, inner.stderr
    subprocess.run(["tc", "qdisc", "replace", "dev", outer, *shape], check=True)

    def undo() -> None:
        ssh(node, "tc", "qdisc", "del", "dev", ifname, "root")
        subprocess.run(["tc", "qdisc", "del", "dev", outer, "root"], check=False)

    return undo


def port_config(switch: str, port: str) -> list[str]:
    """The lines under `interface <port>` in a leaf-spine emulator's running config, as its state file keeps it."""
    running = json.loads((cluster.FABRIC_DIR / switch / "state.json").read_text())["running"]
    return [c.line for n in parse(running) if n.line == f"interface {port}" for c in n.children]
