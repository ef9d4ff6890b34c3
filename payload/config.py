"""Typed run configuration: defaults < config file (JSON/YAML) < `--key=value` overrides.

Every key is a dataclass field, so unknown keys and values of the wrong type are errors that name the key,
instead of a silent typo (nanoGPT's `exec` configurator accepts anything and asserts on types).

Standard library only (PyYAML is imported only to read a YAML file), so that the controller can judge a run
config with whatever Python runs Ansible, before anything is staged:

  python payload/config.py resolve [--source=NAME] < values.json
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A bad key or value; the message is meant for the person who typed it."""


# Architecture presets for GPT2LMHeadModel. `tiny` and `mini` exist so CPU tests finish in seconds.
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(n_layer=2, n_head=2, n_embd=128),
    "mini": dict(n_layer=4, n_head=4, n_embd=256),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),  # 124M
    "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),  # 350M
    "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),  # 774M
    "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),  # 1558M
}

# Llama-architecture presets (transformers LlamaConfig keyword arguments), trained as the transformers module
# itself. The vocabulary comes from the run's tokenizer (rounded up to a multiple of 64), as for GPT-2.
LLAMA_PRESETS: dict[str, dict[str, Any]] = {
    # CPU tests: grouped-query attention (4 query heads, 2 key/value heads), SwiGLU, an untied output layer,
    # so every term of the FLOP count differs from GPT-2's.
    "llama-tiny": dict(
        hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=False,
    ),
    # ~125M: the shape of HuggingFaceTB/SmolLM-135M (its config.json; 134.5M with its 49152-token vocabulary).
    "llama-125m": dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=2048, tie_word_embeddings=True, rms_norm_eps=1e-5,
    ),
    # ~1B: the shape of meta-llama/Llama-3.2-1B (its config.json: 1.24B with its 128256-token vocabulary),
    # without its llama3 RoPE scaling and with 8192 positions (the payload's longest block) instead of 131072.
    "llama-1b": dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=8192, tie_word_embeddings=True,
        rms_norm_eps=1e-5, rope_theta=500000.0,
    ),
}  # fmt: skip

# The longest training sequence the payload takes (issue #36); a model's own positions may allow fewer.
MAX_BLOCK = 8192
GPT2_POSITIONS = 1024


def is_model_dir(model: str) -> bool:
    """`--model` names a directory with a Hugging Face config.json rather than a preset: a path has a `/` or
    starts with `.` (the launch role's rule, plugins/module_utils/launch/train.py; presets never do)."""
    return "/" in model or model.startswith(".")


def preset_positions(model: str, init_from: str = "") -> int:
    """The longest block a preset allows. MAX_BLOCK for a directory or with `init_from`: their config.json is
    read on the nodes, where building the model checks its own positions (model.check_block_size)."""
    if init_from:
        return MAX_BLOCK
    if model in PRESETS:
        return GPT2_POSITIONS
    if model in LLAMA_PRESETS:
        return min(MAX_BLOCK, LLAMA_PRESETS[model]["max_position_embeddings"])
    return MAX_BLOCK


CHOICES: dict[str, tuple[str, ...]] = {
    "engine": ("ddp", "deepspeed", "fsdp"),
    "dtype": ("auto", "float32", "bfloat16"),
    "backend": ("auto", "nccl", "gloo"),
    "compile": ("auto", "true", "false"),
    "compile_mode": ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"),
    "model_impl": ("fast", "hf"),
    "attn_backend": ("auto", "flash", "cudnn", "efficient", "math"),
    "residual_dtype": ("auto", "float32"),
    "packing": ("pack", "overflow", "trunc"),
}
# Keys that take true, false or auto: a bool (from a file, or an old saved config) means true or false.
TRISTATE = ("compile",)
# Integer keys that also take `auto`, kept as 0 (payload/batch.py resolves batch_size before the first step).
AUTO_INT = ("batch_size",)


