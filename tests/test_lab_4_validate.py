"""validate.yml end to end on a 3-host lab: one host's fabric NIC is throttled with tc and the verdict must fail at
the TCP link rung and name that host and its pairs, after the inventory, reachability, node-health and path-MTU
rungs passed and the RDMA rungs were skipped with their reason.

Runs after test_lab_2_site and test_lab_3_train (which keep the session lab at 2 hosts): it adds a third host
and converges it with site.yml.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lab import cluster
from tests.conftest import ROOT, playbook, tail

pytestmark = pytest.mark.lab

VALIDATE = ROOT / "artifacts" / "validate"
SHORT = ["-e", "pair_seconds=2"]


def ssh(node: str, *command: str) -> subprocess.CompletedProcess:
    ip = cluster.Node(int(node.removeprefix("lab-node"))).mgmt_ip
    return subprocess.run(cluster.ssh_cmd(ip, *command), capture_output=True, text=True, timeout=60, check=False)


def latest_verdict(before: set[str]) -> tuple[Path, dict]:
    new = sorted(p for p in VALIDATE.iterdir() if p.name not in before) if VALIDATE.exists() else []
    assert new, "validate.yml wrote no verdict directory"
    return new[-1], json.loads((new[-1] / "verdict.json").read_text())


def existing() -> set[str]:
    return {p.name for p in VALIDATE.iterdir()} if VALIDATE.exists() else set()


@pytest.fixture(scope="module")
def lab3(lab_cluster) -> list[str]:
    state = cluster.up(3)
    proc = playbook("playbooks/site.yml", timeout=1800)
    assert proc.returncode == 0, tail(proc)
    return state["hosts"]


def rungs(verdict: dict) -> dict[str, dict]:
    return {r["name"]: r for r in verdict["rungs"]}


def host_side_veth(node: str) -> str:
    """The controller-side end of a lab host's fabric veth (its peer ifindex is the container's iflink)."""
    iflink = ssh(node, "cat", "/sys/class/net/rdma0/iflink").stdout.strip()
    for path in Path("/sys/class/net").iterdir():
        if (path / "ifindex").read_text().strip() == iflink:
            return path.name
    raise AssertionError(f"no host interface with ifindex {iflink} for {node}")


@pytest.fixture
def throttled(lab3):
    """Shape lab-node3's fabric link to 10 Mbit/s both ways (tbf on both ends of its veth; built into the kernel)."""
    node = lab3[-1]
    outer = host_side_veth(node)
    shape = ["root", "tbf", "rate", "10mbit", "burst", "32kb", "latency", "100ms"]
    inner = ssh(node, "tc", "qdisc", "replace", "dev", "rdma0", *shape)
    assert inner.returncode == 0, inner.stderr
    subprocess.run(["tc", "qdisc", "replace", "dev", outer, *shape], check=True)
    try:
        yield node
    finally:
        ssh(node, "tc", "qdisc", "del", "dev", "rdma0", "root")
        subprocess.run(["tc", "qdisc", "del", "dev", outer, "root"], check=False)


def test_validate_names_the_throttled_host(lab3, throttled) -> None:
    before = existing()
    proc = playbook("playbooks/validate.yml", *SHORT, timeout=900)
    assert proc.returncode != 0, "a throttled host must fail the ladder"
    _, verdict = latest_verdict(before)
    assert verdict["status"] == "fail" and verdict["first_failure"] == "tcp_bw", verdict["rungs"]
    assert verdict["bad_hosts"] == [throttled], verdict
    assert sorted(map(tuple, verdict["bad_pairs"])) == sorted(
        tuple(sorted((h, throttled), key=lab3.index)) for h in lab3 if h != throttled
    )
    by = rungs(verdict)
    for name in ("inventory", "reachability", "node_health", "path_mtu"):
        assert by[name]["status"] == "pass", by[name]
    # No RDMA in the lab: said so, never passed; the links were measured over TCP instead.
    for name in ("rdma_bw", "rdma_lat"):
        assert by[name]["status"] == "skip" and "no RDMA device" in by[name]["reason"], by[name]
    tcp = by["tcp_bw"]
    # veth: no line rate, so no absolute threshold; the consistency check against the best pair finds the host.
    assert tcp["status"] == "fail" and tcp["threshold"] is None and throttled in tcp["reason"]
    assert len(tcp["pairs"]) == 3 and all(p["gbps"] is not None for p in tcp["pairs"]), tcp["pairs"]
    assert sorted(verdict["matrix"]["failed"]) == verdict["bad_pairs"]
    assert "[FAIL] tcp_bw" in proc.stdout and "[SKIP] rdma_bw" in proc.stdout
    # Stopped at the first failure: later rungs say so.
    assert by["allreduce"]["status"] == "skip" and "stopped at the failing rung tcp_bw" in by["allreduce"]["reason"]
    assert f"bad host(s): {throttled}" in proc.stdout
