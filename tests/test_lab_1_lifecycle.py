"""`lab up` is idempotent and `lab down` leaves no container, network or process behind."""

from __future__ import annotations

import subprocess

import pytest

from lab import cluster, podman

pytestmark = pytest.mark.lab


def lab_processes() -> list[str]:
    """conmon processes of lab containers, and this checkout's lab emulators (a Molecule scenario or a
    switch test running beside the lab has its own, in its own directory)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if ("conmon" in line and "lab-node" in line) or ("lab.nxos_emu" in line and str(cluster.STATE_ROOT) in line)
    ]


def test_up_twice_then_down_leaves_nothing(lab_image) -> None:
    cluster.down()
    first = cluster.up(2)
    try:
        ids = sorted(c["Id"] for c in cluster.containers())
        again = cluster.up(2)  # idempotent: the same containers, nothing restarted
        assert sorted(c["Id"] for c in cluster.containers()) == ids
        assert again["hosts"] == first["hosts"]
        assert cluster.INVENTORY.exists()
        # Their CPU weight among the machine's containers, as podman applied it.
        shares = {c["HostConfig"]["CpuShares"] for c in podman.jsonout("inspect", *ids)}
        assert shares == {cluster.NODE_CPU_SHARES}, shares
        # Every host answers over SSH with the lab key and has an unaddressed fabric NIC.
        for i in (1, 2):
            node = cluster.Node(i)
            proc = subprocess.run(
                cluster.ssh_cmd(node.mgmt_ip, "ip", "-br", "addr", "show", "rdma0"),
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert proc.returncode == 0, proc.stderr
            assert "inet " not in proc.stdout
    finally:
        cluster.down()
    assert cluster.containers() == []
    assert cluster.networks() == []
    assert podman.jsonout("ps", "-a", "--filter", "name=lab-node", "--format", "json") == []
    assert lab_processes() == []
    assert not cluster.INVENTORY.exists()
