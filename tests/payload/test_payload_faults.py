"""Failure behaviour: a dead or hung peer ends the job within the process-group timeout, SIGTERM checkpoints."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from payload_helpers import REPO, TRAIN, Launch, base_args, free_port, read_jsonl, wait_for

from payload import ckpt_verify as V

pytestmark = pytest.mark.payload

LONG = dict(max_steps=100_000, warmup_steps=1, log_interval=1)


def rank_pids(out: Path, job, min_step: int = 2) -> dict[int, int]:
    """Wait until both ranks are training, then return {rank: pid} from their `start` records."""

    def ready():
        path = out / "metrics.jsonl"
        if not path.exists():
            return None
        recs = read_jsonl(path)
        steps = [r["step"] for r in recs if r["kind"] == "train" and r["rank"] == 0]
        return recs if steps and max(steps) >= min_step else None

    records = wait_for(ready, 120, "both ranks training", job)
    pids = {r["rank"]: r["pid"] for r in records if r["kind"] == "start"}
    job.pids.update(pids.values())
    return pids


def alive(pid: int) -> bool:
    """Running, or at least not a zombie waiting for torchrun to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] not in "ZX"
    except (FileNotFoundError, IndexError):
        return False


def test_killed_rank_fails_the_job_at_once(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    out = tmp_path / "run"
    job = launch(base_args(out, corpus, tokenizer_dir, token_cache, pg_timeout=30, **LONG))
    pids = rank_pids(out, job)
    os.kill(pids[1], signal.SIGKILL)
    t0 = time.monotonic()
    rc = job.wait(timeout=60)
    elapsed = time.monotonic() - t0
    assert rc != 0
    assert elapsed < 30, f"torchrun needed {elapsed:.1f} s after the peer died"  # within pg_timeout
    result = json.loads((out / "result.json").read_text())  # rank 0 says why it stopped
    assert result["status"] == "failed" and result["error"], result


def test_hung_rank_fails_the_peer_after_pg_timeout(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    """SIGSTOP leaves the socket open, so only the process-group timeout can end the wait."""
    out = tmp_path / "run"
    timeout = 10
    job = launch(base_args(out, corpus, tokenizer_dir, token_cache, pg_timeout=timeout, **LONG))
    pids = rank_pids(out, job)
    os.kill(pids[1], signal.SIGSTOP)
    t0 = time.monotonic()
    wait_for(lambda: not alive(pids[0]), timeout + 30, "rank 0 to give up on its hung peer")
    elapsed = time.monotonic() - t0
    assert timeout * 0.5 < elapsed < timeout + 20, f"rank 0 exited after {elapsed:.1f} s, timeout {timeout} s"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "failed", result
    # (the stopped rank is killed with its process group by the fixture)


def test_sigterm_checkpoints_then_exits_nonzero(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    out = tmp_path / "run"
    job = launch(base_args(out, corpus, tokenizer_dir, token_cache, **LONG))
    rank_pids(out, job, min_step=3)
    job.proc.send_signal(signal.SIGTERM)  # to torchrun, as systemd or an Ansible timeout would
    rc = job.wait(timeout=60)
    assert rc != 0
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "terminated" and result["signal"] == "SIGTERM", result
    step = result["final_step"]
    assert step >= 3
    assert (out / "checkpoints" / "latest").read_text().strip() == f"step_{step:07d}"
    assert (out / "checkpoints" / f"step_{step:07d}" / "model.pt").exists()
    assert "got SIGTERM, stopping after this step" in job.output()


def test_lost_node_the_survivor_goes_on_alone_from_its_checkpoint(tmp_path, corpus, tokenizer_dir, token_cache):
    """Two "nodes" (a torchrun agent each, own out_dir) in an elastic rendezvous, `--nnodes=1:2` as the launch
    role renders it for min_nodes=1: node 1 vanishes (agent and worker SIGKILLed); node 0's agent restarts its
    worker (max_restarts), the rendezvous drops the silent node after its heartbeats and completes alone, and
    the payload resumes from node 0's checkpoint at world size 1 and finishes."""
    port, jobs = free_port(), []
    outs = [tmp_path / "node0", tmp_path / "node1"]
    try:
        for node, out in enumerate(outs):
            cmd = [
                sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc_per_node=1",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=elastic",
                f"--rdzv-conf=is_host={int(node == 0)},join_timeout=60,last_call_timeout=3",
                "--local-addr=127.0.0.1", "--max-restarts=1", "--monitor-interval=1", str(TRAIN),
                *base_args(out, corpus, tokenizer_dir, token_cache, max_steps=30, ckpt_interval=5, log_interval=1),
            ]  # fmt: skip
            jobs.append(Launch(cmd, tmp_path / f"torchrun-node{node}.log"))
        rank_pids(outs[0], jobs[0], min_step=8)
        jobs[1].stop()  # the node is gone: no SIGTERM, no checkpoint, no goodbye
        t0 = time.monotonic()
        rc = jobs[0].wait(timeout=240)
        elapsed = time.monotonic() - t0
        assert rc == 0, jobs[0].output()[-4000:]
    finally:
        for job in jobs:
            job.stop()
    result = json.loads((outs[0] / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 30 and result["world_size"] == 1, result
    records = read_jsonl(outs[0] / "metrics.jsonl")
    assert [r["world_size"] for r in records if r["kind"] == "start"] == [2, 1]
    (resume,) = [r for r in records if r["kind"] == "resume"]
    assert resume["world_size_before"] == 2 and resume["step"] >= 5, resume
    train = [r for r in records if r["kind"] == "train"]
    assert train[-1]["step"] == 30 and train[-1]["loss_global"] < train[0]["loss_global"] - 1.0, train
    print(f"node lost -> survivor finished alone: {elapsed:.1f} s (from step {resume['step']})")


def test_lost_node_rank_0_the_store_elsewhere_the_survivor_goes_on(tmp_path, corpus, tokenizer_dir, token_cache):
    """As above, but the node lost is the one holding rank 0, which by default also holds the rendezvous store (and
    so ends the job): with the store as a service of its own (roles/train_launch/files/rdzv_store.py, what
    train_launch_rdzv_host starts) and every agent a client (is_host=0, as the launch renders it), the other node
    restarts its worker, the rendezvous completes without the lost one, and the payload resumes at world size 1."""
    port, jobs = free_port(), []
    outs = [tmp_path / "node0", tmp_path / "node1"]
    store = Launch([sys.executable, str(REPO / "roles/train_launch/files/rdzv_store.py"), f"--port={port}"],
                   tmp_path / "store.log")  # fmt: skip
    try:
        wait_for(lambda: "listening" in store.output(), 60, "the store to listen", store)
        for node, out in enumerate(outs):
            cmd = [
                sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc_per_node=1",
                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=elastic-store",
                "--rdzv-conf=is_host=0,join_timeout=60,last_call_timeout=3",
                "--local-addr=127.0.0.1", "--max-restarts=1", "--monitor-interval=1", str(TRAIN),
                *base_args(out, corpus, tokenizer_dir, token_cache, max_steps=30, ckpt_interval=5, log_interval=1),
            ]  # fmt: skip
            jobs.append(
                Launch(cmd, tmp_path / f"torchrun-node{node}.log", env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
            )

        def rank0_node():
            for i, out in enumerate(outs):
                recs = read_jsonl(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
                if any(r["kind"] == "train" and r["rank"] == 0 and r["step"] >= 8 for r in recs):
                    return (i,)
            return None

        (lost,) = wait_for(rank0_node, 180, "rank 0 past step 8", jobs[0])
        survivor = 1 - lost
        jobs[lost].stop()  # the node holding rank 0 is gone
        rc = jobs[survivor].wait(timeout=240)
        assert rc == 0, jobs[survivor].output()[-4000:]
    finally:
        for job in [*jobs, store]:
            job.stop()
    result = json.loads((outs[survivor] / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 30 and result["world_size"] == 1, result
    records = read_jsonl(outs[survivor] / "metrics.jsonl")
    assert [(r["rank"], r["world_size"]) for r in records if r["kind"] == "start"] == [(1, 2), (0, 1)], records
    (resume,) = [r for r in records if r["kind"] == "resume"]
    assert resume["world_size_before"] == 2 and resume["step"] >= 5, resume


def test_corrupt_latest_checkpoint_is_quarantined_and_the_restart_resumes_from_the_one_before(
    tmp_path, corpus, tokenizer_dir, token_cache
):
    """Under --max-restarts: both workers frozen, the checkpoint `latest` names gets a flipped byte (same size),
    then rank 1 is killed. The agent restarts both workers; the resume finds the latest checkpoint fails its
    checksums, renames it quarantine-step_... (not deleted), points `latest` at the one before, resumes from it,
    finishes, and the log, the resume record and result.json say so."""
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--max-restarts=1", "--monitor-interval=1", str(TRAIN),
        *base_args(out, corpus, tokenizer_dir, token_cache, max_steps=40, ckpt_interval=5, log_interval=1),
    ]  # fmt: skip
    # As the launch role sets it (plugins/module_utils/launch/train.py): without it the restarted workers'
    # process group connected to the killed rank's old port here and failed.
    job = Launch(cmd, tmp_path / "torchrun.log", env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
    try:
        pids = rank_pids(out, job, min_step=12)
        for pid in pids.values():
            os.kill(pid, signal.SIGSTOP)
        latest = (out / "checkpoints" / "latest").read_text().strip()
        step = int(latest.removeprefix("step_"))
        model = out / "checkpoints" / latest / "model.pt"
        data = bytearray(model.read_bytes())
        data[len(data) // 2] ^= 0xFF
        model.write_bytes(bytes(data))
        os.kill(pids[1], signal.SIGKILL)
        os.kill(pids[0], signal.SIGCONT)
        rc = job.wait(timeout=240)
        log = job.output()
        assert rc == 0, log[-4000:]
    finally:
        job.stop()
    previous = f"step_{step - 5:07d}"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 40, result
    (q,) = result["quarantined"]
    assert q["checkpoint"] == latest and q["why"].endswith(": model.pt does not match its SHA-256 when saved"), q
    resume = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "resume" and r["rank"] == 0]
    assert [r["step"] for r in resume] == [step - 5] and resume[0]["quarantined"] == [q], resume
    (moved,) = (out / "checkpoints").glob(f"quarantine-{latest}-*")
    assert (moved / "model.pt").read_bytes() == bytes(data)  # kept as it was found, for a post-mortem
    assert f"resume: falling back to {previous}: quarantined {latest}" in log, log[-4000:]
    assert f"{latest} failed verification: model.pt does not match its SHA-256" in log
    # The run saved that step again after the resume; what it keeps (keep_ckpts=2) verifies.
    assert log.count(f"checkpoint: {out / 'checkpoints' / latest} (") == 2, log[-4000:]
    kept = V.finished(out / "checkpoints")
    assert [p.name for p in kept] == ["step_0000035", "step_0000040"] and all(V.verify(p) is None for p in kept)
