"""The three ways to run the same training step: torch DDP, FSDP2, or a DeepSpeed ZeRO engine.

All three expose the same small surface to train.py: `forward_backward` (one micro-batch), `step` (optimizer
step at an accumulation boundary), `evaluate_loss`, `save`/`load` of a checkpoint and `export_hf`.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import torch

from .config import TrainConfig
from .model import as_hf, decoder_layers, is_fast, model_loss, param_groups, save_hf


def use_compile(cfg: TrainConfig, device: torch.device) -> bool:
    """compile=auto: on GPUs (minutes of compiling pay back within a run), off on CPUs (they rarely do)."""
    return cfg.compile == "true" or (cfg.compile == "auto" and device.type == "cuda")


def compiled(module, cfg: TrainConfig):
    """The module as torch.compile makes it in the configured mode."""
    return torch.compile(module, mode=cfg.compile_mode)


def _atomic_save(obj, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    tmp.replace(path)


class _ForwardTimer:
    """This rank's own forward time (the trainer reads and resets `fwd_s` each log interval): the model's forward
    makes no collective under DDP or ZeRO-1/2, so a slow rank shows here while its peers' step times (which wait
    for it in the gradient all-reduce) look the same as its own. Under FSDP and ZeRO-3 the forward gathers
    parameters, so there it holds some waiting too. On a GPU the time is real only when `sync` is set (the
    trainer sets it on the last step of each interval), else it is the kernels' launch time."""

    fwd_s, fwd_n, sync = 0.0, 0, False

    def timed_forward(self, forward):
        cuda = self.sync and torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = forward()
        if cuda:
            torch.cuda.synchronize()
        if self.sync or not torch.cuda.is_available():
            self.fwd_s += time.perf_counter() - t0
            self.fwd_n += 1
        return out


class EMA:
    """An exponential moving average of the weights, updated after every optimizer step:
    ema = decay * ema + (1 - decay) * weights, kept in fp32 and in the weights' own layout (under FSDP each rank
    holds the EMA of its shard, a DTensor like the parameter). Saved with each checkpoint and exported beside the
    model as `hf_model_ema`."""

    FILE = "ema.pt"

    def __init__(self, named_parameters, decay: float):
        self.decay = float(decay)
        named = [(n, p) for n, p in named_parameters if p.requires_grad]
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.shadow = [p.detach().float().clone() for p in self.params]

    @torch.no_grad()
    def update(self) -> None:
        for s, p in zip(self.shadow, self.params, strict=True):
            s.lerp_(p.detach().float(), 1.0 - self.decay)

    @torch.no_grad()
    def reset(self) -> None:
        """Start again from the weights (a checkpoint saved without an EMA)."""
        for s, p in zip(self.shadow, self.params, strict=True):
            s.copy_(p.detach().float())

    def state_dict(self) -> dict:
        return dict(zip(self.names, self.shadow, strict=True))

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        missing = [n for n in self.names if n not in state]
        if missing:
            raise RuntimeError(f"the checkpoint's EMA lacks {missing[:3]}")
        for n, s in zip(self.names, self.shadow, strict=True):
            s.copy_(state[n])

    def model_state(self, module, state: dict, shadow: list | None = None) -> dict:
        """`state` (the module's state dict, key -> tensor) with every parameter's entry replaced by its EMA
        (`shadow`: the EMA in another form, such as FSDP's shards gathered whole); a tied weight's second key
        (lm_head.weight) follows the parameter it shares."""
        by_id = {id(p): s for p, s in zip(self.params, self.shadow if shadow is None else shadow, strict=True)}
        own = module.state_dict(keep_vars=True)
        return {k: by_id.get(id(own.get(k)), v) for k, v in state.items()}


def _ema(engine, named_parameters) -> EMA | None:
    return EMA(named_parameters, engine.cfg.ema_decay) if engine.cfg.ema_decay else None