@dataclass
class TrainConfig:
    # --- input / output
    out_dir: str = "out"  # checkpoints, metrics.jsonl, result.json, tokenizer/, config.json
    data: str = ""  # a text file, a directory of text files, or a `datasets` dataset saved to disk
    text_column: str = "text"  # column to read from a `datasets` dataset
    stream: bool = False  # read `data` (jsonl/json/parquet/arrow or text files) as a stream: no token cache
    packing: str = "pack"  # a stream's documents into blocks: pack (end to end), overflow (each its own), trunc
    cache_dir: str = ""  # tokenized corpus cache; default <out_dir>/cache
    tokenizer: str = ""  # local GPT-2 tokenizer dir; empty: train a byte-level BPE on the corpus
    vocab_size: int = 8192  # vocabulary of the trained BPE (ignored with a given tokenizer)
    # --- model
    model: str = "tiny"  # preset (PRESETS: GPT-2; LLAMA_PRESETS) or a directory with a Hugging Face config.json
    init_from: str = ""  # local Hugging Face model directory (overrides `model`): its weights, or its config.json
    block_size: int = 128  # tokens per training sequence
    dropout: float = 0.0
    model_impl: str = "fast"  # fast: compact GPT-2 (SDPA, fused loss), HF state dict format | hf: GPT2LMHeadModel
    grad_checkpoint: bool = False  # activation checkpointing: recompute each block in backward (less memory)
    ce_chunk: int = 4096  # tokens per chunk of the fused output layer + loss (fast model); 0: whole logits
    attn_backend: str = "auto"  # fast model's attention kernel: auto (torch picks), flash, cudnn, efficient, math
    residual_dtype: str = "auto"  # fast model under autocast: auto (the residual stream in bf16), float32
    # --- optimisation
    batch_size: int = 0  # micro-batch per rank; auto (0): the largest that fits the GPU (a probe), 4 on CPUs
    grad_accum: int = 1  # micro-batches per optimizer step
    max_steps: int = 200  # optimizer steps of the whole run (the LR schedule is laid out over these)
    lr: float = 6e-4
    min_lr: float = 6e-5  # floor of the cosine decay
    warmup_steps: int = 20
    weight_decay: float = 0.1  # applied to matrices only, never to norms, biases or embeddings' positions
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # max global grad norm; 0 disables
    dtype: str = "auto"  # auto: bfloat16 where the device supports it, else float32
    compile: str = "auto"  # torch.compile the model: auto (on GPUs, off on CPUs), true, false
    compile_mode: str = "default"  # torch.compile's mode when compiling (max-autotune-*: longer compile)
    seed: int = 1337  # each rank uses seed + rank
    threads: int = 0  # torch intra-op threads per rank; 0 keeps torch's default (torchrun sets OMP_NUM_THREADS)
    # --- distributed engine
    engine: str = "ddp"  # ddp | deepspeed | fsdp (FSDP2: sharded parameters, gradients, optimizer state)
    zero_stage: int = 1  # DeepSpeed ZeRO stage (1, 2, 3)
    offload_optimizer: bool = False  # DeepSpeed: keep optimizer state on the CPU
    ds_config: str = ""  # DeepSpeed JSON config file; empty: generated from the options above
    backend: str = "auto"  # auto: nccl on GPUs, gloo on CPU
    pg_timeout: float = 90.0  # seconds a training collective may wait for a peer before the job fails (< 2 min)
    setup_timeout: float = 1800.0  # the same while ranks wait for tokenizer training / corpus tokenizing
    # --- evaluation, logging, checkpoints
    val_fraction: float = 0.05  # tail of the corpus held out for validation
    eval_interval: int = 100  # steps between validation passes (and one at the start and the end)
    eval_batches: int = 10  # micro-batches per rank in one validation pass
    log_interval: int = 10  # steps between metric lines
    tensorboard: bool = True  # rank 0 also writes the metrics as TensorBoard event files to <out_dir>/tensorboard
    ckpt_interval: int = 0  # steps between checkpoints; 0: only at the end (and on SIGTERM)
    keep_ckpts: int = 2  # the newest checkpoints kept on disk
    ema_decay: float = 0.0  # keep an EMA of the weights (e.g. 0.999), saved and exported beside them (0: off)
    keep_every: int = 0  # also keep every checkpoint whose step is a multiple of this (0: none), e.g. for averaging
    resume: bool = True  # continue from the latest checkpoint in out_dir if there is one
    resume_from: str = ""  # continue from this checkpoint instead: a step of this run or a checkpoint directory
    skip_optimizer: bool = False  # when resuming, load the weights but start with fresh optimizer state
    stop_after: int = 0  # end this launch after N steps with a checkpoint (0: run to max_steps)
    export_hf: bool = True  # write a Hugging Face model directory <out_dir>/hf_model at the end
    eval_data: str = ""  # held-out corpus for validation instead of the tail of `data` (same tokenizer)
    gate_max_val_loss: float = 0.0  # the run passes its gate only if the final val loss is at most this; 0: off
    gate_baseline: str = ""  # a baseline run's result.json: the final val loss may not regress beyond ...
    gate_max_regression: float = 0.02  # ... this fraction above the baseline's (0.02 = 2 % worse)
    peak_tflops: float = 0.0  # per-device peak for MFU; 0: detect from the device

    def validate(self) -> TrainConfig:
        def need(ok: bool, key: str, why: str) -> None:
            if not ok:
                raise ConfigError(f"--{key}={getattr(self, key)!r}: {why}")

        for key, allowed in CHOICES.items():
            need(getattr(self, key) in allowed, key, f"must be one of {', '.join(allowed)}")
        need(bool(self.data), "data", "is required: a text file, a directory, or a dataset saved to disk")
        for key in ("block_size", "grad_accum", "max_steps", "log_interval", "eval_batches"):
            need(getattr(self, key) > 0, key, "must be > 0")
        for key in (
            "warmup_steps",
            "eval_interval",
            "ckpt_interval",
            "stop_after",
            "threads",
            "ce_chunk",
            "keep_every",
            "batch_size",
        ):
            need(getattr(self, key) >= 0, key, "must be >= 0")
        need(self.vocab_size >= 300, "vocab_size", "must be >= 300 (256 bytes + merges + specials)")
        models = ", ".join((*PRESETS, *LLAMA_PRESETS))
        need(
            self.model in PRESETS or self.model in LLAMA_PRESETS or is_model_dir(self.model),
            "model",
            f"must be one of {models}, or a directory with a Hugging Face config.json (a path: ./dir)",
        )
        limit = preset_positions(self.model, self.init_from)
        name = self.init_from or self.model
        why = "GPT-2 has 1024 positions" if limit == GPT2_POSITIONS else f"{name} takes at most {limit} positions"
        need(self.block_size <= limit, "block_size", why)
        need(self.warmup_steps <= self.max_steps, "warmup_steps", "must be <= max_steps")
        need(self.lr > 0, "lr", "must be > 0")
        need(0 <= self.min_lr <= self.lr, "min_lr", "must be between 0 and lr")
        need(0 < self.val_fraction < 1, "val_fraction", "must be between 0 and 1")
        need(0 <= self.dropout < 1, "dropout", "must be in [0, 1)")
        need(0 <= self.beta1 < 1 and 0 <= self.beta2 < 1, "beta1", "betas must be in [0, 1)")
        need(self.weight_decay >= 0 and self.grad_clip >= 0, "weight_decay", "decay and clip must be >= 0")
        need(self.zero_stage in (1, 2, 3), "zero_stage", "must be 1, 2 or 3")
        need(self.pg_timeout > 0 and math.isfinite(self.pg_timeout), "pg_timeout", "must be > 0 seconds")
        need(self.setup_timeout > 0 and math.isfinite(self.setup_timeout), "setup_timeout", "must be > 0 s")
        need(self.keep_ckpts >= 1, "keep_ckpts", "must be >= 1")
        need(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1) (0: off)")
        need(
            not (self.ema_decay and self.engine == "deepspeed" and self.zero_stage == 3),
            "ema_decay",
            "needs whole parameters on each rank: DeepSpeed ZeRO-3 partitions them (use fsdp, or zero_stage 1 or 2)",
        )
        need(self.peak_tflops >= 0, "peak_tflops", "must be >= 0")
        need(self.gate_max_val_loss >= 0, "gate_max_val_loss", "must be >= 0 (0: off)")
        need(self.gate_max_regression >= 0, "gate_max_regression", "must be >= 0")
        if self.engine != "deepspeed":
            need(not self.ds_config and not self.offload_optimizer, "engine", "ds_* options need deepspeed")
        return self


