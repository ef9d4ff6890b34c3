"""Faults during a lab training run (after test_lab_3_train): each ends in bounded time, with logs from every
host collected and no training process left; the recoverable ones finish the run at max_steps."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.slurm import parse_scontrol_node

from lab import cluster, podman
from tests.conftest import playbook, tail
from tests.test_lab_3_train import (  # noqa: F401
    ARTIFACTS,
    KILL,
    SMALL,
    corpus,
    finish,
    no_training_processes,
    payload,
    ssh,
    ssh_ok,
    start_train,
    train,
    wait_for_step,
)
from tests.test_lab_4_validate import ROLLING, latest_report  # the rollouts' and repairs' reports

pytestmark = pytest.mark.lab


def losses_continue(run_id: str, host: str, same_world: bool = True) -> None:
    """Rank 0's losses after the last resume go on from the checkpoint (not from an untrained model); with
    `same_world`, a step trained twice (same weights, same data order) gives about the same loss."""
    records = [json.loads(x) for x in (ARTIFACTS / run_id / host / "out" / "metrics.jsonl").read_text().splitlines()]
    rank0 = sorted((r for r in records if r.get("rank") == 0), key=lambda r: r["time"])
    resume = [r for r in rank0 if r["kind"] == "resume"][-1]
    steps = [r for r in rank0 if r["kind"] == "train"]
    before = [r for r in steps if r["time"] < resume["time"]]
    after = [r for r in steps if r["time"] > resume["time"]]
    assert before and after, rank0
    assert after[0]["step"] > resume["step"] >= 10, (resume, after[0])
    assert after[0]["loss_global"] < before[0]["loss_global"] - 0.1, (before[0], after[0])
    same = [r for r in before if r["step"] == after[0]["step"]]
    if same and same_world:  # the same step trained twice, from the same weights and data order
        assert abs(after[0]["loss_global"] - same[-1]["loss_global"]) < 0.3, (same[-1], after[0])


def corrupt_latest_and_kill(host: str, run_id: str) -> str:
    """On `host`, in one shell: truncate the model file of the checkpoint `latest` names (as a disk error would),
    then SIGKILL the workers torchrun spawned, before another checkpoint can be saved. The checkpoint's name."""
    ckpts = f"/var/lib/rdma-llm/runs/{run_id}/out/checkpoints"
    script = (
        f"c=$(cat {ckpts}/latest) && truncate -s 64 {ckpts}/$c/model.pt && "
        f"kill -KILL $(ps -o pid= --ppid $(systemctl show -p MainPID --value train-{run_id})) && echo $c"
    )
    proc = ssh(host, script)
    assert proc.returncode == 0 and proc.stdout.strip().startswith("step_"), (proc.stdout, proc.stderr)
    return proc.stdout.strip()


def test_killed_rank_restarts_by_itself_and_finishes(lab_cluster, corpus) -> None:  # noqa: F811
    """max_restarts=1: a rank killed just after its node's latest checkpoint was damaged. The automatic restart
    verifies it, quarantines it on every node and resumes from the one before; the run completes."""
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-restart-{int(time.time())}", 60
    play = start_train(
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", "-e", "max_restarts=1", *payload(KILL)
    )
    victim = wait_for_step(play, hosts, run_id, 21)  # two checkpoints kept (keep_ckpts 2): step 10 and step 20
    t_kill = time.time()
    damaged = corrupt_latest_and_kill(victim, run_id)
    out = finish(play, 600)
    assert play.returncode == 0, out[-4000:]
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    assert len(report["restarts"]) == 1, report["restarts"]
    restart = report["restarts"][0]
    # The damaged checkpoint was passed over for the one before it, on every node.
    (quarantined,) = report["quarantined"]
    assert quarantined["checkpoint"] == damaged and "model.pt" in quarantined["why"], quarantined
    assert restart["resumed_at_step"] == int(damaged.removeprefix("step_")) - 10, (restart, damaged)
    assert restart["steps_lost"] >= 10, restart
    for host in hosts:
        left = ssh(host, "ls", f"/var/lib/rdma-llm/runs/{run_id}/out/checkpoints").stdout.split()
        assert any(n.startswith(f"quarantine-{damaged}-") for n in left), (host, left)
    # The cause is the rank that died (its signal), not the survivor whose collective broke after it.
    assert restart["cause"].startswith(f"{victim}: local rank 0 killed by SIGKILL"), restart
    took = restart["time"] - t_kill
    print(f"kill -> every rank restarted: {took:.1f} s, steps lost {restart['steps_lost']}")
    assert took < 120, f"the restart took {took:.0f} s"
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    losses_continue(run_id, hosts[0])
    rejoin_units_gone(hosts, run_id)
    no_training_processes(hosts)