class _TorchEngine(_ForwardTimer):
    """What DDP and FSDP share: AdamW over the bare module, the optimizer step, the evaluation forward."""

    autocast = contextlib.nullcontext()

    def _adamw(self, model, cfg: TrainConfig, device: torch.device):
        return torch.optim.AdamW(
            param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), fused=device.type == "cuda"
        )

    def step(self, lr: float | None) -> torch.Tensor:
        """The optimizer step; returns the gradient norm as a device tensor (reading it would wait for the
        GPU: train.py reads it once per log interval)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        norm = torch.nn.utils.clip_grad_norm_(self.raw.parameters(), self.cfg.grad_clip or float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema:
            self.ema.update()
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: a DTensor, the global norm
        return norm.detach()

    def current_lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    @torch.no_grad()
    def evaluate_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.raw.eval()
        with self.autocast:
            loss = model_loss(self.raw, x, y, self.fast)
        self.raw.train()
        return loss


class DDPEngine(_TorchEngine):
    name = "ddp"

    def __init__(self, model, cfg: TrainConfig, device: torch.device, world_size: int, bf16: bool):
        self.cfg, self.device = cfg, device
        self.raw = model.to(device)  # the bare module: checkpoints and exports use its state_dict
        self.fast = is_fast(model)
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        self.compiled = use_compile(cfg, device)
        module = compiled(self.raw, cfg) if self.compiled else self.raw
        if world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            module = DDP(module, device_ids=[device.index] if device.type == "cuda" else None)
        self.model = module
        self.distributed = world_size > 1
        self.optimizer = self._adamw(self.raw, cfg, device)
        self.ema = _ema(self, self.raw.named_parameters())

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, boundary: bool) -> torch.Tensor:
        # Gradients are all-reduced only on the last micro-batch of an optimizer step.
        sync = contextlib.nullcontext() if boundary or not self.distributed else self.model.no_sync()
        with sync:
            with self.autocast:
                loss = self.timed_forward(lambda: model_loss(self.model, x, y, self.fast))
            (loss / self.cfg.grad_accum).backward()
        return loss.detach()

    # Model and optimizer are identical on every rank, so one writer per node is enough (runtime.py choose_writers).
    def save(self, ckpt_dir: Path, meta: dict, writer: bool) -> None:
        if writer:
            _atomic_save(self.raw.state_dict(), ckpt_dir / "model.pt")
            _atomic_save(self.optimizer.state_dict(), ckpt_dir / "optimizer.pt")
            if self.ema:
                _atomic_save(self.ema.state_dict(), ckpt_dir / EMA.FILE)
            (ckpt_dir / "trainer.json").write_text(json.dumps(meta, indent=1) + "\n")

    def load(self, ckpt_dir: Path, optimizer: bool = True) -> dict:
        self.raw.load_state_dict(torch.load(ckpt_dir / "model.pt", map_location=self.device))
        if optimizer:
            self.optimizer.load_state_dict(torch.load(ckpt_dir / "optimizer.pt", map_location=self.device))
        _load_ema(self.ema, ckpt_dir, self.device)
        return json.loads((ckpt_dir / "trainer.json").read_text())

    def export_hf(self, path: Path, writer: bool) -> None:
        if writer:
            save_hf(self.raw, str(path))

    def export_ema(self, path: Path, writer: bool) -> None:
        if writer:
            state = self.ema.model_state(self.raw, self.raw.state_dict())
            save_hf(self.raw, str(path), {k: v.detach().float().cpu() for k, v in state.items()})


def _load_ema(ema: EMA | None, ckpt_dir: Path, device) -> None:
    """The EMA saved with a checkpoint (a node's writer saved the whole one); a checkpoint without it (EMA off
    when it was saved) starts the EMA from its weights."""
    if ema is None:
        return
    if (ckpt_dir / EMA.FILE).is_file():
        ema.load_state_dict(torch.load(ckpt_dir / EMA.FILE, map_location=device))
    else:
        ema.reset()


def deepspeed_config(cfg: TrainConfig, world_size: int, bf16: bool, node_local_ckpt: bool) -> dict:
    """The DeepSpeed config: the user's JSON if given (batch keys filled in), else built from our options."""
    batch = {
        "train_micro_batch_size_per_gpu": cfg.batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "train_batch_size": cfg.batch_size * cfg.grad_accum * world_size,
    }
    if cfg.ds_config:
        ds = json.loads(Path(cfg.ds_config).read_text())
        for key, value in batch.items():
            if ds.get(key, "auto") not in ("auto", value):
                raise ValueError(f"{cfg.ds_config}: {key}={ds[key]} but the trainer's options give {value}")
            ds[key] = value
        ds.setdefault("zero_allow_untested_optimizer", True)
    else:
        zero: dict = {"stage": cfg.zero_stage}
        if cfg.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        ds = {
            **batch,
            "gradient_clipping": cfg.grad_clip,
            "zero_optimization": zero,
            "bf16": {"enabled": bf16},
            # We hand DeepSpeed a torch AdamW: declaring the optimizer in the config would JIT-build
            # fused_adam / cpu_adam (~50 s each on first use).
            "zero_allow_untested_optimizer": True,
            "steps_per_print": 1 << 30,
        }
    # Every node keeps the model states it needs to resume when out_dir is not shared between nodes.
    ds.setdefault("checkpoint", {}).setdefault("use_node_local_storage", node_local_ckpt)
    return ds