@dataclass
class GenerateConfig:
    out_dir: str = "out"  # a finished or checkpointed training run
    prompt: str = "\n"
    max_new_tokens: int = 100
    temperature: float = 0.8
    top_k: int = 50
    num_samples: int = 1
    seed: int = 1337

    def validate(self) -> GenerateConfig:
        if self.max_new_tokens <= 0 or self.num_samples <= 0:
            raise ConfigError("--max_new_tokens and --num_samples must be > 0")
        if self.temperature <= 0 or self.top_k < 0:
            raise ConfigError("--temperature must be > 0 and --top_k >= 0")
        return self


@dataclass
class ExportConfig:
    out_dir: str = "out"  # a DeepSpeed run: consolidates its latest checkpoint
    export_dir: str = ""  # default <out_dir>/hf_model

    def validate(self) -> ExportConfig:
        return self


@dataclass
class AverageConfig:
    out_dir: str = "out"  # a training run: averages the weights of its last checkpoints
    last: int = 0  # how many of the newest checkpoints (0: every checkpoint on disk)
    steps: str = ""  # or exactly these steps, comma-separated (e.g. 2000,3000,4000)
    export_dir: str = ""  # default <out_dir>/hf_model_avg

    def validate(self) -> AverageConfig:
        if self.last < 0:
            raise ConfigError(f"--last={self.last}: must be >= 0")
        if self.steps and not all(s.strip().isdigit() for s in self.steps.split(",")):
            raise ConfigError(f"--steps={self.steps!r}: comma-separated step numbers")
        if self.steps and self.last:
            raise ConfigError("--last and --steps: one or the other")
        return self


