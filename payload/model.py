"""Model construction (GPT-2, or any Hugging Face decoder-only config), optimizer parameter groups, LR
schedule and MFU arithmetic."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from .config import LLAMA_PRESETS, MAX_BLOCK, PRESETS, TrainConfig

WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)


def has_weights(path: str) -> bool:
    return bool(path) and any((Path(path) / name).exists() for name in WEIGHT_FILES)


def config_only(path: str) -> bool:
    """A model directory with a config.json and no weights: its architecture, trained from random init (what the
    launch stages when `-e model=<dir>` names a config directory on the controller)."""
    return bool(path) and (Path(path) / "config.json").is_file() and not has_weights(path)


def saved_architecture(cfg):
    """A checkpoint's training config, set to rebuild its architecture for its saved weights: an `init_from` directory
    that is still there stays (a Llama given as a config directory is the architecture itself; weights it holds are
    replaced by the checkpoint's), one that is gone is dropped (the preset then builds, and a mismatch is named)."""
    if cfg.init_from and not (Path(cfg.init_from) / "config.json").is_file():
        cfg.init_from = ""
    return cfg


def _model_type(path: str) -> str:
    import json

    return json.loads((Path(path) / "config.json").read_text()).get("model_type", "")


def is_gpt2_run(cfg: TrainConfig) -> bool:
    """GPT-2 (the compact module or GPT2LMHeadModel) rather than another Hugging Face architecture."""
    if has_weights(cfg.init_from) or config_only(cfg.init_from):
        return _model_type(cfg.init_from) == "gpt2"
    return cfg.model in PRESETS


def hf_config(cfg: TrainConfig, vocab_size: int, eos_id: int):
    """The transformers config of a non-GPT-2 run: a Llama preset, or the config.json (read offline) of
    `--model=DIR` or of a config-only `--init_from=DIR`. A preset's vocabulary is the tokenizer's, rounded up to
    a multiple of 64; a config.json keeps its own, which must hold the tokenizer's."""
    from transformers import AutoConfig, LlamaConfig

    source = cfg.init_from if config_only(cfg.init_from) else cfg.model
    if source in LLAMA_PRESETS:
        return LlamaConfig(
            vocab_size=-(-vocab_size // 64) * 64,
            bos_token_id=eos_id,
            eos_token_id=eos_id,
            attention_dropout=cfg.dropout,
            **LLAMA_PRESETS[source],
        )
    path = Path(source).expanduser()
    if not (path / "config.json").is_file():
        raise ValueError(f"--model={source}: no config.json there (a preset name, or a Hugging Face model dir)")
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    if config.vocab_size < vocab_size:
        raise ValueError(f"--model={source}: vocab_size {config.vocab_size} < the tokenizer's {vocab_size} tokens")
    if hasattr(config, "attention_dropout"):
        config.attention_dropout = cfg.dropout
    return config


def positions(config) -> int | None:
    """The positions a config declares (max_position_embeddings, GPT-2's n_positions), if any."""
    for key in ("max_position_embeddings", "n_positions"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def check_block_size(config, block_size: int, name: str) -> None:
    """Refuse a block the model's positions do not allow, or above the payload's MAX_BLOCK."""
    limit = min(MAX_BLOCK, positions(config) or MAX_BLOCK)
    if block_size > limit:
        why = f"{name} has {positions(config)} positions" if limit < MAX_BLOCK else f"the limit is {MAX_BLOCK}"
        raise ValueError(f"--block_size={block_size}: {why} (max_position_embeddings); use --block_size<={limit}")


def build_hf_model(cfg: TrainConfig, vocab_size: int, eos_id: int, log=print):
    """Any Hugging Face decoder-only model (Llama, Mistral, Qwen, ...) as transformers builds it: weights from
    `init_from` if it has any, else random init from the preset or config.json. fp32 master weights, SDPA."""
    import torch
    from transformers import AutoModelForCausalLM

    opts = dict(attn_implementation="sdpa", dtype=torch.float32)
    try:
        if has_weights(cfg.init_from):
            model = AutoModelForCausalLM.from_pretrained(cfg.init_from, local_files_only=True, **opts)
            if model.config.vocab_size < vocab_size:
                have = model.config.vocab_size
                raise ValueError(f"{cfg.init_from}: model vocabulary {have} < tokenizer {vocab_size}")
            log(f"model: pretrained weights from {cfg.init_from} ({type(model).__name__})")
        else:
            name = cfg.init_from if config_only(cfg.init_from) else cfg.model
            if cfg.init_from and name != cfg.init_from:
                log(f"model: no local weights in {cfg.init_from!r}; building {cfg.model!r} from config (random init)")
            config = hf_config(cfg, vocab_size, eos_id)
            model = AutoModelForCausalLM.from_config(config, **opts)
            log(f"model: building {name!r} ({type(model).__name__}) from config (random init)")
    except ValueError as e:
        # An encoder or encoder-decoder config; transformers' own message lists every causal LM (pages long).
        if "Unrecognized configuration class" in str(e):
            name = f"--init_from={cfg.init_from}" if has_weights(cfg.init_from) else f"--model={cfg.model}"
            raise ValueError(f"{name}: not a decoder-only (causal LM) config: AutoModelForCausalLM has none") from e
        raise
    check_block_size(model.config, cfg.block_size, cfg.init_from or cfg.model)
    if cfg.model_impl == "fast":  # the default: say once why it does not apply
        log(f"model: the transformers {type(model).__name__} (model_impl=fast is GPT-2's compact module only)")
    if cfg.grad_checkpoint:  # per decoder layer, non-reentrant (works under FSDP2 and DeepSpeed)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    return model


def build_model(cfg: TrainConfig, vocab_size: int, eos_id: int, log=print):
    """The model to train: pretrained weights from `init_from` if it has any, else the preset from config
    (random init). GPT-2: `model_impl=fast` gives the compact GPT-2 of payload/gpt2.py (Hugging Face state dict
    format), `hf` the transformers GPT2LMHeadModel itself. Any other architecture: build_hf_model."""
    if not is_gpt2_run(cfg):
        return build_hf_model(cfg, vocab_size, eos_id, log)
    from transformers import GPT2Config, GPT2LMHeadModel

    drop = dict(resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout)
    if has_weights(cfg.init_from):
        model = GPT2LMHeadModel.from_pretrained(cfg.init_from, local_files_only=True, **drop)
        if model.config.vocab_size < vocab_size:
            raise ValueError(f"{cfg.init_from}: model vocabulary {model.config.vocab_size} < tokenizer {vocab_size}")
        check_block_size(model.config, cfg.block_size, cfg.init_from)  # config.py allowed MAX_BLOCK for init_from
        log(f"model: pretrained weights from {cfg.init_from}")
    else:
        if config_only(cfg.init_from):
            log(f"model: building {cfg.init_from!r} from its config.json (random init)")
        elif cfg.init_from:
            log(f"model: no local weights in {cfg.init_from!r}; building {cfg.model!r} from config (random init)")
        else:
            log(f"model: building {cfg.model!r} from config (random init; no pretrained weights given)")
        if config_only(cfg.init_from):
            config = GPT2Config.from_pretrained(cfg.init_from, local_files_only=True, **drop)
            if config.vocab_size < vocab_size:
                raise ValueError(f"{cfg.init_from}: config vocab_size {config.vocab_size} < tokenizer {vocab_size}")
            check_block_size(config, cfg.block_size, cfg.init_from)
        else:
            # Round the vocabulary up to a multiple of 64: the extra rows are never targets, matmuls run faster.
            config = GPT2Config(
                vocab_size=-(-vocab_size // 64) * 64,
                n_positions=1024,
                bos_token_id=eos_id,
                eos_token_id=eos_id,
                **PRESETS[cfg.model],
                **drop,
            )
        if cfg.model_impl == "hf":
            model = GPT2LMHeadModel(config)
        else:
            from .gpt2 import GPT2

            return GPT2(config, **fast_options(cfg))
    if cfg.model_impl == "fast":
        from .gpt2 import GPT2, unsupported

        bad = unsupported(model.config)
        if not bad:
            return GPT2.from_hf(model, **fast_options(cfg))
        log(f"model: {cfg.init_from} uses {', '.join(bad)}: training the Hugging Face module (model_impl=hf)")
    if cfg.grad_checkpoint:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False  # training: no key/value cache
    return model


def fast_options(cfg: TrainConfig) -> dict:
    return dict(
        grad_checkpoint=cfg.grad_checkpoint,
        ce_chunk=cfg.ce_chunk,
        attn_backend=cfg.attn_backend,
        residual_dtype=cfg.residual_dtype,
    )


def is_fast(model) -> bool:
    return hasattr(model, "hf_state_dict")


def as_hf(model):
    """A transformers GPT2LMHeadModel (for generate and export) from either implementation."""
    return model.to_hf() if is_fast(model) else model


def model_loss(module, x, y, fast: bool):
    """Mean next-token loss of a (possibly wrapped or compiled) model of either implementation."""
    if fast:
        return module(x, targets=y)
    import torch.nn.functional as F

    logits = module(input_ids=x, use_cache=False).logits
    # fp32 softmax even under bf16 autocast: the loss is what we report and compare across runs.
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))


def transformers_class(model) -> type:
    """The transformers class of a module that FSDP2 may have re-classed (fully_shard makes
    `FSDPLlamaForCausalLM`, a subclass): the name a saved config.json must carry in `architectures`."""
    return next(c for c in type(model).__mro__ if c.__module__.startswith("transformers."))


def _save_pretrained(model, path: str, **kwargs) -> None:
    """model.save_pretrained, written by whichever rank calls it. transformers 5 writes only on global rank 0 once
    torch.distributed is up (PreTrainedModel.should_save_on_this_rank); with node-local out_dirs every node's
    writer exports its own copy, and the other nodes' exports came out empty."""
    model.should_save_on_this_rank = lambda is_main_process: is_main_process  # shadows the method, this call only
    try:
        model.save_pretrained(path, **kwargs)
    finally:
        del model.should_save_on_this_rank


def save_hf(model, path: str, state: dict | None = None) -> None:
    """Write a Hugging Face model directory (loadable by AutoModelForCausalLM) from either implementation."""
    if is_fast(model):
        _save_pretrained(model.to_hf(state), path)
        return
    _save_pretrained(model, path, state_dict=state)
    import json

    config = Path(path) / "config.json"
    saved = json.loads(config.read_text())
    saved["architectures"] = [transformers_class(model).__name__]  # not FSDP's subclass name
    config.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")


def decoder_layers(model) -> list:
    """The repeated decoder layers of any model, each FSDP2's unit (gathered only for its own forward and
    backward): the classes transformers names in `_no_split_modules` (LlamaDecoderLayer, Qwen2DecoderLayer,
    GPT2Block, ...), else the children of the model's largest nn.ModuleList (the compact GPT-2's blocks)."""
    import torch

    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if layers:
        return layers
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    if not lists:
        raise ValueError(f"{type(model).__name__}: no decoder layers found (no _no_split_modules, no ModuleList)")
    return list(max(lists, key=lambda ml: sum(p.numel() for p in ml.parameters())))


def param_groups(model, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; never norms or biases (all 1-D)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to `min_lr` at `max_steps` (step counts from 0)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / (cfg.warmup_steps + 1)
    if step >= cfg.max_steps:
        return cfg.min_lr
    progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)


# ---------------------------------------------------------------------------------------------- MFU


def count_params(model) -> tuple[int, int]:
    """(all parameters, parameters that take part in the per-token matmuls).

    GPT-2: all but the position embeddings (the token embedding is the tied output layer). Any other model:
    the weights of its nn.Linear layers (query/key/value/output projections at their grouped-query sizes, the
    SwiGLU gate/up/down, the output layer once whether tied or not); embedding lookups are no matmul."""
    import torch

    total = sum(p.numel() for p in model.parameters())
    if hasattr(model, "transformer") and hasattr(model.transformer, "wpe"):
        return total, total - model.transformer.wpe.weight.numel()
    return total, sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def attention_width(config) -> int:
    """heads x head_dim: the width of the attention scores' matmuls (hidden_size unless head_dim says else)."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return heads * head_dim


def flops_per_token(n_params: int, n_layer: int, n_embd: int, seq_len: int) -> float:
    """Training FLOPs per token (PaLM appendix B): 6N for the weights' forward+backward matmuls plus
    12*L*d*T for attention scores and their weighted sum (d = heads * head_dim: n_embd for GPT-2, every query
    head's for grouped-query attention, whose fewer key/value heads shrink only N)."""
    return 6 * n_params + 12 * n_layer * n_embd * seq_len


def model_flops_per_token(model, seq_len: int) -> float:
    """flops_per_token for a built model of any architecture (count_params' matmul weights)."""
    config = model.config
    return flops_per_token(count_params(model)[1], config.num_hidden_layers, attention_width(config), seq_len)


def mfu(tokens_per_s: float, flops_per_tok: float, peak_flops: float) -> float:
    return tokens_per_s * flops_per_tok / peak_flops if peak_flops > 0 else float("nan")


# Dense peak FLOPS per device for bf16 tensor-core math (fp32 non-tensor for the second value).
# Matched against torch.cuda.get_device_name() in order, so longer names come first.
GPU_PEAKS: list[tuple[str, float, float]] = [
    ("H200", 989e12, 67e12),
    ("H100 PCIe", 756e12, 51e12),
    ("H100", 989e12, 67e12),
    ("GH200", 989e12, 67e12),
    ("B200", 2250e12, 80e12),
    ("A100", 312e12, 19.5e12),
    ("A800", 312e12, 19.5e12),
    ("A30", 165e12, 10.3e12),
    ("A10", 125e12, 31.2e12),
    ("L40S", 362e12, 91.6e12),
    ("L40", 181e12, 90.5e12),
    ("L4", 121e12, 30.3e12),
    ("A6000", 155e12, 38.7e12),
    ("RTX 4090", 165e12, 82.6e12),
    ("RTX 3090", 71e12, 35.6e12),
    ("V100", 125e12, 15.7e12),  # fp16 tensor cores; V100 has no bf16
    ("T4", 65e12, 8.1e12),
]


def _cpu_info() -> tuple[float, set[str]]:
    ghz, flags = 0.0, set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ghz, flags
    if m := re.search(r"^flags\s*:\s*(.*)$", text, re.M):
        flags = set(m.group(1).split())
    if m := re.search(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M):
        ghz = float(m.group(1)) / 1000
    return ghz, flags


def cpu_peak_flops(threads: int, bf16: bool) -> tuple[float, str]:
    """Rough CPU peak: threads x GHz x FLOPs per cycle from the widest FMA the flags advertise
    (two FMA ports assumed). Good for comparing runs on one machine, not across machines."""
    ghz, flags = _cpu_info()
    if "avx512f" in flags:
        per_cycle, isa = 2 * 2 * 16, "avx512"
    elif "avx2" in flags and "fma" in flags:
        per_cycle, isa = 2 * 2 * 8, "avx2"
    else:
        per_cycle, isa = 2 * 4, "sse"
    if bf16 and "amx_bf16" in flags:
        per_cycle, isa = 1024, "amx_bf16"
    elif bf16 and "avx512_bf16" in flags:
        per_cycle, isa = per_cycle * 2, "avx512_bf16"
    return threads * (ghz or 2.0) * 1e9 * per_cycle, f"cpu {isa} {threads} threads @ {ghz or 2.0:.2f} GHz"


def device_peak_flops(device, bf16: bool, threads: int, override_tflops: float = 0.0) -> tuple[float, str]:
    """(peak FLOPS of one rank's device, how it was found)."""
    if override_tflops:
        return override_tflops * 1e12, "--peak_tflops"
    if device.type == "cuda":
        import torch

        name = torch.cuda.get_device_name(device)
        for key, peak_bf16, peak_fp32 in GPU_PEAKS:
            if key in name:
                return (peak_bf16 if bf16 else peak_fp32), name
        return 0.0, f"{name} (unknown peak: pass --peak_tflops)"
    return cpu_peak_flops(threads or os.cpu_count() or 1, bf16)