class DeepSpeedEngine(_ForwardTimer):
    name = "deepspeed"

    def __init__(
        self,
        model,
        cfg: TrainConfig,
        device: torch.device,
        world_size: int,
        bf16: bool,
        node_local_ckpt: bool,
    ):
        import deepspeed

        self.cfg, self.device = cfg, device
        self.ds_config = deepspeed_config(cfg, world_size, bf16, node_local_ckpt)
        optimizer = None  # a config that declares "optimizer" gets DeepSpeed's own
        if "optimizer" not in self.ds_config:
            groups = param_groups(model, cfg.weight_decay)
            if cfg.offload_optimizer:  # optimizer state lives on the CPU: DeepSpeed insists on its CPU Adam
                from deepspeed.ops.adam import DeepSpeedCPUAdam

                optimizer = DeepSpeedCPUAdam(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), adamw_mode=True)
            else:
                optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
        # The payload sets the learning rate itself unless the JSON config brings a scheduler.
        self.owns_lr = "scheduler" not in self.ds_config
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model.to(device), optimizer=optimizer, config=self.ds_config
        )
        self.zero_stage = self.engine.zero_optimization_stage()
        self.fast = is_fast(model)
        # ZeRO-1 and -2 keep whole parameters on every rank (config.py refuses an EMA under ZeRO-3).
        self.ema = _ema(self, self.engine.module.named_parameters())

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, boundary: bool) -> torch.Tensor:
        loss = self.timed_forward(lambda: model_loss(self.engine, x, y, self.fast))
        self.engine.backward(loss)  # scales by 1/grad_accum and reduces at the boundary itself
        if not boundary:
            self.engine.step()  # DeepSpeed counts every micro-batch; off the boundary this only advances it
        return loss.detach()

    def step(self, lr: float | None) -> float:
        if self.owns_lr:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        self.engine.step()
        if self.ema:
            self.ema.update()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def current_lr(self) -> float:
        return self.engine.get_lr()[0]

    @torch.no_grad()
    def evaluate_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.engine.eval()
        loss = model_loss(self.engine, x, y, self.fast)
        self.engine.train()
        return loss

    def save(self, ckpt_dir: Path, meta: dict, writer: bool) -> None:
        # Collective: every rank writes its own ZeRO partition; DeepSpeed writes <root>/latest.
        self.engine.save_checkpoint(
            str(ckpt_dir.parent), tag=ckpt_dir.name, client_state={"trainer": meta}, save_latest=False
        )
        if writer:
            if self.ema:
                _atomic_save(self.ema.state_dict(), ckpt_dir / EMA.FILE)
            (ckpt_dir / "trainer.json").write_text(json.dumps(meta, indent=1) + "\n")

    def load(self, ckpt_dir: Path, optimizer: bool = True) -> dict:
        _load_ema(self.ema, ckpt_dir, self.device)
        path, client = self.engine.load_checkpoint(
            str(ckpt_dir.parent),
            tag=ckpt_dir.name,
            load_optimizer_states=optimizer,
            load_lr_scheduler_states=optimizer,
        )
        if path is None:
            raise RuntimeError(f"DeepSpeed could not load the checkpoint in {ckpt_dir}")
        return client["trainer"]

    def export_hf(self, path: Path, writer: bool) -> None:
        """A consolidated Hugging Face directory. ZeRO-3 shards parameters: gather them first (collective)."""
        module = self.engine.module
        gather = contextlib.nullcontext()
        if self.zero_stage == 3:
            import deepspeed

            gather = deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None)
        with gather:
            if writer:
                state = {k: v.detach().float().cpu() for k, v in module.state_dict().items()}
                save_hf(module, str(path), state)

    def export_ema(self, path: Path, writer: bool) -> None:
        if writer:
            module = self.engine.module
            state = self.ema.model_state(module, module.state_dict())
            save_hf(module, str(path), {k: v.detach().float().cpu() for k, v in state.items()})


