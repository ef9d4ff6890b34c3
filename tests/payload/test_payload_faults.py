"""Failure behaviour: a dead or hung peer ends the job within the process-group timeout, SIGTERM checkpoints."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from payload_helpers import base_args, read_jsonl, wait_for

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
