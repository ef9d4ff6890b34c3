"""The commands of `train.py` besides training: generate, export, prepare, verify, checkpoints, average, bundle
(eval is payload/evaluate.py).

They read what a run or `prepare` left on disk, in one process, without a process group; `train.py` parses
their options and calls them (see COMMANDS there).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from payload import ckpt_verify as V
from payload import data as D
from payload import shards as S
from payload.config import (
    AverageConfig,
    BundleConfig,
    CheckpointsConfig,
    ExportConfig,
    GenerateConfig,
    PrepareConfig,
    ShardsConfig,
    TrainConfig,
    from_dict,
)
from payload.model import as_hf, build_model, saved_architecture


def _latest_checkpoint(out: Path) -> Path:
    latest = out / "checkpoints" / "latest"
    if not latest.exists():
        raise FileNotFoundError(f"{out}: no checkpoints/latest")
    return out / "checkpoints" / latest.read_text().strip()


def load_for_inference(out_dir: str):
    """(model, tokenizer) from a run: its Hugging Face export, else its latest DDP checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    if (out / "hf_model" / "config.json").exists():
        model = AutoModelForCausalLM.from_pretrained(str(out / "hf_model"), local_files_only=True)
        return model, AutoTokenizer.from_pretrained(str(out / "hf_model"), local_files_only=True)
    ckpt = _latest_checkpoint(out)
    tok = AutoTokenizer.from_pretrained(str(ckpt / "tokenizer"), local_files_only=True)
    if not (ckpt / "model.pt").exists():
        raise FileNotFoundError(
            f"{ckpt} is a sharded (DeepSpeed or FSDP) checkpoint: generate reads the run's hf_model export"
        )
    cfg = saved_architecture(from_dict(TrainConfig, json.loads((ckpt / "trainer.json").read_text())["config"]))
    model = build_model(cfg, len(tok), tok.convert_tokens_to_ids(D.EOS), log=lambda m: None)
    model.load_state_dict(torch.load(ckpt / "model.pt", map_location="cpu"))
    return as_hf(model), tok


def generate(cfg: GenerateConfig) -> int:
    model, tok = load_for_inference(cfg.out_dir)
    model.eval()
    torch.manual_seed(cfg.seed)
    ids = tok(cfg.prompt, return_tensors="pt").input_ids
    if ids.numel() == 0:
        ids = torch.tensor([[tok.convert_tokens_to_ids(D.EOS)]])
    with torch.no_grad():
        out = model.generate(
            ids,
            do_sample=True,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_k=cfg.top_k or None,
            num_return_sequences=cfg.num_samples,
            pad_token_id=tok.convert_tokens_to_ids(D.EOS),
        )
    for i, seq in enumerate(out):
        print(f"--- sample {i}\n{tok.decode(seq, skip_special_tokens=True)}")
    return 0


def export(cfg: ExportConfig) -> int:
    """Consolidate the latest DeepSpeed or FSDP checkpoint (all shards on this disk) into a HF directory."""
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from transformers import AutoTokenizer

    from payload.engines import export_deepspeed_checkpoint, export_fsdp_checkpoint

    out = Path(cfg.out_dir)
    ckpt = _latest_checkpoint(out)
    tcfg = saved_architecture(from_dict(TrainConfig, json.loads((ckpt / "trainer.json").read_text())["config"]))
    tok = AutoTokenizer.from_pretrained(str(ckpt / "tokenizer"), local_files_only=True)
    model = build_model(tcfg, len(tok), tok.convert_tokens_to_ids(D.EOS), log=lambda m: None)
    target = Path(cfg.export_dir) if cfg.export_dir else out / "hf_model"
    (export_fsdp_checkpoint if (ckpt / "dcp").is_dir() else export_deepspeed_checkpoint)(ckpt, model, target)
    tok.save_pretrained(str(target))
    print(f"exported {ckpt} -> {target}")
    return 0


