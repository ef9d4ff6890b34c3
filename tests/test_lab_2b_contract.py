"""A bad inventory changes nothing: site.yml against the lab fails in preflight, hosts and switch untouched.

Each case is the lab inventory (a copy of inventory/lab with the hosts.yml `lab up` wrote) with one
documented mistake; the switch cases are mistakes the switch play (the last one) would only meet after
every host play had run. Before and after the run we hash what the host plays and the switch play write:
every file under /etc/netplan, /etc/modules-load.d, /etc/ansible/facts.d and /etc/apt/sources.list.d,
/etc/hosts, /etc/hostname, the installed packages, the training venv's top level, the live addresses of
the fabric NIC; and the emulator's persisted running/startup config and its command log.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, play_recap, playbook, tail

pytestmark = pytest.mark.lab

# One shell line per host: a digest of everything the host plays could change.
HOST_STATE = (
    "set -e; cd /; "
    "{ find etc/netplan etc/modules-load.d etc/ansible/facts.d etc/apt/sources.list.d -type f 2>/dev/null "
    "| sort | xargs -r sha256sum; sha256sum etc/hosts etc/hostname; "
    "dpkg-query -W -f '${Package} ${Version} ${Status}\\n'; ls -la opt/rdma-llm 2>/dev/null || true; "
    "ip -o addr show dev rdma0; ip -o link show dev rdma0 | sed 's/state [A-Z]*//'; hostname; } | sha256sum"
)


def host_digests(hosts: list[str]) -> dict[str, str]:
    from lab import cluster

    out = {}
    for i, host in enumerate(hosts, 1):
        proc = subprocess.run(
            cluster.ssh_cmd(cluster.Node(i).mgmt_ip, "sh", "-s"),
            input=HOST_STATE,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, f"{host}: {proc.stderr[-2000:]}"
        out[host] = proc.stdout.strip()
    return out


def switch_digest() -> dict[str, str]:
    from lab import cluster

    out = {}
    for name in ("state.json", "state.json.commands.jsonl"):
        path = cluster.SWITCH_DIR / name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"
    return out


def _hosts_yml(inv: Path) -> dict:
    return yaml.safe_load((inv / "hosts.yml").read_text())


def _node(data: dict, name: str) -> dict:
    return data["all"]["children"]["rdma_nodes"]["hosts"][name]


def with_node(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(inv: Path) -> None:
        data = _hosts_yml(inv)
        change(_node(data, name))
        (inv / "hosts.yml").write_text(yaml.safe_dump(data))

    return edit


def with_vars(group: str, values: dict) -> Callable[[Path], None]:
    def edit(inv: Path) -> None:
        (inv / "group_vars" / group / "zz_bad.yml").write_text(yaml.safe_dump(values))

    return edit


def fabric(**iface) -> Callable[[dict], None]:
    return lambda host: host["cluster_fabric_interfaces"][0].update(iface)


def with_switch(**values) -> Callable[[Path], None]:
    def edit(inv: Path) -> None:
        data = _hosts_yml(inv)
        data["all"]["children"]["switches"]["hosts"]["lab-switch"].update(values)
        (inv / "hosts.yml").write_text(yaml.safe_dump(data))

    return edit


def head_node_controller(inv: Path) -> None:
    """lab-node2 out of rdma_nodes, the Slurm controller alone (a head node): what a later play changes on it (the
    Slurm play) must wait for the same gate as the nodes."""
    data = _hosts_yml(inv)
    groups = data["all"]["children"]
    head = groups["rdma_nodes"]["hosts"].pop("lab-node2")
    login = {k: v for k, v in groups["rdma_nodes"]["vars"].items() if k.startswith("ansible_")}
    groups["slurm_controllers"]["hosts"] = {"lab-node2": {"ansible_host": head["ansible_host"], **login}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))


# id, edit of the inventory copy, text the failure must contain
CASES = [
    (
        "duplicate-fabric-address",
        with_node("lab-node2", fabric(addresses=["10.77.250.11/24"])),
        "lab-node1: cluster_fabric_interfaces has fabric address 10.77.250.11, also on lab-node2",
    ),
    (
        "fabric-on-management-network",
        with_node("lab-node2", fabric(addresses=["10.77.0.50/24"])),
        "lab-node2: cluster_fabric_interfaces[rdma0].addresses has 10.77.0.50/24, whose subnet holds the "
        "management address (ansible_host)",
    ),
    (
        "mtu-above-9216",
        with_node("lab-node1", fabric(mtu=9300)),
        "lab-node1: cluster_fabric_interfaces[rdma0].mtu 9300 must lie within 576-9216 (ethernet)",
    ),
    (
        "module-name-injection",
        with_vars("rdma_nodes", {"rdma_modules_list": ["ib_umad", "rdma_cm; reboot"]}),
        "rdma_modules_list [1] must be a module name",
    ),
    (
        "cnp-equals-roce-dscp",
        with_vars("all", {"cluster_cnp_dscp": 26}),
        "all: cluster_cnp_dscp 26 equals cluster_roce_dscp: CNPs need their own DSCP",
    ),
    (
        "switch-port-mtu-below-hosts",
        with_vars("switches", {"nxos_roce_qos_mtu": 4000}),
        "lab-switch: nxos_roce_qos_mtu 4000 is below the hosts' fabric MTU 9000",
    ),
    (
        "switch-description-injection",
        with_vars(
            "switches",
            {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "description": "rank 0\nno system qos"}]},
        ),
        "lab-switch: nxos_roce_qos_interfaces Ethernet1/1: description contains a line break",
    ),
    (
        # The switch play runs last: a switch that is down once let six concerns change every node first.
        "switch-does-not-answer",
        with_switch(ansible_port=9),
        "preflight: lab-switch does not answer at 127.0.0.1:9 as admin",
    ),
]


@pytest.fixture(scope="module")
def lab_inventory(lab_cluster, tmp_path_factory) -> Path:
    """A pristine copy of inventory/lab (hosts.yml included) that each case copies again and edits."""
    base = tmp_path_factory.mktemp("lab-inventory") / "lab"
    shutil.copytree(ROOT / "inventory" / "lab", base)
    return base


@pytest.mark.parametrize(("edit", "message"), [pytest.param(e, m, id=i) for i, e, m in CASES])
def test_bad_inventory_changes_nothing(lab_cluster, lab_inventory: Path, tmp_path: Path, edit, message) -> None:
    hosts = list(lab_cluster["hosts"])
    inv = tmp_path / "lab"
    shutil.copytree(lab_inventory, inv)
    edit(inv)
    before = (host_digests(hosts), switch_digest())
    proc = playbook("playbooks/site.yml", inventory=inv, timeout=300)
    after = (host_digests(hosts), switch_digest())
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, tail(proc)
    assert message in out, f"{message!r} not in the failure:\n{tail(proc)}"
    # It stopped in preflight: no other play ran on any host.
    assert "Check the inventory contract" in out and "TASK [rdma_llm.cluster.common" not in out, tail(proc)
    assert later_tasks(proc.stdout) == [], tail(proc)
    recap = play_recap(proc.stdout)
    assert all(r["changed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap
    assert before == after, json.dumps({"before": before, "after": after}, indent=1)


def later_tasks(stdout: str) -> list[str]:
    """The tasks that ran in a play after preflight (a play without hosts left prints its `PLAY [...]` line only)."""
    lines = stdout.splitlines()
    after = next(
        (i for i, line in enumerate(lines) if line.startswith("PLAY [") and not line.startswith("PLAY [Preflight |")),
        len(lines),
    )
    return [line for line in lines[after:] if line.startswith("TASK [")]


def test_a_head_node_controller_waits_for_the_gate(lab_cluster, lab_inventory: Path, tmp_path: Path) -> None:
    """A Slurm controller outside rdma_nodes once escaped the gate: with every node stopped ("nothing was changed"),
    the Slurm play still ran on it and reached its package install. Here lab-node1 does not answer (its SSH port is
    closed) and lab-node2 is the controller of a head node: the gate names lab-node1 and no play after preflight runs
    on either host."""
    hosts = list(lab_cluster["hosts"])
    inv = tmp_path / "lab"
    shutil.copytree(lab_inventory, inv)
    head_node_controller(inv)
    with_node("lab-node1", lambda host: host.update(ansible_port=9))(inv)
    before = host_digests(hosts)
    proc = playbook("playbooks/site.yml", inventory=inv, timeout=300)
    after = host_digests(hosts)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, tail(proc)
    # The host checks' play is any_errors_fatal: the controller may be named too, its own checks cut short.
    assert "preflight: lab-node1" in out and "did not pass the host checks" in out, tail(proc)
    assert later_tasks(proc.stdout) == [], tail(proc)
    # The controller answered its preflight check and nothing after it ran there.
    recap = play_recap(proc.stdout)
    assert recap["lab-node2"]["ok"] > 0 and recap["lab-node2"]["changed"] == 0, recap
    assert before == after, json.dumps({"before": before, "after": after}, indent=1)