def deepspeed_state_dict(ckpt_dir: Path) -> dict:
    """Offline: a DeepSpeed checkpoint's ZeRO partitions (all on this disk) merged into one fp32 state dict."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    return get_fp32_state_dict_from_zero_checkpoint(str(ckpt_dir.parent), tag=ckpt_dir.name)


def export_deepspeed_checkpoint(ckpt_dir: Path, model, export_dir: Path, state: dict | None = None) -> None:
    """Offline: merge a DeepSpeed checkpoint's ZeRO partitions (all on this disk) into `model` and save it
    (`state`: an already merged state dict, such as an average)."""
    state = deepspeed_state_dict(ckpt_dir) if state is None else state
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied lm_head.weight is the token embedding, stored once; an untied one (Llama presets) must be there.
    tied = getattr(model.config, "tie_word_embeddings", True)
    if unexpected or [k for k in missing if not (tied and k == "lm_head.weight")]:
        raise RuntimeError(f"checkpoint does not match the model: missing {missing}, unexpected {unexpected}")
    model = as_hf(model)
    model.tie_weights()
    model.save_pretrained(str(export_dir))


def split_dtensors(tree: dict) -> tuple[dict, dict]:
    """A nested dict split in two of the same shape: (DTensor leaves, every other leaf)."""
    from torch.distributed.tensor import DTensor

    sharded, rest = {}, {}
    for key, value in tree.items():
        if isinstance(value, dict):
            a, b = split_dtensors(value)
            if a:
                sharded[key] = a
            if b:
                rest[key] = b
        elif isinstance(value, DTensor):
            sharded[key] = value
        else:
            rest[key] = value
    return sharded, rest


def merge_trees(a: dict, b: dict) -> dict:
    """The inverse of split_dtensors."""
    out = dict(a)
    for key, value in b.items():
        out[key] = merge_trees(out[key], value) if isinstance(value, dict) and key in out else value
    return out


class FSDPEngine(_TorchEngine):
    """FSDP2 (torch.distributed.fsdp.fully_shard): parameters, gradients and optimizer state sharded over the
    ranks, each transformer block its own unit (gathered for its forward and backward only). Checkpoints are
    sharded too (torch.distributed.checkpoint: every rank writes its shard, no rank holds the whole model)."""

    name = "fsdp"

    def __init__(self, model, cfg: TrainConfig, device: torch.device, world_size: int, bf16: bool):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

        self.cfg, self.device = cfg, device
        self.fast = is_fast(model)
        model.to(device)
        mesh = init_device_mesh(device.type, (world_size,))
        # bf16 compute, fp32 master weights and gradient reduction (what autocast gives DDP)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
        opts = dict(mesh=mesh, mp_policy=mp) if mp else dict(mesh=mesh)
        for layer in decoder_layers(model):  # each decoder layer its own unit, whatever the architecture
            fully_shard(layer, **opts)
        fully_shard(model, **opts)  # the rest: embeddings, output layer (tied or not), final norm
        # For the log: the units fully_shard made below the root (it re-classes a LlamaDecoderLayer as FSDP...)
        units = [m for m in model.modules() if isinstance(m, FSDPModule) and m is not model]
        self.units = [type(m).__name__.removeprefix("FSDP") for m in units]
        self.raw = model
        self.compiled = use_compile(cfg, device)
        self.model = compiled(model, cfg) if self.compiled else model
        self.optimizer = self._adamw(model, cfg, device)
        self.ema = _ema(self, model.named_parameters())  # each rank the EMA of its shards (DTensors)

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, boundary: bool) -> torch.Tensor:
        # Gradients are reduce-scattered only on the last micro-batch of an optimizer step.
        self.raw.set_requires_gradient_sync(boundary)
        loss = self.timed_forward(lambda: model_loss(self.model, x, y, self.fast))
        (loss / self.cfg.grad_accum).backward()
        return loss.detach()

    def _state(self) -> tuple[dict, dict]:
        """(sharded, local): the DTensor leaves, each rank holding its own shard, go through
        torch.distributed.checkpoint; the rest (optimizer step counts, param groups) is the same on every rank
        and is saved by each rank beside its shard. DCP would store such replicated items once, in one rank's
        file, which another node's disk does not have."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model, optim = get_state_dict(self.raw, self.optimizer)
        return split_dtensors({"model": model, "optim": optim})

    def save(self, ckpt_dir: Path, meta: dict, writer: bool) -> None:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        sharded, local = self._state()
        if self.ema:
            sharded["ema"] = self.ema.state_dict()
        dcp.save(sharded, checkpoint_id=str(ckpt_dir / "dcp"))  # collective: every rank its shards
        _atomic_save(local, ckpt_dir / f"local_rank{dist.get_rank()}.pt")
        # Rank 0 wrote the shard index; a node that does not share its disk gets a copy (every rank loads it).
        index = [(ckpt_dir / "dcp" / ".metadata").read_bytes() if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(index, src=0)
        if writer:
            if not (ckpt_dir / "dcp" / ".metadata").exists():
                (ckpt_dir / "dcp" / ".metadata").write_bytes(index[0])
            (ckpt_dir / "trainer.json").write_text(json.dumps(meta, indent=1) + "\n")

    def load(self, ckpt_dir: Path, optimizer: bool = True) -> dict:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

        sharded, _ = self._state()
        if not optimizer:  # --skip_optimizer: weights only, fresh optimizer state
            del sharded["optim"]
        saved = dcp.FileSystemReader(str(ckpt_dir / "dcp")).read_metadata().state_dict_metadata
        with_ema = self.ema is not None and any(k.startswith("ema.") for k in saved)
        if with_ema:
            sharded["ema"] = self.ema.state_dict()  # loaded in place, as the weights
        dcp.load(sharded, checkpoint_id=str(ckpt_dir / "dcp"))  # into the DTensors, in place
        local = torch.load(ckpt_dir / f"local_rank{dist.get_rank()}.pt", weights_only=False)
        state = merge_trees(sharded, local)
        set_model_state_dict(self.raw, state["model"])
        if optimizer:
            set_optimizer_state_dict(self.raw, self.optimizer, state["optim"])
        if self.ema is not None and not with_ema:
            self.ema.reset()  # saved without an EMA: it starts from these weights
        return json.loads((ckpt_dir / "trainer.json").read_text())

    def export_hf(self, path: Path, writer: bool) -> None:
        """The whole model gathered tensor by tensor (collective: every rank, in the same order) to each writer's
        CPU, saved in Hugging Face format. Every node's writer, not rank 0 alone: with node-local out_dirs each
        node exports its own copy (torch's full_state_dict with cpu_offload gives the whole model to rank 0 only,
        and the other nodes' exports failed)."""
        state = {}
        for name, value in self.raw.state_dict().items():
            whole = value.full_tensor() if hasattr(value, "full_tensor") else value
            if writer:
                state[name] = whole.detach().float().cpu()
        if writer:
            save_hf(self.raw, str(path), state)

    def export_ema(self, path: Path, writer: bool) -> None:
        """The EMA's shards gathered to whole tensors (collective: every rank, in the same order), saved by the
        writer in place of the weights."""
        whole = [s.full_tensor() if hasattr(s, "full_tensor") else s for s in self.ema.shadow]
        state = self.ema.model_state(self.raw, self.raw.state_dict(keep_vars=True), whole)
        # What is still a shard (none in these models: FSDP shards parameters only) is gathered by every rank too.
        state = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in state.items()}
        if writer:
            save_hf(self.raw, str(path), {k: t.detach().float().cpu() for k, t in state.items()})