def prepare(cfg: PrepareConfig) -> int:
    """Tokenize a corpus once into verified shards (see payload/shards.py)."""
    try:
        D.corpus_files(cfg.data) if not D.is_hf_dataset(cfg.data) else None
        t0 = time.time()
        tok = D.load_tokenizer(cfg.tokenizer) if cfg.tokenizer else None
        if tok is None:
            tok = D.train_tokenizer(D.iter_documents(cfg.data, cfg.text_column), cfg.vocab_size)
            print(f"tokenizer: trained a byte-level BPE of {len(tok)} tokens on {cfg.data}")
        m = S.prepare(D.iter_documents(cfg.data, cfg.text_column), tok, cfg.out_dir, cfg.shard_tokens, cfg.data)
    except (S.ShardError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"prepared {m['tokens']:,} tokens of {m['documents']:,} documents in {len(m['shards'])} shards "
        f"({m['dtype']}, vocabulary {m['vocab']}) -> {Path(cfg.out_dir) / S.MANIFEST} in {time.time() - t0:.1f} s"
    )
    return 0


def verify_shards(cfg: ShardsConfig) -> int:
    """Check every shard of a prepared directory against its manifest (size and SHA-256)."""
    try:
        m = S.read_manifest(cfg.data)
        S.verify(cfg.data, m)
    except S.ShardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{cfg.data}: {len(m['shards'])} shards, {m['tokens']:,} tokens, all match {S.MANIFEST}")
    return 0


def checkpoints(cfg: CheckpointsConfig) -> int:
    """One line per checkpoint of a run: step, losses, when it was saved, size on disk; `*` marks latest.
    Checkpoints a resume quarantined (ckpt_verify.py) follow, one line each."""
    root = Path(cfg.out_dir) / "checkpoints"
    latest = (root / "latest").read_text().strip() if (root / "latest").exists() else ""
    rows = []
    for ckpt in V.finished(root):
        try:
            meta = json.loads((ckpt / "trainer.json").read_text())
        except (OSError, ValueError) as e:
            rows.append(f"  {ckpt.name}  unreadable: {e}")
            continue
        size = sum(f.stat().st_size for f in ckpt.rglob("*") if f.is_file())
        when = meta.get("saved_at")
        rows.append(
            f"{'*' if ckpt.name == latest else ' '} {meta['step']:>8}  "
            + "  ".join(
                f"{meta[k]:>10.4f}" if isinstance(meta.get(k), float) else f"{'-':>10}"
                for k in ("train_loss", "val_loss")
            )
            + f"  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when)) if when else '-':<19}"
            + f"  {size / 2**20:>9.1f}  {meta.get('engine', '?'):<9} {ckpt}"
        )
    if not rows:
        print(f"error: {root}: no checkpoints", file=sys.stderr)
        return 1
    print(f"  {'step':>8}  {'train loss':>10}  {'val loss':>10}  {'saved':<19}  {'size MiB':>9}  {'engine':<9} path")
    print("\n".join(rows))
    for q in sorted(p for p in root.glob(f"{V.QUARANTINE}*") if p.is_dir()):
        print(f"  quarantined (failed verification at a resume): {q}")
    return 0


