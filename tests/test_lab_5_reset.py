"""playbooks/reset.yml on the lab the suite converged (test_lab_2_site's site.yml on the fresh lab, then the training,
faults and ladder tests): every node and the switch hash as on the fresh lab (tests/lab_state.py, taken by the
`lab_cluster` fixture right after `lab up`); so do they after a site.yml that failed midway; site.yml then converges
again to the state it had before the reset.

Reset runs with -e reset_packages=true (the packages the project installed go too: the fresh lab had none of them)
and -e reset_train_runs=true (the runs the training tests left). Run alone, the file converges the fresh lab first.
"""

from __future__ import annotations

import pytest

from tests import lab_state
from tests.conftest import play_recap, playbook, tail

pytestmark = pytest.mark.lab

RESET = ["-e", "reset_confirm=yes", "-e", "reset_packages=true", "-e", "reset_train_runs=true"]
# A site.yml that fails midway: the fabric addresses, the host QoS, the firewall and the switch are applied, then the
# venv play fails its input check (a pinned file the controller lacks); node_health never runs.
MIDWAY = [
    "--tags",
    "common,rdma_netplan,rdma_qos,fabric_firewall,nxos_roce_qos,train_venv",
    "-e",
    "train_venv_requirements_file=/nonexistent/requirements.txt",
]


def state(lab_cluster) -> dict:
    return lab_state.snapshot(lab_cluster["hosts"])


def same(before: dict, after: dict, what: str, ignore: tuple[str, ...] = ()) -> None:
    diff = lab_state.differences(before, after, ignore)
    assert not diff, f"{what}:\n" + "\n".join(diff)


@pytest.fixture(scope="module")
def converged(lab_cluster) -> dict:
    """The converged lab's snapshot; run alone, this file converges the fresh lab first."""
    now = state(lab_cluster)
    if all(not any(p.startswith("/var/lib/rdma-llm/reset") for p in now[h]["files"]) for h in lab_cluster["hosts"]):
        proc = playbook("playbooks/site.yml")
        assert proc.returncode == 0, tail(proc)
        now = state(lab_cluster)
    assert lab_state.differences(lab_cluster["fresh"], now), "site.yml changed nothing the snapshot sees"
    return now


def test_reset_is_refused_without_the_confirmation_and_check_mode_changes_nothing(lab_cluster, converged) -> None:
    refused = playbook("playbooks/reset.yml", timeout=300)
    assert refused.returncode != 0, tail(refused)
    assert "confirm with -e reset_confirm=yes" in " ".join(refused.stdout.split()), tail(refused)
    dry = playbook("playbooks/reset.yml", "--check", "--diff", "-e", "reset_packages=true", timeout=900)
    assert dry.returncode == 0, tail(dry)
    flat = " ".join(dry.stdout.split())
    # What reset would do: the role's netplan file goes, the switch's policy goes (its diff), the venv goes.
    assert "remove /etc/netplan/60-rdma-llm-fabric.yaml (created by the project)" in flat, tail(dry)
    assert "no class-map type qos match-any ROCE" in flat, tail(dry)
    assert "remove /opt/rdma-llm/venv (created by the project)" in flat, tail(dry)
    same(converged, state(lab_cluster), "--check changed the lab")


def test_reset_gives_back_the_fresh_lab(lab_cluster, converged) -> None:
    proc = playbook("playbooks/reset.yml", *RESET)
    assert proc.returncode == 0, tail(proc)
    same(lab_cluster["fresh"], state(lab_cluster), "after reset.yml the lab differs from the fresh lab")
    again = playbook("playbooks/reset.yml", *RESET)
    assert again.returncode == 0, tail(again)
    changed = {h: r["changed"] for h, r in play_recap(again.stdout).items() if r["changed"]}
    assert not changed, f"a second reset changed something: {changed}\n{tail(again)}"


def test_reset_after_a_site_run_that_failed_midway(lab_cluster, converged) -> None:
    failed = playbook("playbooks/site.yml", *MIDWAY)
    assert failed.returncode != 0, tail(failed)
    assert "train_venv_requirements_file (/nonexistent/requirements.txt)" in " ".join(failed.stdout.split())
    half = state(lab_cluster)
    node = lab_cluster["hosts"][0]
    assert any(a[1] == "10.77.250.11" for i in half[node]["addr"] if i[0] == "rdma0" for a in i[2]), half[node]["addr"]
    assert "fabric_firewall" in half[node]["nft"][1] and "ROCE_QOS_MARKING" in half["lab-switch"]["running"]
    proc = playbook("playbooks/reset.yml", *RESET)
    assert proc.returncode == 0, tail(proc)
    same(
        lab_cluster["fresh"], state(lab_cluster), "after reset.yml of a half-applied lab it differs from the fresh lab"
    )


def test_site_converges_again_after_reset(lab_cluster, converged) -> None:
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    # The same state as before the reset; /var/lib/rdma-llm holds the node check's counter reading (its own time) and
    # the reset records (those of the training tests' launches are not made again).
    same(converged, state(lab_cluster), "site.yml after reset", ignore=("/var/lib/rdma-llm",))
