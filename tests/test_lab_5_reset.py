"""playbooks/reset.yml on the lab the suite used (test_lab_2_site's site.yml, then Slurm, the training, faults and
ladder tests), last of the lab's tests: every node and the switch as on the fresh lab (tests/lab_state.py, taken by
the `lab_cluster` fixture right after `lab up`), and a second reset changes nothing. test_lab_2_site resets a
half-applied lab before its converge, which is then site.yml after a reset.

Reset runs with -e reset_packages=true (the packages the project installed go too: the fresh lab had none of them)
and -e reset_train_runs=true (the runs the training tests left). Run alone, the file converges the fresh lab first.
"""

from __future__ import annotations

import shlex
import subprocess
import time

import pytest

from lab import cluster
from tests import lab_state
from tests.conftest import play_recap, playbook, tail
from tests.test_lab_2_site import RESET
from tests.test_lab_3_train import ssh, ssh_ok

pytestmark = pytest.mark.lab

# The managed file test 1 edits by hand after site.yml wrote it; reset keeps a copy (issue #46 item 4).
EDITED = "/etc/netplan/60-rdma-llm-fabric.yaml"
HAND_EDIT = "# edited by hand"


def state(lab_cluster) -> dict:
    return lab_state.snapshot(lab_cluster["hosts"])


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
    # A job Slurm holds (lab-node1 is the controller) stops a confirmed reset before any change.
    controller = cluster.Node(1).mgmt_ip
    job = subprocess.run(
        cluster.ssh_cmd(controller, "sbatch", "--parsable", "--job-name=reset-guard", "--wrap='sleep 600'"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr
    try:
        held = playbook("playbooks/reset.yml", *RESET, timeout=300)
    finally:
        subprocess.run(cluster.ssh_cmd(controller, "scancel", job.stdout.strip()), capture_output=True, timeout=60)
        for _ in range(30):  # a cancelled job stays in squeue while it completes
            queue = subprocess.run(cluster.ssh_cmd(controller, "squeue", "--noheader"), capture_output=True, timeout=60)
            if not queue.stdout.strip():
                break
            time.sleep(1)
    assert held.returncode != 0, tail(held)
    assert "holds jobs" in held.stdout and "nothing was changed" in " ".join(held.stdout.split()), tail(held)
    # A managed file the user edited by hand after site.yml wrote it (test_reset_gives_back_the_fresh_lab resets it).
    node = lab_cluster["hosts"][-1]
    ssh_ok(node, f"printf '%s\\n' {shlex.quote(HAND_EDIT)} >> {EDITED}")
    ssh_ok("lab-node1", "test -d /var/lib/mysql && test -f /etc/mysql/debian.cnf && test -d /var/log/slurm")
    edited = state(lab_cluster)
    dry = playbook("playbooks/reset.yml", "--check", "--diff", "-e", "reset_packages=true", timeout=900)
    assert dry.returncode == 0, tail(dry)
    flat = " ".join((dry.stdout + dry.stderr).split())  # the module's warnings go to stderr
    # What reset would do: the role's netplan file goes, the switch's policy goes (its diff), the venv goes.
    assert f"remove {EDITED} (created by the project)" in flat, tail(dry)
    assert "no class-map type qos match-any ROCE" in flat, tail(dry)
    assert "remove /opt/rdma-llm/venv (created by the project)" in flat, tail(dry)
    # ... and says what the real run will: the hand edit kept, the packages and what they left removed.
    assert f"{EDITED} was changed since the project last wrote it: reset would keep it as" in flat, tail(dry)
    assert "remove /var/lib/mysql (what mariadb-server left: purged)" in flat, tail(dry)
    assert "-e reset_packages=true removes them" not in flat, "the dry run said packages stay: " + tail(dry)
    lab_state.assert_same(edited, state(lab_cluster), "--check changed the lab")


def test_reset_gives_back_the_fresh_lab(lab_cluster, converged) -> None:
    # A rejoin unit a run left on a host that was out of reach when it ended (train_launch's systemd/start.yml):
    # reset.yml removes it like the rest (the fresh lab's /etc/systemd/system is in the snapshot).
    left = "/etc/systemd/system/train-left1-rejoin.service"
    unit = "[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    put = ssh(lab_cluster["hosts"][-1], f"printf %s {shlex.quote(unit)} > {left} && systemctl enable {left}")
    assert put.returncode == 0, put.stderr
    proc = playbook("playbooks/reset.yml", *RESET)
    assert proc.returncode == 0, tail(proc)
    # The hand edit of the test before: kept, with a warning, and the file reset as any other.
    node = lab_cluster["hosts"][-1]
    warned = " ".join((proc.stdout + proc.stderr).split())  # the module's warnings go to stderr
    assert f"{EDITED} was changed since the project last wrote it: kept as" in warned, tail(proc)
    copies = ssh_ok(node, f"ls /var/lib/rdma-llm/kept{EDITED}.*").stdout.split()
    assert len(copies) == 1, copies
    assert ssh_ok(node, f"cat {copies[0]}").stdout.endswith(HAND_EDIT + "\n")
    assert ssh(node, f"test -e {EDITED}").returncode == 1, "the file the project created is still there"
    # MariaDB (accounting) and MUNGE, installed by the project on the controller, leave no data behind.
    left = ssh("lab-node1", "ls -d /var/lib/mysql /etc/mysql /var/log/slurm /var/lib/munge /var/log/munge")
    assert left.stdout.strip() == "", f"left on lab-node1: {left.stdout}"
    # The copy is the user's: reset never removes it. Without it (and the directory it needed) the lab is fresh.
    fresh_dir = lab_cluster["fresh"][node]["files"].get("/var/lib/rdma-llm") == "absent"
    ssh_ok(node, "rm -rf /var/lib/rdma-llm/kept" + (" && rmdir /var/lib/rdma-llm" if fresh_dir else ""))
    lab_state.assert_same(
        lab_cluster["fresh"], state(lab_cluster), "after reset.yml the lab differs from the fresh lab"
    )
    again = playbook("playbooks/reset.yml", *RESET)
    assert again.returncode == 0, tail(again)
    changed = {h: r["changed"] for h, r in play_recap(again.stdout).items() if r["changed"]}
    assert not changed, f"a second reset changed something: {changed}\n{tail(again)}"