def fabric_address(host: str) -> str:
    return cluster.Node(int(host.removeprefix("lab-node"))).fabric_cidr.split("/")[0]


def stop_node_until_the_play_ends(play: subprocess.Popen, victim: str, timeout: float) -> tuple[str, float]:
    """Stop the lab container `victim` (as a power-off would), wait for the play to end, then start the
    container again and wait for its SSH: the play's output and the seconds from the stop to the play's end."""
    t0 = time.monotonic()
    podman.run("stop", "-t", "2", victim)
    try:
        out = finish(play, timeout)
        took = time.monotonic() - t0
    finally:
        podman.run("start", victim)
        cluster.wait_ssh(cluster.Node(int(victim.removeprefix("lab-node"))), time.monotonic() + 120)
    return out, took


def rejoin_units_gone(hosts: list[str], run_id: str) -> None:
    """No later boot starts the run again: its rejoin unit is gone from every node."""
    for host in hosts:
        left = ssh(
            host,
            "sh",
            "-c",
            f"'ls /etc/systemd/system/train-{run_id}-rejoin.service "
            f"/etc/systemd/system/multi-user.target.wants/train-{run_id}-rejoin.service 2>/dev/null'",
        ).stdout
        assert not left.strip(), f"{host} keeps {left}"


def test_restarted_node_rejoins_by_itself_and_the_run_finishes(lab_cluster, corpus) -> None:  # noqa: F811
    """max_restarts=1: a node's container restarted mid-run (a reboot). At its boot the rejoin unit starts its
    share again; the survivor's agent, whose workers failed with the peer gone, waits in the rendezvous; both resume
    from their latest checkpoint and finish at max_steps without the user."""
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-reboot-{int(time.time())}", 60
    play = start_train(
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", "-e", "max_restarts=1", *payload(KILL)
    )
    wait_for_step(play, hosts, run_id, 15)
    victim = hosts[-1]
    unit = f"/etc/systemd/system/multi-user.target.wants/train-{run_id}-rejoin.service"
    assert ssh(victim, "test", "-L", unit).returncode == 0, f"{victim}: no rejoin unit enabled for the next boot"
    t_restart = time.time()
    # stop, then start: `podman restart -t 2` fails when the stop's SIGKILL finds the container already stopped.
    podman.run("stop", "-t", "2", victim)
    podman.run("start", victim)
    cluster.wait_ssh(cluster.Node(int(victim.removeprefix("lab-node"))), time.monotonic() + 120)
    out = finish(play, 600)
    took = time.time() - t_restart
    assert play.returncode == 0, out[-4000:]
    flat = " ".join(out.split())
    # The watch says so (whether or not a poll found the host up before its rejoin unit ran).
    assert f"{victim}: restarted, and its share of the run rejoined" in flat, out[-4000:]
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    assert report["world_size"] == 2, report
    log = (ARTIFACTS / run_id / victim / "logs" / "torchrun.log").read_text()
    assert "=== rejoin after a reboot at " in log and "(node rank 1) ===" in log, log[-3000:]
    (restart,) = report["restarts"]
    # The cause is the host that went down, not the survivor whose workers stopped with it.
    assert restart["cause"].startswith(f"{victim}: restarted: torchrun got SIGTERM as the host went down"), restart
    assert restart["resumed_at_step"] >= 10, restart
    print(
        f"container restarted -> every rank training again: {restart['time'] - t_restart:.1f} s, steps lost "
        f"{restart['steps_lost']}; run completed {took:.1f} s after the restart"
    )
    assert restart["time"] - t_restart < 120, f"the ranks trained again {restart['time'] - t_restart:.0f} s later"
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    losses_continue(run_id, hosts[0])
    rejoin_units_gone(hosts, run_id)
    no_training_processes(hosts)