def average(cfg: AverageConfig) -> int:
    """The mean of the weights of a run's last checkpoints (or of the steps named), written as a Hugging Face
    directory: checkpoint averaging, as Llama 3 made its final pre-trained model from the checkpoints of its
    annealing phase (Polyak averaging). Each checkpoint is verified against its checksums first and must be of the
    same model; any engine's checkpoint (all shards on this disk); the sum is kept in float64."""
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from transformers import AutoTokenizer

    from payload.engines import checkpoint_state_dict, save_hf

    out = Path(cfg.out_dir)
    root = out / "checkpoints"
    done = V.finished(root)
    if cfg.steps:
        by_step = {V.step_of(p.name): p for p in done}
        wanted = [int(s) for s in cfg.steps.split(",")]
        missing = [s for s in wanted if s not in by_step]
        if missing:
            print(f"error: {root}: no checkpoint of step(s) {', '.join(map(str, missing))}", file=sys.stderr)
            return 1
        chosen = [by_step[s] for s in wanted]
    else:
        chosen = done[-cfg.last :] if cfg.last else done
        if cfg.last > len(done):
            print(f"error: {root}: --last={cfg.last} but {len(done)} checkpoint(s) on disk", file=sys.stderr)
            return 1
    if not chosen:
        print(f"error: {root}: no checkpoints", file=sys.stderr)
        return 1
    model_keys = ("model", "model_impl", "init_from", "vocab_size", "block_size")
    first = None
    total: dict[str, torch.Tensor] = {}
    for ckpt in chosen:
        bad = V.verify(ckpt)
        if bad:
            print(f"error: {ckpt}: {bad}", file=sys.stderr)
            return 1
        config = json.loads((ckpt / "trainer.json").read_text())["config"]
        shape = {k: config.get(k) for k in model_keys}
        if first is None:
            first = (ckpt, config, shape)
        elif shape != first[2]:
            print(f"error: {ckpt} is another model than {first[0]}: {shape} != {first[2]}", file=sys.stderr)
            return 1
        state = checkpoint_state_dict(ckpt)
        if total and set(state) != set(total):
            print(f"error: {ckpt}: other weights than {first[0]}", file=sys.stderr)
            return 1
        for key, value in state.items():
            total[key] = total.get(key, 0) + value.detach().to(torch.float64)
    ckpt, config, _ = first
    tcfg = saved_architecture(from_dict(TrainConfig, config))
    tok = AutoTokenizer.from_pretrained(str(ckpt / "tokenizer"), local_files_only=True)
    model = build_model(tcfg, len(tok), tok.convert_tokens_to_ids(D.EOS), log=lambda m: None)
    dtypes = {k: v.dtype for k, v in model.state_dict().items()}
    mean = {k: (v / len(chosen)).to(dtypes.get(k, torch.float32)) for k, v in total.items()}
    missing, unexpected = model.load_state_dict(mean, strict=False)
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", True)
    if unexpected or [k for k in missing if not (tied and k.endswith("lm_head.weight"))]:
        print(f"error: the checkpoints do not match the model: missing {missing}, unexpected {unexpected}",
              file=sys.stderr)  # fmt: skip
        return 1
    target = Path(cfg.export_dir) if cfg.export_dir else out / "hf_model_avg"
    save_hf(model, str(target))
    tok.save_pretrained(str(target))
    steps = ", ".join(str(V.step_of(p.name)) for p in chosen)
    record = {"steps": [V.step_of(p.name) for p in chosen], "checkpoints": [str(p) for p in chosen]}
    (target / "averaged_from.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"averaged {len(chosen)} checkpoint(s) of steps {steps} -> {target}")
    return 0


# A pretrained model has no chat template, and `transformers serve` answers /v1/chat/completions only with one: the
# bundle adds this plain transcript (role: text lines, then "assistant:"), which a base model can continue. A
# tokenizer that has its own keeps it.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def bundle(cfg: BundleConfig) -> int:
    """One directory that `transformers` and `transformers serve` load as it is: the run's export with its
    tokenizer, the training config and result, the eval results if any, and manifest.json with every file's
    SHA-256 (ckpt_verify.verify_bundle checks them before serving). Built beside the target and renamed into place."""
    out = Path(cfg.out_dir)
    src = out / cfg.model
    if not (src / "config.json").is_file():
        print(f"error: {src}: no Hugging Face export in this run (train with export_hf=true, or "
              f"`train.py export` / `average` first)", file=sys.stderr)  # fmt: skip
        return 2
    target = Path(cfg.bundle_dir) if cfg.bundle_dir else out / f"bundle-{cfg.model}"
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    shutil.copytree(src, part)
    for name, dest in (("config.json", "training_config.json"), ("result.json", "result.json")):
        if (out / name).is_file():
            shutil.copy2(out / name, part / dest)
    if (out / "eval" / "summary.json").is_file():
        (part / "eval").mkdir()
        for name in ("summary.json", "gate.json", "table.md"):
            if (out / "eval" / name).is_file():
                shutil.copy2(out / "eval" / name, part / "eval" / name)
    tok_config = json.loads((part / "tokenizer_config.json").read_text())
    template = "chat_template" not in tok_config and not (part / "chat_template.jinja").exists()
    if template:
        (part / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
    files = sorted(p for p in part.rglob("*") if p.is_file())
    manifest = {
        "model": cfg.model,
        "run": str(out.resolve()),
        "step": result.get("final_step"),
        "final_val_loss": result.get("final_val_loss"),
        "chat_template": "added by the bundle" if template else "the tokenizer's own",
        "files": {str(p.relative_to(part)): {"bytes": p.stat().st_size, "sha256": V.sha256(p)} for p in files},
    }
    (part / V.BUNDLE_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    old = target.with_name(target.name + ".old")
    if target.exists():
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    part.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    print(f"bundle: {src} -> {target} ({len(files)} files, step {manifest['step']})")
    return 0