EXPORTS = ("hf_model", "hf_model_ema", "hf_model_avg")  # the Hugging Face directories a run may leave


def _steps_ok(steps: str) -> bool:
    return steps in ("", "latest", "all") or all(s.strip().isdigit() for s in steps.split(","))


@dataclass
class EvalConfig:
    out_dir: str = "out"  # a training run: its checkpoints and exports are evaluated; results in <out_dir>/eval
    steps: str = "latest"  # checkpoints: latest, all (every one on disk), a comma list of steps, or "" (none)
    models: str = ""  # also these exports of the run (hf_model, hf_model_ema, hf_model_avg) or model directories
    corpora: str = "validation"  # perplexity on: the run's own held-out blocks (validation) and/or name=path pairs
    suite: str = "default"  # prompt suite (JSON lines): default (payload/evals/suite.jsonl), a path, or "" (none)
    max_new_tokens: int = 24  # greedy tokens generated for a suite item judged by its keywords
    eval_batches: int = 0  # micro-batches of a named corpus (0: the run's eval_batches x its world size)
    min_suite_score: float = 0.0  # gate: the newest evaluated model must score at least this (0: off)
    results_dir: str = ""  # default <out_dir>/eval

    def validate(self) -> EvalConfig:
        if not _steps_ok(self.steps):
            raise ConfigError(f"--steps={self.steps!r}: latest, all, or comma-separated step numbers")
        if not self.steps and not self.models:
            raise ConfigError("--steps='' and no --models: nothing to evaluate")
        if self.max_new_tokens <= 0 or self.eval_batches < 0:
            raise ConfigError("--max_new_tokens must be > 0 and --eval_batches >= 0")
        if not 0 <= self.min_suite_score <= 1:
            raise ConfigError(f"--min_suite_score={self.min_suite_score}: a fraction of the suite, in [0, 1]")
        for part in filter(None, self.corpora.split(",")):
            name, eq, path = part.partition("=")
            if not (part == "validation" or (eq and name.strip() and path.strip())):
                raise ConfigError(f"--corpora: {part!r} is neither validation nor name=path")
        return self


