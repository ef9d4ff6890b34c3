"""A tiny Llama (the `llama-tiny` preset: grouped-query attention, SwiGLU, untied output layer) on 2 gloo ranks
under each engine: it learns, and the Hugging Face export reloads with AutoModelForCausalLM to the same logits as
the checkpoint it came from. Under FSDP (sharded state dicts of the re-classed transformers module, activation
checkpointing) a stopped run also resumes to the uninterrupted run's losses; DDP's and DeepSpeed's resume does not
depend on the architecture and is tested with GPT-2 (test_payload_ddp.py, test_payload_deepspeed.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from payload_helpers import REPO, TRAIN, base_args, job_env, read_jsonl, run_ok

from payload.commands import load_for_inference

pytestmark = pytest.mark.payload

ENGINES = {
    "ddp": dict(engine="ddp"),
    "deepspeed": dict(engine="deepspeed", zero_stage=2),
    "fsdp": dict(engine="fsdp", grad_checkpoint="true"),  # activation checkpointing per decoder layer too
}
COMMON = dict(model="llama-tiny", max_steps=8, log_interval=4, dropout=0.1)


def losses(run: Path) -> list[tuple[int, float]]:
    records = read_jsonl(run / "metrics.jsonl")
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train" and r["rank"] == 0]


def reload(path: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True).eval()
    assert type(model).__name__ == "LlamaForCausalLM"
    return model


def offline_export(out: Path, target: Path) -> None:
    cmd = [sys.executable, str(TRAIN), "export", f"--out_dir={out}", f"--export_dir={target}"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=job_env(), cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_llama_learns_and_exports(engine, launch, tmp_path, corpus, tokenizer_dir, token_cache):
    if engine == "deepspeed":
        pytest.importorskip("deepspeed")
    opts = {**COMMON, **ENGINES[engine]}
    straight, split = tmp_path / "straight", tmp_path / "split"
    log = run_ok(launch, base_args(straight, corpus, tokenizer_dir, token_cache, export_hf="true", **opts))
    assert "building 'llama-tiny' (LlamaForCausalLM) from config" in log, log[-3000:]
    if engine == "fsdp":  # each decoder layer gathered alone, not the whole model at once
        assert "fsdp: units 2 x LlamaDecoderLayer + the rest" in log, log[-3000:]
    result = json.loads((straight / "result.json").read_text())
    assert result["status"] == "completed" and result["engine"] == engine and result["world_size"] == 2
    assert result["final_val_loss"] < result["initial_val_loss"] - 0.5, result
    assert result["n_params"] == 893_568  # 630,784 matmul weights + the untied embedding + norms

    if engine == "fsdp":
        run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, stop_after=4, **opts))
        second = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, **opts))
        assert "at step 4" in second
        # same data order, RNG (dropout) and optimizer state: the same losses step for step
        assert [s for s, _ in losses(split)] == [s for s, _ in losses(straight)] == [4, 8]
        assert [v for _, v in losses(split)] == pytest.approx([v for _, v in losses(straight)], abs=2e-3)

    hf_dir = straight / "hf_model"
    saved = json.loads((hf_dir / "config.json").read_text())
    assert saved["model_type"] == "llama" and saved["architectures"] == ["LlamaForCausalLM"]
    assert saved["num_key_value_heads"] == 2 and saved["tie_word_embeddings"] is False
    exported = load_for_inference(str(straight))[0].eval()  # what `train.py generate` loads
    assert type(exported).__name__ == "LlamaForCausalLM"
    # the weights the checkpoint holds, as the export and generate commands read them
    if engine == "ddp":
        from payload.config import TrainConfig, from_dict
        from payload.model import build_model

        ckpt = straight / "checkpoints" / "step_0000008"
        cfg = from_dict(TrainConfig, json.loads((ckpt / "trainer.json").read_text())["config"])
        reference = build_model(cfg, exported.config.vocab_size, 0, log=lambda m: None)
        reference.load_state_dict(torch.load(ckpt / "model.pt", map_location="cpu"))
        reference.eval()
    else:  # sharded checkpoint: merged offline by `train.py export`
        offline_export(straight, tmp_path / "offline")
        reference = reload(tmp_path / "offline")
    ids = torch.randint(0, 2048, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(exported(ids).logits, reference(ids).logits, rtol=0, atol=1e-5)
