"""Faults during a lab training run (after test_lab_3_train): each ends in bounded time, with logs from every
host collected and no training process left; the recoverable ones finish the run at max_steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from lab import cluster, podman
from tests.conftest import ROOT, tail, tool_env
from tests.test_lab_3_train import ARTIFACTS, KILL, corpus, no_training_processes, payload, ssh, train  # noqa: F401

pytestmark = pytest.mark.lab


def start_train(*extra: str) -> subprocess.Popen:
    cmd = ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), "playbooks/train.yml", "-e", "model=tiny"]
    return subprocess.Popen(
        [*cmd, "-e", "deadline=900", *extra],
        cwd=ROOT,
        env=tool_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_step(play: subprocess.Popen, hosts: list[str], run_id: str, step: int) -> str:
    """The host of rank 1 once it has trained past `step` (a checkpoint lies behind it)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and play.poll() is None:
        time.sleep(3)
        for host in hosts:
            out = ssh(host, "cat", f"/var/lib/rdma-llm/runs/{run_id}/out/metrics.jsonl").stdout.splitlines()
            steps = [json.loads(x)["step"] for x in out if '"rank": 1' in x and '"kind": "train"' in x]
            if steps and max(steps) >= step:
                return host
    raise AssertionError(f"rank 1 never reached step {step}: {play.stdout.read() if play.poll() is not None else ''}")


def finish(play: subprocess.Popen, timeout: float) -> str:
    try:
        out, _ = play.communicate(timeout=timeout)
        return out
    finally:
        if play.poll() is None:
            os.killpg(play.pid, signal.SIGTERM)
            play.wait(30)


def kill_a_rank(host: str, run_id: str) -> None:
    """SIGKILL the workers torchrun (the unit's main process) spawned on `host`."""
    main_pid = ssh(host, "systemctl", "show", "-p", "MainPID", "--value", f"train-{run_id}").stdout.strip()
    workers = ssh(host, "ps", "-o", "pid=", "--ppid", main_pid).stdout.split()
    assert workers, f"no worker under torchrun {main_pid} on {host}"
    ssh(host, "kill", "-KILL", *workers)


def test_killed_rank_restarts_by_itself_and_finishes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-restart-{int(time.time())}", 60
    play = start_train(
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", "-e", "max_restarts=1", *payload(KILL)
    )
    victim = wait_for_step(play, hosts, run_id, 15)
    kill_a_rank(victim, run_id)
    out = finish(play, 600)
    assert play.returncode == 0, out[-4000:]
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    assert len(report["restarts"]) == 1, report["restarts"]
    restart = report["restarts"][0]
    assert restart["resumed_at_step"] >= 10 and restart["steps_lost"] >= 0, restart
    assert f"{victim}: local rank 0" in restart["cause"] and "SIGKILL" in restart["cause"], restart
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    no_training_processes(hosts)


def test_stopped_node_fails_within_two_minutes_then_resumes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-node-{int(time.time())}", 60
    common = ["-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *payload(KILL)]
    play = start_train(*common)
    wait_for_step(play, hosts, run_id, 15)
    victim = hosts[-1]  # not rank 0's host, which holds the rendezvous
    t0 = time.monotonic()
    podman.run("stop", "-t", "2", victim)
    try:
        out = finish(play, 300)
        took = time.monotonic() - t0
    finally:
        podman.run("start", victim)
        node = cluster.Node(int(victim.removeprefix("lab-node")))
        cluster.wait_ssh(node, time.monotonic() + 120)
    assert play.returncode != 0, out[-4000:]
    assert took < 150, f"the playbook took {took:.0f} s to fail after {victim} stopped"
    assert f"job failed on {victim}: unreachable" in " ".join(out.split()), out[-4000:]
    assert (ARTIFACTS / run_id / hosts[0] / "logs" / "torchrun.log").exists()
    no_training_processes(hosts)
    proc = train(*common, "-e", "resume=true")
    assert proc.returncode == 0, tail(proc)
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    no_training_processes(hosts)


def test_fabric_link_down_20s_the_run_still_finishes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-link-{int(time.time())}", 60
    play = start_train(
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *payload({**KILL, "pg_timeout": 90})
    )
    victim = wait_for_step(play, hosts, run_id, 15)
    flap = "ip link set rdma0 down; sleep 20; ip link set rdma0 up"
    ssh(victim, "systemd-run", "--unit=lab-link-flap", "--collect", "sh", "-c", flap)
    t0 = time.monotonic()
    out = finish(play, 600)
    assert play.returncode == 0, out[-4000:]
    assert time.monotonic() - t0 < 300
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    no_training_processes(hosts)