@dataclass
class BundleConfig:
    out_dir: str = "out"  # a finished training run with a Hugging Face export
    model: str = "hf_model"  # which export: hf_model, hf_model_ema or hf_model_avg
    bundle_dir: str = ""  # default <out_dir>/bundle-<model>

    def validate(self) -> BundleConfig:
        if self.model not in EXPORTS:
            raise ConfigError(f"--model={self.model!r}: one of {', '.join(EXPORTS)}")
        return self


@dataclass
class PrepareConfig:
    data: str = ""  # a text file, a directory of text files, or a `datasets` dataset saved to disk
    text_column: str = "text"  # column to read from a `datasets` dataset
    out_dir: str = ""  # empty directory for the shards, their manifest.json and tokenizer/
    tokenizer: str = ""  # local GPT-2 tokenizer dir; empty: train a byte-level BPE on the corpus
    vocab_size: int = 8192  # vocabulary of the trained BPE (ignored with a given tokenizer)
    shard_tokens: int = 100_000_000  # tokens per shard (uint16 ids: 2 bytes each)

    def validate(self) -> PrepareConfig:
        if not self.data or not self.out_dir:
            raise ConfigError("--data and --out_dir are required")
        if self.shard_tokens < 1024:
            raise ConfigError(f"--shard_tokens={self.shard_tokens}: must be >= 1024")
        if self.vocab_size < 300:
            raise ConfigError(f"--vocab_size={self.vocab_size}: must be >= 300 (256 bytes + merges + specials)")
        return self


@dataclass
class ShardsConfig:
    data: str = ""  # a directory made by `prepare`: every shard is checked against its manifest.json

    def validate(self) -> ShardsConfig:
        if not self.data:
            raise ConfigError("--data is required: a directory made by `prepare`")
        return self


@dataclass
class CheckpointsConfig:
    out_dir: str = "out"  # a training run: lists its checkpoints with step, losses, time and size

    def validate(self) -> CheckpointsConfig:
        return self


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce(cls: type, key: str, value: Any, source: str) -> Any:
    """Turn `value` (a CLI string or a parsed JSON/YAML value) into the type of field `key`.

    Numeric strings are accepted from files too: PyYAML reads `lr: 1e-3` as the string '1e-3'."""
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[key]
    where = f"{source}: {key}={value!r}"
    if key in TRISTATE:
        text = str(value).lower()
        if isinstance(value, bool) or text in _TRUE | _FALSE:
            return "true" if value is True or text in _TRUE else "false"
        if text == "auto":
            return text
        raise ConfigError(f"{where}: expected true, false or auto")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ConfigError(f"{where}: expected true or false")
    if key in AUTO_INT and str(value).lower() == "auto":
        return 0
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(f"{where}: expected an integer")
    if kind == "float":
        number = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is None:
            raise ConfigError(f"{where}: expected a number")
        # inf and nan mean nothing for any key, and a resolved config must print as strict JSON.
        if not math.isfinite(number):
            raise ConfigError(f"{where}: expected a finite number")
        return number
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string")
    return value


