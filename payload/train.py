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

  # a corpus bigger than memory: tokenize once into verified shards (then train on the directory)
  python payload/train.py prepare --data=corpus/ --out_dir=shards/ --tokenizer=gpt2-tokenizer/
  python payload/train.py checkpoints --out_dir=runs/r1   # step, losses, time, size of each checkpoint
  python payload/train.py average --out_dir=runs/r1 --last=3   # mean weights of the 3 newest -> hf_model_avg
  python payload/train.py eval --out_dir=runs/r1 --steps=all   # perplexity + prompt suite per checkpoint; bundle
Commands: train (default), generate, export, prepare, verify, checkpoints, average, eval, bundle.
Options are --key=value (or --config=file.json|yaml):
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import socket
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

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
from payload import checkpoint as CK  # noqa: E402
from payload import commands as C  # noqa: E402
from payload import data as D  # noqa: E402
from payload import evaluate as E  # noqa: E402
from payload import gate as G  # noqa: E402
from payload.config import (  # noqa: E402
    AverageConfig,
    BundleConfig,
    CheckpointsConfig,
    ConfigError,
    EvalConfig,
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
from payload.metrics import RESULT_SCHEMA, MetricsLog, duration, early_failure, perplexity  # noqa: E402
from payload.model import (  # noqa: E402
    build_model,
    count_params,
    device_peak_flops,
    is_fast,
    lr_at,
    mfu,
    model_flops_per_token,
)
from payload.runtime import RunError, choose_writers, init_distributed, write_json  # noqa: E402
from payload.versions import versions  # noqa: E402


class Trainer:
    """Everything a run needs, set up in __init__; `run()` is the training loop, `step_once()` one step. The
    parts are payload/runtime.py (the ranks), data.py (RunData), engines.py, checkpoint.py (CheckpointManager)
    and metrics.py."""

    def __init__(self, cfg: TrainConfig):
        self.t_launch = time.time()
        self.cfg = cfg
        self._old_handlers: dict[int, object] = {}
        try:
            # Every step runs on every rank in this order: the collectives inside them must match up.
            self._setup_distributed()
            self._setup_output()
            self.data = D.RunData(cfg, self.out, self.dist, self.log)  # tokenizer, training and validation blocks
            self.tok = self.data.tok
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
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        self.dist = init_distributed(self.cfg)
        self.rank, self.world = self.dist.rank, self.dist.world_size
        self.master = self.dist.master

    def _setup_output(self) -> None:
        """out_dir, who writes the shared files into it, config.json and the metrics log."""
        cfg, d = self.cfg, self.dist
        self.out = Path(cfg.out_dir).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        choose_writers(d, self.out)
        self.writer = d.writer
        if self.writer:
            write_json(self.out / "config.json", to_dict(cfg))
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
            f"device {d.device.type}, engine {cfg.engine}, out_dir {'shared' if d.shared else 'per node'}"
        )

    def _setup_batches(self, model) -> None:
        """The micro-batch (batch_size=auto: payload/batch.py), this rank's sampler and the fixed validation
        batches."""
        cfg = self.cfg
        if not cfg.batch_size:
            saved = CK.saved_batch(cfg, self.out)
            cfg.batch_size = B.auto(cfg, model, self.dist, self.data, self.n_params, self.bf16, saved, self.log)
            if self.writer:  # the run's config.json says the batch it trains with
                write_json(self.out / "config.json", to_dict(cfg))
        self.data.batches()

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
        d.barrier(d.setup)  # ranks enter the engine's first broadcast together
        if cfg.engine == "deepspeed":
            from payload.engines import DeepSpeedEngine

            self.engine = DeepSpeedEngine(model, cfg, d.device, d.world_size, self.bf16, node_local_ckpt=not d.shared)
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
        self.checkpoints = CK.CheckpointManager(cfg, self.out, self.dist, self.engine, self.data, self.log)
        self.checkpoints.remove_unfinished()
        self.resumed_from = self._resume() if cfg.resume or cfg.resume_from else None
        self.start_step = self.step
        self.log(
            f"tokens per step: {self.tokens_per_step:,} = {cfg.batch_size} batch x {cfg.block_size} "
            f"tokens x {cfg.grad_accum} accum x {self.world} ranks"
        )

    def _resume(self) -> str | None:
        """Go on from the checkpoint the manager chose and loaded (None: no node has one)."""
        if (resumed := self.checkpoints.resume()) is None:
            return None
        ckpt, meta = resumed
        self.step, self.tokens_seen = meta["step"], meta["tokens_seen"]
        quarantined = self.checkpoints.quarantined
        self.metrics.write(
            kind="resume",
            step=self.step,
            checkpoint=str(ckpt),
            world_size_before=meta["world_size"],
            world_size=self.world,
            **({"quarantined": quarantined} if quarantined else {}),
        )
        return str(ckpt)

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

    def save_checkpoint(self) -> Path:
        val_loss = self.val_loss if self.val_step == self.step else None  # none measured at this step
        return self.checkpoints.save(self.step, self.tokens_seen, self.train_loss, val_loss)

    # ------------------------------------------------------------------------------------------ training

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
            x, y = self.data.next_batch(dev)
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
        self.train_loss = self.dist.all_reduce([local_loss])[0] / self.world
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
            f"step {self.step:>6}/{cfg.max_steps} ({self.step / cfg.max_steps:4.0%}) eta {duration(eta_s)} | "
            f"loss {self.train_loss:.4f} | lr {lr:.2e} | "
            f"norm {norm:.2f} | {step_ms:7.1f} ms | {tps:,.0f} tok/s ({tps_rank:,.0f}/rank) | "
            f"mfu {util * 100:.1f}% | comm {'-' if comm is None else f'{comm * 100:.0f}%'}"
        )
        self._interval = self._new_interval()

    def evaluate(self) -> float:
        t0 = time.time()
        total = torch.zeros((), device=self.dist.device)
        for x, y in self.data.validation(self.dist.device):
            total += self.engine.evaluate_loss(x, y)
        self.val_loss = self.dist.all_reduce([total.item() / len(self.data.val)])[0] / self.world
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
            "quarantined": self.checkpoints.quarantined,
            "hf_model": str(hf_dir) if hf_dir else None,
            "hostname": socket.gethostname(),
            "versions": versions(),
        }
        self.metrics.write(kind="result", **{k: result[k] for k in ("status", "final_step", "final_val_loss")})
        self.metrics.close()
        if self.writer:
            write_json(self.out / "result.json", result)

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
        # reference to it: drop the ones this object and its parts hold.
        if getattr(self, "dist", None) is not None:
            self.dist.setup = None
        self.stop_group = self.engine = self.checkpoints = self.data = self._stop_pending = None
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
        else:
            early_failure(cfg, error, code)


COMMANDS = {
    "train": (TrainConfig, train),
    "generate": (GenerateConfig, C.generate),
    "export": (ExportConfig, C.export),
    "prepare": (PrepareConfig, C.prepare),
    "verify": (ShardsConfig, C.verify_shards),
    "checkpoints": (CheckpointsConfig, C.checkpoints),
    "average": (AverageConfig, C.average),
    "eval": (EvalConfig, E.evaluate),
    "bundle": (BundleConfig, C.bundle),  # export + tokenizer + results + checksums -> <out_dir>/bundle-<model>
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
