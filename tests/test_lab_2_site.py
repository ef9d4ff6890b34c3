"""site.yml end to end on a fresh lab: check mode first, then converge, then a second run that changes nothing."""

from __future__ import annotations

import pytest

from tests.conftest import play_recap, playbook, tail

pytestmark = pytest.mark.lab


def test_site_check_diff_on_fresh_lab(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml", "--check", "--diff")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    assert set(lab_cluster["hosts"]) <= set(recap), recap
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap


def test_site_converges(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    assert set(lab_cluster["hosts"]) <= set(recap), recap
    assert all(r["failed"] == 0 for r in recap.values()), recap


def test_site_second_run_changes_nothing(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    changed = {h: r["changed"] for h, r in recap.items() if r["changed"]}
    assert recap and not changed, f"second run changed something: {changed}\n{tail(proc)}"


def test_site_sees_and_repairs_drift(lab_cluster) -> None:
    """The no-change run's shortcuts (dpkg-query before apt, the wheelhouse stamp) still see real drift on a host:
    a removed package and a wheelhouse whose unpack is not stamped are put back; only that host changes."""
    import subprocess

    from lab import cluster

    node = cluster.Node(1)
    drift = "apt-get remove -y -q iperf3 && rm /var/cache/rdma-llm/wheelhouse/.archive.sha256"
    subprocess.run(cluster.ssh_cmd(node.mgmt_ip, drift), check=True, capture_output=True, timeout=300)
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    changed = {h: r["changed"] for h, r in recap.items() if r["changed"]}
    assert set(changed) == {node.name}, f"{changed}\n{tail(proc)}"
    check = "dpkg-query -W -f '${db:Status-Status}' iperf3 && cat /var/cache/rdma-llm/wheelhouse/.archive.sha256"
    after = subprocess.run(cluster.ssh_cmd(node.mgmt_ip, check), capture_output=True, text=True, timeout=60)
    assert after.returncode == 0 and after.stdout.startswith("installed"), after.stdout + after.stderr


def test_lab_venv_imports_the_training_stack(lab_cluster) -> None:
    """The venv role's result on real lab hosts: the pinned CPU torch and the rest of the stack import."""
    import json
    import subprocess

    from lab import cluster

    code = (
        "import json, sys, torch, transformers, datasets, deepspeed, accelerate; "
        "print(json.dumps({'torch': torch.__version__, 'transformers': transformers.__version__, "
        "'datasets': datasets.__version__, 'deepspeed': deepspeed.__version__}))"
    )
    for i, host in enumerate(lab_cluster["hosts"], 1):
        proc = subprocess.run(
            cluster.ssh_cmd(
                cluster.Node(i).mgmt_ip, "DS_ACCELERATOR=cpu", "/opt/rdma-llm/venv/bin/python", "-c", f'"{code}"'
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{host}: {proc.stderr[-2000:]}"
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got["torch"] == "2.13.0+cpu", (host, got)
        assert got["transformers"] and got["datasets"] and got["deepspeed"], (host, got)