def check_key(cls: type, key: str, source: str) -> None:
    names = [f.name for f in dataclasses.fields(cls)]
    if key not in names:
        hint = difflib.get_close_matches(key, names, n=1)
        raise ConfigError(f"{source}: unknown key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))


def _typed(values: dict[str, Any], source: str, cls: type) -> dict[str, Any]:
    """Every key checked and every value coerced to its field's type; no defaults, no validation."""
    out = {}
    for key, value in values.items():
        check_key(cls, key, source)
        out[key] = coerce(cls, key, value, source)
    return out


def load_file(path: str) -> dict[str, Any]:
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        import yaml

        values = yaml.safe_load(text) or {}
    else:
        values = json.loads(text)
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping of key: value")
    return values


def parse_args(argv: list[str], cls: type = TrainConfig):
    """`--config=file` first, then every `--key=value` (a bare `--flag` means true) on top."""
    file_values: dict[str, Any] = {}
    cli: dict[str, str] = {}
    for arg in argv:
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument {arg!r}: options are written --key=value")
        key, eq, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if key == "config":
            try:
                file_values = load_file(value)
            except (OSError, ValueError) as e:
                raise ConfigError(f"--config={value}: {e}") from e
            continue
        cli[key] = value if eq else "true"
    values = {**_typed(file_values, "config file", cls), **_typed(cli, "command line", cls)}
    return cls(**values).validate()


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(cls: type, values: dict[str, Any]) -> Any:
    """Rebuild a config saved by `to_dict` (keys unknown to this version are an error, not ignored)."""
    return cls(**_typed(values, "saved config", cls))


def resolve(values: dict[str, Any], source: str = "config", cls: type = TrainConfig) -> dict[str, Any]:
    """The run config the payload will use for `values`: every key of `cls`, defaults applied, validated.

    The one place a caller outside the payload (the launch role) learns both what is wrong with a config
    and what the payload will actually run with, instead of re-reading defaults one by one."""
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: expected a mapping of key: value, got {type(values).__name__}")
    return to_dict(cls(**_typed(values, source, cls)).validate())


def describe(cls: type = TrainConfig) -> str:
    """One line per key for --help: name, default and the comment from the source."""
    import inspect

    comments = {}
    for line in inspect.getsource(cls).splitlines():
        name, _, rest = line.strip().partition(":")
        if "#" in rest:
            comments[name] = rest.split("#", 1)[1].strip()
    return "\n".join(
        f"  --{f.name}={f.default!r:<12} {comments.get(f.name, '')}".rstrip()
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING
    )


USAGE = """usage: python config.py resolve [--source=NAME] [--command=train|eval] < values.json

Reads a JSON object of run config keys (TrainConfig; EvalConfig with --command=eval) on stdin and prints the
resolved config, every key with the defaults applied, as one JSON object on stdout. Exit 0; exit 2 with
`error: <message>` on stderr for an unknown key, a bad value or input that is not a JSON object. NAME starts the
messages (default: config)."""


RESOLVABLE = {"train": TrainConfig, "eval": EvalConfig}


def usage_error(message: str) -> int:
    """A command line or config the payload cannot take, said the way every payload command says it: one
    `error:` line on stderr, exit 2 (a run that fails later exits with its own code)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE)
        return 0
    if argv[:1] != ["resolve"]:
        return usage_error(f"expected the command resolve\n{USAGE}")
    source, cls = "config", TrainConfig
    for arg in argv[1:]:
        key, _, value = arg.partition("=")
        if key == "--source" and value:
            source = value
        elif key == "--command" and value in RESOLVABLE:
            cls = RESOLVABLE[value]
        else:
            return usage_error(f"unexpected argument {arg!r}\n{USAGE}")
    try:
        values = json.loads(sys.stdin.read())
    except ValueError as e:  # JSONDecodeError, and UnicodeDecodeError for bytes that are no text
        return usage_error(f"{source}: stdin is not valid JSON: {e}")
    try:
        resolved = resolve(values, source, cls)
    except ConfigError as e:
        return usage_error(str(e))
    print(json.dumps(resolved, allow_nan=False))
    return 0


__all__ = [
    "CHOICES",
    "LLAMA_PRESETS",
    "MAX_BLOCK",
    "PRESETS",
    "AverageConfig",
    "BundleConfig",
    "CheckpointsConfig",
    "ConfigError",
    "EvalConfig",
    "ExportConfig",
    "GenerateConfig",
    "PrepareConfig",
    "ShardsConfig",
    "TrainConfig",
    "check_key",
    "coerce",
    "describe",
    "field",
    "from_dict",
    "is_model_dir",
    "parse_args",
    "preset_positions",
    "resolve",
    "to_dict",
    "usage_error",
]


if __name__ == "__main__":
    sys.exit(main())
