"""What a run reports besides its log: metrics.jsonl (and TensorBoard), and result.json's keys (payload/README.md,
"Output files"), also the one a run that failed before its Trainer existed leaves."""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path

from payload.config import TrainConfig
from payload.runtime import write_json
from payload.versions import versions

RESULT_SCHEMA = 1
# Every result.json has these keys (payload/README.md, "Output files"); a run that failed early leaves most None.
RESULT_KEYS = (
    "schema",
    "status",
    "error",
    "exit_code",
    "signal",
    "engine",
    "zero_stage",
    "world_size",
    "nodes",
    "backend",
    "device",
    "dtype",
    "model",
    "n_params",
    "batch_size",
    "peak_memory_gib",
    "start_step",
    "final_step",
    "max_steps",
    "tokens_seen",
    "initial_val_loss",
    "final_train_loss",
    "final_val_loss",
    "final_val_ppl",
    "gate",
    "tokens_per_s",
    "tokens_per_s_per_rank",
    "mfu",
    "train_time_s",
    "wall_time_s",
    "checkpoint",
    "quarantined",
    "hf_model",
    "hostname",
    "versions",
)


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 700.0))  # a diverged run's loss must not overflow the report


def duration(seconds: float) -> str:
    """ETA as h:mm:ss (or m:ss under an hour)."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class MetricsLog:
    """Append-only JSON lines shared by the ranks of a node: one os.write per line on an O_APPEND file,
    so lines from different ranks never interleave."""

    def __init__(self, path: Path, rank: int, tensorboard: Path | None = None):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.rank = rank
        self.tb = None
        if tensorboard is not None:  # the same numbers as TensorBoard scalars (`train/loss`, `eval/val_ppl`, ...)
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(tensorboard), flush_secs=30)

    def write(self, **record) -> None:
        record = {"time": round(time.time(), 3), "rank": self.rank, **record}
        os.write(self.fd, (json.dumps(record) + "\n").encode())
        if self.tb is not None and record["kind"] in ("train", "eval"):
            for key, value in record.items():
                if key not in ("time", "rank", "kind", "step") and isinstance(value, int | float):
                    self.tb.add_scalar(f"{record['kind']}/{key}", value, record["step"], walltime=record["time"])

    def close(self) -> None:
        """Stop the TensorBoard writer's thread; the JSON lines stay writable (a failed result after close)."""
        if self.tb is not None:
            self.tb.close()
            self.tb = None


def early_failure(cfg: TrainConfig, error: str, code: int) -> None:
    """result.json with status `failed` for a run that failed before its Trainer existed: one per node (local
    rank 0), with what is known."""
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = dict.fromkeys(RESULT_KEYS)
    result.update(
        schema=RESULT_SCHEMA,
        status="failed",
        error=error,
        exit_code=code,
        engine=cfg.engine,
        model=cfg.init_from or cfg.model,
        max_steps=cfg.max_steps,
        hostname=socket.gethostname(),
        versions=versions(),
    )
    write_json(out / "result.json", result)