def test_stopped_node_fails_within_two_minutes_then_resumes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-node-{int(time.time())}", 60
    common = ["-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *payload(KILL)]
    play = start_train(*common)
    wait_for_step(play, hosts, run_id, 15)
    victim = hosts[-1]  # not rank 0's host, which holds the rendezvous
    out, took = stop_node_until_the_play_ends(play, victim, 300)
    print(f"node stopped -> playbook failed: {took:.1f} s")
    assert play.returncode != 0, out[-4000:]
    flat = " ".join(out.split())
    assert f"job failed on {victim}: unreachable" in flat, out[-4000:]
    assert took < 150, f"the playbook took {took:.0f} s to fail after {victim} stopped"
    assert (ARTIFACTS / run_id / hosts[0] / "logs" / "torchrun.log").exists()
    # Like a real server, the restarted host brings its fabric address up at boot (netplan's config).
    deadline, addr = time.monotonic() + 30, ""
    while fabric_address(victim) not in addr and time.monotonic() < deadline:
        time.sleep(1)
        addr = ssh(victim, "ip", "-4", "-o", "addr", "show", "rdma0").stdout
    assert fabric_address(victim) in addr, f"{victim} came back without its fabric address: {addr}"
    no_training_processes(hosts)
    proc = train(*common, "-e", "resume=true")
    assert proc.returncode == 0, tail(proc)
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    losses_continue(run_id, hosts[0])
    no_training_processes(hosts)


def test_node_lost_for_good_the_job_goes_on_with_min_nodes(lab_cluster, corpus) -> None:  # noqa: F811
    """min_nodes=1 on 2 nodes: a node stopped for good mid-run; the survivor restarts from its checkpoint at world
    size 1 and finishes the run, and the play, the manifest and the report say which node was lost and when."""
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-elastic-{int(time.time())}", 60
    extra = ["-e", "max_restarts=1", "-e", "min_nodes=1"]
    play = start_train("-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *extra, *payload(KILL))
    wait_for_step(play, hosts, run_id, 15)
    victim = hosts[-1]  # not rank 0's host, which holds the rendezvous
    t_stop = time.time()
    out, took = stop_node_until_the_play_ends(play, victim, 600)
    assert play.returncode == 0, out[-4000:]
    flat = " ".join(out.split())
    assert f"completed on 1 of 2 nodes (min_nodes 1) after losing {victim} (unreachable for 45 s" in flat, out[-4000:]
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    assert report["world_size"] == 1, report
    (restart,) = report["restarts"]
    assert restart["cause"].startswith(f"{victim} lost (unreachable"), restart
    assert (restart["world_size_before"], restart["world_size_after"]) == (2, 1), restart
    (lost,) = report["lost_nodes"]
    assert lost["host"] == victim and t_stop - 20 < lost["at"] <= t_stop + 5, (lost, t_stop)
    assert lost["resumed_at_step"] >= 10 and lost["last_step_before"] >= 15, lost
    assert (lost["world_size_before"], lost["world_size_after"]) == (2, 1), lost
    manifest = json.loads((ARTIFACTS / run_id / "manifest.json").read_text())
    assert [g["host"] for g in manifest["lost_nodes"]] == [victim] and manifest["min_nodes"] == 1, manifest
    assert f"lost: {victim} at " in flat and "with world size 2 -> 1" in flat, out[-4000:]
    survivor = ARTIFACTS / run_id / hosts[0]
    assert (survivor / "logs" / "torchrun.log").stat().st_size > 0 and (survivor / "logs" / "unit.log").exists()
    assert json.loads((survivor / "out" / "result.json").read_text())["world_size"] == 1
    print(
        f"node stopped -> survivor restarted at world size 1: {restart['time'] - t_stop:.1f} s, "
        f"steps lost {restart['steps_lost']}; run completed {took:.1f} s after the stop"
    )
    assert restart["time"] - t_stop < 150, f"the survivor restarted {restart['time'] - t_stop:.0f} s after the stop"
    assert took < 420, f"the run took {took:.0f} s to finish after {victim} stopped"
    losses_continue(run_id, hosts[0], same_world=False)
    no_training_processes(hosts)
    # A later look reads min_nodes from the launch's manifest: the restarted host no longer has the unit, a loss
    # the job went on without, not a failure.
    status = playbook("playbooks/train_status.yml", "-e", f"run_id={run_id}", timeout=300)
    assert status.returncode == 0, tail(status)
    lost_msg = f"run {run_id}: completed (completed on 1 of 2 nodes (min_nodes 1) after losing {victim}"
    assert lost_msg in " ".join(status.stdout.split()), tail(status)


def test_node_rank_0_lost_for_good_the_store_elsewhere_the_job_goes_on(lab_cluster, corpus) -> None:  # noqa: F811
    """min_nodes=1 with the rendezvous store on a host of its own (train_launch_rdzv_host; here the other node, the
    only other host of the lab): node rank 0, whose agent would otherwise hold the store, is stopped for good; the
    survivor's agent restarts its worker, the rendezvous completes without the lost node, and the run finishes at
    world size 1. The store's unit goes with the job."""
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-elastic0-{int(time.time())}", 60
    store = hosts[1]
    extra = ["-e", "max_restarts=1", "-e", "min_nodes=1", "-e", json.dumps({"train_launch_rdzv_host": store})]
    play = start_train("-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *extra, *payload(KILL))
    wait_for_step(play, hosts, run_id, 15)
    victim = hosts[0]
    out, took = stop_node_until_the_play_ends(play, victim, 600)
    print(f"node rank 0 stopped -> the survivor finished: {took:.1f} s")
    assert play.returncode == 0, out[-4000:]
    flat = " ".join(out.split())
    assert f"store of its own on {store}" in flat, out[-4000:]
    assert f"completed on 1 of 2 nodes (min_nodes 1) after losing {victim} (unreachable for 45 s" in flat, out[-4000:]
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps and report["world_size"] == 1, report
    (restart,) = report["restarts"]
    assert (restart["world_size_before"], restart["world_size_after"]) == (2, 1), restart
    assert [g["host"] for g in report["lost_nodes"]] == [victim], report["lost_nodes"]
    survivor = ARTIFACTS / run_id / store
    assert json.loads((survivor / "out" / "result.json").read_text())["world_size"] == 1
    assert took < 420, f"the run took {took:.0f} s to finish after {victim} stopped"
    # The survivor was rank 1; after the restart it is rank 0 of one and resumed from its checkpoint.
    records = [json.loads(x) for x in (survivor / "out" / "metrics.jsonl").read_text().splitlines()]
    (resume,) = [r for r in records if r["kind"] == "resume"]
    assert resume["rank"] == 0 and resume["world_size_before"] == 2 and resume["step"] >= 10, resume
    no_training_processes(hosts)
    state = ssh(store, "systemctl", "show", "-p", "LoadState", "--value", f"rdzv-{run_id}").stdout.strip()
    assert state == "not-found", f"the store's unit rdzv-{run_id} is still {state} on {store}"


def test_fabric_link_down_20s_the_run_still_finishes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-link-{int(time.time())}", 60
    play = start_train(
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}", *payload({**KILL, "pg_timeout": 90})
    )
    victim = wait_for_step(play, hosts, run_id, 15)
    carrier = f"/sys/class/net/{cluster.FABRIC_IFNAME}/carrier_changes"
    before = int(ssh(victim, "cat", carrier).stdout)
    flap = "ip link set rdma0 down; sleep 20; ip link set rdma0 up"
    ssh(victim, "systemd-run", "--unit=lab-link-flap", "--collect", "sh", "-c", f"'{flap}'")
    t0 = time.monotonic()
    out = finish(play, 600)
    took = time.monotonic() - t0
    print(f"link down 20 s -> run finished {took:.1f} s after the flap began")
    assert play.returncode == 0, out[-4000:]
    assert int(ssh(victim, "cat", carrier).stdout) >= before + 2, f"the fabric link of {victim} never went down"
    assert took < 300
    report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
    assert report["outcome"] == "completed" and report["final_step"] == steps, report
    for host in hosts:
        assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
    no_training_processes(hosts)


def test_full_checkpoint_disk_fails_naming_the_node_then_resumes(lab_cluster, corpus) -> None:  # noqa: F811
    hosts, run_id, steps = lab_cluster["hosts"], f"fault-disk-{int(time.time())}", 60
    victim = hosts[-1]
    ckpts = f"/var/lib/rdma-llm/runs/{run_id}/out/checkpoints"
    # The victim's checkpoints go to a small disk of their own (a tmpfs), filled once a checkpoint is on it.
    ssh(victim, "mkdir", "-p", ckpts)
    assert ssh(victim, "mount", "-t", "tmpfs", "-o", "size=128m", "lab-ckpt", ckpts).returncode == 0
    common = [
        "-e", f"data={corpus}", "-e", f"steps={steps}", "-e", f"run_id={run_id}",
        "-e", '{"train_launch_min_free_mb": 64}', *payload(KILL),
    ]  # fmt: skip
    try:
        play = start_train(*common)
        wait_for_step(play, hosts, run_id, 15)
        t0 = time.monotonic()
        ssh(victim, "dd", "if=/dev/zero", f"of={ckpts}/filler", "bs=1M", "status=none")
        out = finish(play, 300)
        took = time.monotonic() - t0
        print(f"disk full -> playbook failed: {took:.1f} s")
        assert play.returncode != 0, out[-4000:]
        flat = " ".join(out.split())
        assert f"job failed on {victim}: local rank 0 exit code 1" in flat, out[-4000:]
        assert "the disk is full" in flat, out[-4000:]
        assert took < 120, f"the playbook took {took:.0f} s to fail after the disk filled"
        for host in hosts:
            assert (ARTIFACTS / run_id / host / "logs" / "torchrun.log").stat().st_size > 0, f"no log from {host}"
        no_training_processes(hosts)
        ssh(victim, "rm", "-f", f"{ckpts}/filler")
        proc = train(*common, "-e", "resume=true")
        assert proc.returncode == 0, tail(proc)
        report = json.loads((ARTIFACTS / run_id / "report.json").read_text())
        assert report["outcome"] == "completed" and report["final_step"] == steps, report
        losses_continue(run_id, hosts[0])
        no_training_processes(hosts)
    finally:
        ssh(victim, "umount", ckpts)


def test_preflight_names_every_problem_before_anything_starts(lab_cluster, corpus) -> None:  # noqa: F811
    """Rendezvous port taken on node 0 and a peer whose fabric address does not answer: both named at once,
    and no unit started."""
    hosts, run_id = lab_cluster["hosts"], f"fault-preflight-{int(time.time())}"
    squat = "/opt/rdma-llm/venv/bin/python -m http.server 29500"
    ssh_ok(hosts[0], "systemd-run", "--unit=lab-port-squat", "--collect", *squat.split())
    try:
        ssh_ok(hosts[-1], "sysctl", "-qw", "net.ipv4.icmp_echo_ignore_all=1")
        # The peer must not answer from here: a CI run once found it answering (its setup's ssh unchecked then).
        # ping's 1 is "no reply" (ssh's own failure is 255, ping's other errors 2).
        assert ssh(hosts[0], "ping", "-c", "1", "-W", "2", "-I", "rdma0", fabric_address(hosts[-1])).returncode == 1
        proc = train("-e", f"data={corpus}", "-e", "steps=30", "-e", f"run_id={run_id}", *payload(SMALL), timeout=600)
    finally:
        try:
            ssh_ok(hosts[0], "systemctl", "stop", "lab-port-squat")
        finally:
            ssh_ok(hosts[-1], "sysctl", "-qw", "net.ipv4.icmp_echo_ignore_all=0")
    assert proc.returncode != 0, tail(proc)
    flat = " ".join(proc.stdout.split())
    assert f"{hosts[0]}: rendezvous port 29500 is in use" in flat, tail(proc)
    assert f"{hosts[0]}: {hosts[-1]} ({fabric_address(hosts[-1])}) does not answer on rdma0" in flat, tail(proc)
    for host in hosts:
        state = ssh(host, "systemctl", "show", "-p", "LoadState", "--value", f"train-{run_id}").stdout.strip()
        assert state == "not-found", f"{host}: a unit was started ({state})"


def slurm_node(name: str) -> dict:
    """The node as slurmctld sees it (on lab-node1, the controller): {"state", "reason"}."""
    shown = ssh("lab-node1", "scontrol", "show", "node", "-o", name)
    assert shown.returncode == 0, shown.stderr
    return parse_scontrol_node(shown.stdout)


def wait_node(name: str, drained: bool, within: float = 100) -> dict:
    deadline = time.monotonic() + within
    while True:
        node = slurm_node(name)
        if ("DRAIN" in (node["state"] or "")) == drained or time.monotonic() > deadline:
            return node
        time.sleep(3)


def job_record(job: str) -> dict[str, str]:
    """`scontrol show job` on the controller, as {key: value} (JobState, NodeList, Restarts ...)."""
    shown = ssh("lab-node1", "scontrol", "show", "job", "-o", job).stdout
    return dict(field.split("=", 1) for field in shown.split() if "=" in field)


def test_slurm_drains_a_failing_node_with_the_reason_and_returns_it(lab_cluster) -> None:
    """slurmd runs node_health's wrapper of rdma-node-check before each job on each of its nodes (the prolog) and
    every 30 s (the health check; the lab inventory): with lab-node2's fabric MTU set wrong, a job sent there does not
    run, and the node is drained with the failing check as the reason, with no Ansible run; set right, the next
    check resumes it and the job runs. A node an operator drained keeps its reason: the check only resumes its own
    drains."""
    victim = lab_cluster["hosts"][1]
    assert "DRAIN" not in (slurm_node(victim)["state"] or ""), slurm_node(victim)
    t0 = time.monotonic()
    assert ssh(victim, "ip", "link", "set", "rdma0", "mtu", "1500").returncode == 0
    job = ""
    try:
        # At once, so the prolog, not the next health check, meets the bad node (the health check wins only when
        # it ran within the second before: then the job simply waits, and the test says which).
        sent = ssh("lab-node1", "sbatch", "--parsable", f"--nodelist={victim}", "--output=/dev/null", "--wrap=hostname")
        assert sent.returncode == 0, sent.stderr
        job = sent.stdout.strip()
        node = wait_node(victim, drained=True)
        print(f"{victim} drained {time.monotonic() - t0:.0f} s after its MTU went wrong: {node}")
        assert "DRAIN" in (node["state"] or ""), node
        assert node["reason"].startswith("rdma-node-check: ") and "MTU 1500" in node["reason"], node
        held = job_record(job)
        # The job never ran on the bad node: back in the queue, not held (nohold_on_prolog_fail), not completed.
        assert held["JobState"] == "PENDING" and held.get("Priority") != "0", held
        turned_away = held.get("Restarts", "0") != "0"
        print(f"job {job}: {'requeued by the prolog' if turned_away else 'kept off by the health check'}: {held}")
    finally:
        assert ssh(victim, "ip", "link", "set", "rdma0", "mtu", str(cluster.FABRIC_MTU)).returncode == 0
    t1 = time.monotonic()
    node = wait_node(victim, drained=False)
    print(f"{victim} resumed {time.monotonic() - t1:.0f} s after its MTU was put back: {node}")
    assert "DRAIN" not in (node["state"] or ""), node
    # Back in service, the node takes the job that waited for it. Slurm makes a requeued job eligible again 2 min
    # later (its EligibleTime); the test moves that to now rather than wait.
    assert ssh("lab-node1", "scontrol", "update", f"JobId={job}", "StartTime=now").returncode == 0
    deadline, record = time.monotonic() + 60, job_record(job)
    while record.get("JobState") != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(2)
        record = job_record(job)
    print(f"job {job} ran {time.monotonic() - t1:.0f} s after the MTU was put back: {record}")
    assert record.get("JobState") == "COMPLETED" and record.get("NodeList") == victim, record
    # An operator's drain: the wrapper (run here at once rather than waiting for slurmd) passes and leaves it.
    # (ssh hands the remote shell one string: the reason's spaces are quoted for it.)
    update = ["scontrol", "update", f"NodeName={victim}", "State=DRAIN", "Reason='maintenance by hand'"]
    assert ssh("lab-node1", *update).returncode == 0
    try:
        checked = ssh(victim, "/usr/local/sbin/rdma-node-health-slurm")
        assert checked.returncode in (0, 1), checked.stdout + checked.stderr
        assert f"slurm: {victim} left as it is" in checked.stderr, checked.stderr
        assert slurm_node(victim)["reason"] == "maintenance by hand", slurm_node(victim)
    finally:
        ssh("lab-node1", "scontrol", "update", f"NodeName={victim}", "State=RESUME")


# A change that does nothing, for the repair whose fault outlives it (a bad cable: no reboot nor re-converge mends it).
NOTHING = """\
- name: Nothing
  hosts: all
  gather_facts: false
  tasks:
    - name: Leave the node as it is
      ansible.builtin.debug:
        msg: the fault stays
"""


def repair(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """repair.yml on lab-node2 with lab-node1 in service as its reference, with its report."""
    before = {p.name for p in ROLLING.iterdir()} if ROLLING.exists() else set()
    proc = playbook("playbooks/repair.yml", "--limit", "lab-node1,lab-node2", "-e", "rolling_proof_pair_seconds=1",
                    "-e", "rolling_poll_interval=2", *args, timeout=900)  # fmt: skip
    return proc, latest_report(before)[1]


def test_repair_reboots_reconverges_reproves_and_returns_a_drained_node(lab_cluster, tmp_path) -> None:
    """repair.yml takes the node the node check drained (lab-node2, its fabric MTU wrong). First with a fault no
    reboot mends (the power cycle `true`, the change a playbook that does nothing: a bad cable's case): its proof
    fails and the node stays drained, the repair's failure and the node check's reason in its reason. Then the lab's
    reboot (the controller restarts the container; the MTU comes back from the node's own network config at boot),
    site.yml on it alone, the proof against lab-node1, and the node is back in service with its time to return."""
    victim = lab_cluster["hosts"][1]
    assert ssh(victim, "ip", "link", "set", "rdma0", "mtu", "1500").returncode == 0
    try:
        checked = ssh(victim, "/usr/local/sbin/rdma-node-health-slurm")  # the health check, at once
        assert checked.returncode != 0, checked.stdout + checked.stderr
        node = slurm_node(victim)
        assert "DRAIN" in (node["state"] or "") and node["reason"].startswith("rdma-node-check: "), node
        noop = tmp_path / "nothing.yml"
        noop.write_text(NOTHING)
        failed, report = repair(
            "-e", json.dumps({"rolling_repair_power_cycle": ["true"], "rolling_playbook": str(noop)})
        )
        assert failed.returncode != 0, tail(failed)
        (batch,) = report["batches"]
        assert (batch["hosts"], batch["status"], batch["reference"]) == ([victim], "failed", "lab-node1"), batch
        assert batch["why"].startswith("proof failed: FAIL at "), batch
        node = slurm_node(victim)
        assert "DRAIN" in (node["state"] or ""), node
        assert node["reason"].startswith("repair: failed: proof failed: FAIL at ") and "MTU 1500" in node["reason"], (
            node
        )
        # The node check leaves the repair's drain alone: it is not its own.
        ssh(victim, "/usr/local/sbin/rdma-node-health-slurm")
        assert slurm_node(victim)["reason"] == node["reason"]

        t0 = time.monotonic()
        proc, report = repair()
        took = time.monotonic() - t0
        assert proc.returncode == 0, tail(proc)
        (batch,) = report["batches"]
        assert (batch["hosts"], batch["status"], batch["reference"]) == ([victim], "done", "lab-node1"), batch
        assert 0 < batch["seconds"] <= took, (batch, took)
        print(f"repair: {victim} back in service {batch['seconds']:.0f} s after its repair began ({took:.0f} s run)")
        assert report["status"] == "passed", report
        flat = " ".join(proc.stdout.split())
        assert f"batch 1 {victim}: done against lab-node1" in flat, tail(proc)
        node = slurm_node(victim)
        assert "DRAIN" not in (node["state"] or ""), node
        mtu = ssh_ok(victim, "cat", "/sys/class/net/rdma0/mtu").stdout.strip()
        assert mtu == str(cluster.FABRIC_MTU), mtu  # the reboot mended it, not the test
        ran = ssh_ok("lab-node1", "srun", f"--nodelist={victim}", "--time=1", "hostname").stdout.strip()
        assert ran == victim, ran
    finally:
        ssh(victim, "ip", "link", "set", "rdma0", "mtu", str(cluster.FABRIC_MTU))
        ssh("lab-node1", "scontrol", "update", f"NodeName={victim}", "State=RESUME")