def fsdp_state_dict(ckpt_dir: Path) -> dict:
    """Offline: an FSDP checkpoint's shards (torch.distributed.checkpoint, all on this disk) as one state dict."""
    import tempfile

    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp, "whole.pt")
        dcp_to_torch_save(str(ckpt_dir / "dcp"), str(whole))
        return torch.load(whole, map_location="cpu", weights_only=False)["model"]


def export_fsdp_checkpoint(ckpt_dir: Path, model, export_dir: Path, state: dict | None = None) -> None:
    """Offline: merge an FSDP checkpoint's shards (all on this disk) into `model` and save it (`state`: an already
    merged state dict, such as an average)."""
    model.load_state_dict(fsdp_state_dict(ckpt_dir) if state is None else state)
    save_hf(model, str(export_dir))


def checkpoint_state_dict(ckpt_dir: Path) -> dict:
    """The whole model's weights in any engine's checkpoint (all shards on this disk): DDP's model.pt, FSDP's
    dcp/ or DeepSpeed's ZeRO partitions."""
    if (ckpt_dir / "model.pt").is_file():
        return torch.load(ckpt_dir / "model.pt", map_location="cpu")
    if (ckpt_dir / "dcp").is_dir():
        return fsdp_state_dict(ckpt_dir)
    return deepspeed_state_dict(ckpt_dir)
