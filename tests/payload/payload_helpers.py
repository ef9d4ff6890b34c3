"""Helpers for the payload tests: a torchrun launcher that always cleans up its process group, and
small utilities. Fixtures are in conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "payload" / "train.py"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# A handful of plays is enough for a tiny model to learn visibly in a few dozen steps.
PLAYS = ("hamlet_gut.txt", "macbeth_gut.txt", "othello_gut.txt")


def find_testdata(package: str, *parts: str) -> Path | None:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_cmd(nproc: int, args: list[str], node: tuple[int, int, int] | None = None) -> list[str]:
    """One node's torchrun; `node` = (node_rank, nnodes, port) makes it one of several "nodes" on this
    machine (static rendezvous on 127.0.0.1:port, node 0 hosts the store)."""
    if node is None:
        rdzv = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    else:
        rank, nnodes, port = node
        rdzv = [f"--nnodes={nnodes}", f"--node_rank={rank}", "--master_addr=127.0.0.1", f"--master_port={port}"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        *rdzv,
        "--max-restarts=0",
        str(TRAIN),
        *args,
    ]


def job_env() -> dict[str, str]:
    env = dict(
        os.environ,
        GLOO_SOCKET_IFNAME="lo",
        OMP_NUM_THREADS="1",
        DS_ACCELERATOR="cpu",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(REPO),
    )
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


class Launch:
    """A torchrun job in its own process group; `stop()` kills the whole group (always called)."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None):
        self.log_path = log
        self.pids: set[int] = set()  # workers a test touched: killed at the end even if orphaned
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=job_env() | (env or {}), cwd=REPO,
            start_new_session=True,
        )  # fmt: skip

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"torchrun still running after {timeout} s:\n{self.output()[-4000:]}")

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGKILL torchrun's process group and every process below it: torchrun starts each worker in a
        session of its own, so a worker that cannot die by itself (SIGSTOPped) would outlive the group."""
        procs = [self.proc.pid, *descendants(self.proc.pid), *self.pids]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()


def descendants(pid: int) -> list[int]:
    """All processes below `pid`, found through the parent pid in /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def train_py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """payload/train.py in one process, no torchrun (it makes itself a group of one): a subcommand or a run."""
    return subprocess.run(
        [sys.executable, str(TRAIN), *args], cwd=REPO, env=job_env(), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def run_ok(launch, args: list[str], nproc: int = 2, timeout: float = 300) -> str:
    """`timeout` guards against a hang only: in `make test` this lane may get a ninth of the machine while the lab's
    hosts train (lab/cgroups.py), and a 12-step FSDP run took over 150 s there."""
    job = launch(args, nproc)
    rc = job.wait(timeout)
    out = job.output()
    assert rc == 0, f"torchrun exited {rc}:\n{out[-6000:]}"
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate, timeout: float, what: str, job: Launch | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if job is not None and job.proc.poll() is not None:
            pytest.fail(f"job ended (rc {job.proc.returncode}) before {what}:\n{job.output()[-4000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}" + (f":\n{job.output()[-4000:]}" if job else ""))


def base_args(out: Path, corpus: Path, tokenizer_dir: Path, token_cache: Path, **overrides) -> list[str]:
    """A tiny, fast run: 2-layer model, 64-token blocks, a high learning rate so the loss falls quickly."""
    opts = dict(
        data=corpus,
        out_dir=out,
        tokenizer=tokenizer_dir,
        cache_dir=token_cache,
        model="tiny",
        block_size=64,
        batch_size=8,
        grad_accum=2,
        max_steps=30,
        warmup_steps=3,
        lr=3e-3,
        min_lr=3e-4,
        eval_interval=0,
        eval_batches=8,
        log_interval=5,
        pg_timeout=60,
        export_hf="false",
    )
    opts.update(overrides)
    return [f"--{k}={v}" for k, v in opts.items()]
