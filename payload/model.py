"""GPT-2 model construction, optimizer parameter groups, LR schedule and MFU arithmetic."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from .config import PRESETS, TrainConfig

WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)


def has_weights(path: str) -> bool:
    return bool(path) and any((Path(path) / name).exists() for name in WEIGHT_FILES)


def build_model(cfg: TrainConfig, vocab_size: int, eos_id: int, log=print):
    """The model to train: pretrained weights from `init_from` if it has any, else the preset from config
    (random init). `model_impl=fast` gives the compact GPT-2 of payload/gpt2.py (Hugging Face state dict
    format), `hf` the transformers GPT2LMHeadModel itself."""
    from transformers import GPT2Config, GPT2LMHeadModel

    drop = dict(resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout)
    if has_weights(cfg.init_from):
        model = GPT2LMHeadModel.from_pretrained(cfg.init_from, local_files_only=True, **drop)
        if model.config.vocab_size < vocab_size:
            raise ValueError(f"{cfg.init_from}: model vocabulary {model.config.vocab_size} < tokenizer {vocab_size}")
        log(f"model: pretrained weights from {cfg.init_from}")
    else:
        if cfg.init_from:
            log(f"model: no local weights in {cfg.init_from!r}; building {cfg.model!r} from config (random init)")
        else:
            log(f"model: building {cfg.model!r} from config (random init; no pretrained weights given)")
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


def save_hf(model, path: str, state: dict | None = None) -> None:
    """Write a Hugging Face model directory (GPT2LMHeadModel format) from either implementation."""
    if is_fast(model):
        model.to_hf(state).save_pretrained(path)
    else:
        model.save_pretrained(path, state_dict=state)


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
    """(all parameters, parameters that take part in the per-token matmuls: without position embeddings)."""
    total = sum(p.numel() for p in model.parameters())
    return total, total - model.transformer.wpe.weight.numel()


def flops_per_token(n_params: int, n_layer: int, n_embd: int, seq_len: int) -> float:
    """Training FLOPs per token (PaLM appendix B): 6N for the weights' forward+backward matmuls plus
    12*L*d*T for attention scores and their weighted sum (d = heads * head_dim = n_embd)."""
    return 6 * n_params + 12 * n_layer * n_embd * seq_len


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
