"""This rank's place in the job and what the run's parts share: the process group torchrun set up, the
collectives (`Dist`), which ranks write the files that are the same on all ranks, and the error a run ends with.

The collectives of setup (tokenizer training, tokenizing the corpus) and of a checkpoint's save and choice (a
node's writer hashing a large checkpoint) keep some ranks waiting far longer than a training step ever should:
they go on `Dist.setup`, a gloo group with a long timeout of its own (--setup_timeout), not on pg_timeout's.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from payload import flight as F
from payload.config import TrainConfig


class RunError(RuntimeError):
    """A failure the user can act on (bad data or tokenizer, corrupt checkpoint, full disk): the run ends with
    this one line, no traceback, a result.json with status `failed`, and exit code 2 (usage) or 1 (runtime)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclass
class Dist:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    device: torch.device
    backend: str
    setup: object = None  # the setup group (module docstring); None once the run has closed
    shared: bool = False  # every node sees rank 0's out_dir (choose_writers)
    writer: bool = False  # this rank writes the files that are the same on all ranks (of its node, unless shared)

    @property
    def master(self) -> bool:
        return self.rank == 0

    def all_reduce(self, values: list[float], op=dist.ReduceOp.SUM, group=None) -> list[float]:
        on_cpu = group is not None or self.backend == "gloo"
        t = torch.tensor(
            values, dtype=torch.float64 if on_cpu else torch.float32, device="cpu" if on_cpu else self.device
        )
        dist.all_reduce(t, op=op, group=group)
        return t.tolist()

    def barrier(self, group=None) -> None:
        dist.barrier(group=group)

    def broadcast(self, value, group=None):
        """Rank 0's `value`, on every rank."""
        box = [value]
        dist.broadcast_object_list(box, src=0, group=group)
        return box[0]

    def writers_say(self, value) -> list[tuple[str, object]]:
        """(host, value) of every node's writer (collective over every rank; the others' values are dropped). On
        the setup group: its timeout, not pg_timeout, bounds a writer still hashing a large checkpoint."""
        said = [None] * self.world_size
        dist.all_gather_object(said, (self.writer, socket.gethostname(), value), group=self.setup)
        return [(host, v) for writer, host, v in said if writer]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_launcher() -> None:
    """torchrun starts every worker in a session of its own: if torchrun is killed (an outer deadline, the
    OOM killer), have the kernel send us SIGTERM, so we checkpoint and exit instead of lingering."""
    if sys.platform.startswith("linux") and "TORCHELASTIC_RUN_ID" in os.environ:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


def init_distributed(cfg: TrainConfig) -> Dist:
    """Join the process group torchrun set up (a group of one for plain `python train.py`), and make the
    setup group."""
    _die_with_launcher()
    if "RANK" not in os.environ:
        os.environ.update(
            RANK="0",
            LOCAL_RANK="0",
            WORLD_SIZE="1",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
        )
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world, local_world = int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = cfg.backend if cfg.backend != "auto" else ("nccl" if cuda else "gloo")
    # gloo's default timeout is 30 minutes: a hung peer must fail the job much sooner than that.
    timeout = timedelta(seconds=cfg.pg_timeout)
    if cfg.engine == "deepspeed":
        if not cuda:
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed

        # DeepSpeed's shared-memory collectives (inference only) cost a ~30 s compile at every start.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        deepspeed.init_distributed(dist_backend=backend, timeout=timeout, verbose=False)
    else:
        dist.init_process_group(backend, timeout=timeout, device_id=device if cuda else None)
    F.start(rank)  # the flight recorder on the launch's request (payload/flight.py)
    d = Dist(rank, local_rank, world, local_world, device, backend)
    d.setup = dist.new_group(backend="gloo", timeout=timedelta(seconds=cfg.setup_timeout))
    return d


def choose_writers(d: Dist, out: Path) -> None:
    """Does every node see rank 0's out_dir (a shared file system)? Then rank 0 alone writes the files that
    are the same on all ranks; otherwise local rank 0 of each node does. Sets d.shared and d.writer."""
    token = d.broadcast(secrets.token_hex(8) if d.master else None, d.setup)  # (rank 0 knows it; the others learn)
    probe = out / f".probe-{token}"
    if d.master:
        probe.write_text(token)
    d.barrier(d.setup)
    seen = probe.exists()
    d.shared = d.all_reduce([float(seen)], dist.ReduceOp.MIN, d.setup)[0] == 1.0
    d.barrier(d.setup)
    if d.master:
        probe.unlink()
    d.writer = d.master if d.shared else d.local_rank == 0


def write_json(path: Path, obj: dict) -> None:
    """Written whole or not at all: a temporary sibling, then a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)
