"""2-process gloo DDP runs under torchrun on loopback: learning, exact resume, generation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from payload_helpers import REPO, TRAIN, base_args, job_env, read_jsonl, run_ok

pytestmark = pytest.mark.payload


def test_ddp_two_ranks_learn_and_write_metrics(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    out = tmp_path / "run"
    log = run_ok(launch, base_args(out, corpus, tokenizer_dir, token_cache, max_steps=20, export_hf="true"))

    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 20
    assert result["engine"] == "ddp" and result["world_size"] == 2 and result["backend"] == "gloo"
    # validation loss falls clearly below its start (random init: ln(2048) ~ 7.6)
    assert result["final_val_loss"] < result["initial_val_loss"] - 1.0, result
    assert result["tokens_seen"] == 20 * 8 * 64 * 2 * 2
    assert result["tokens_per_s"] > 0 and result["versions"]["torch"].startswith("2.")

    records = read_jsonl(out / "metrics.jsonl")
    train = [r for r in records if r["kind"] == "train"]
    assert {r["rank"] for r in train} == {0, 1}  # every rank writes metrics
    assert [r["step"] for r in train if r["rank"] == 0] == [5, 10, 15, 20]
    first = train[0]
    for key in ("loss", "loss_global", "lr", "step_ms", "tokens_per_s", "tokens_per_s_per_rank", "mfu"):
        assert isinstance(first[key], float), key
    assert first["comm_share"] is not None  # grad_accum=2: sync vs no_sync micro-batch is measurable
    assert "step     20/20 | loss" in log and "tok/s" in log and "mfu" in log

    config = json.loads((out / "config.json").read_text())
    assert config["engine"] == "ddp" and config["block_size"] == 64
    assert (out / "checkpoints" / "latest").read_text().strip() == "step_0000020"
    ckpt = out / "checkpoints" / "step_0000020"
    assert {"model.pt", "optimizer.pt", "trainer.json", "rng_rank0.pt", "rng_rank1.pt"} <= {
        p.name for p in ckpt.iterdir()
    }
    assert (ckpt / "tokenizer" / "tokenizer.json").exists()

    # the Hugging Face export and the generate command work from the run directory
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(out / "hf_model"), local_files_only=True)
    assert AutoTokenizer.from_pretrained(str(out / "hf_model"), local_files_only=True).eos_token_id is not None
    assert model.config.n_layer == 2
    gen = subprocess.run(
        [sys.executable, str(TRAIN), "generate", f"--out_dir={out}", "--prompt=KING:", "--max_new_tokens=12"],
        capture_output=True, text=True, env=job_env(), cwd=REPO, timeout=120,
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    assert "--- sample 0\nKING:" in gen.stdout


def test_ddp_resume_continues_exactly(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    """Stop after 6 of 12 steps, resume, finish: same losses as one uninterrupted run."""
    common = dict(max_steps=12, log_interval=3, dropout=0.1)  # dropout: the RNG state must resume too
    straight, split = tmp_path / "straight", tmp_path / "split"
    run_ok(launch, base_args(straight, corpus, tokenizer_dir, token_cache, **common))
    first = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, stop_after=6, **common))
    stopped = json.loads((split / "result.json").read_text())
    assert stopped["status"] == "stopped" and stopped["final_step"] == 6
    assert "step      6/12" in first

    second = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, **common))
    assert "resume:" in second and "at step 6" in second
    resumed = json.loads((split / "result.json").read_text())
    assert resumed["status"] == "completed" and resumed["start_step"] == 6 and resumed["final_step"] == 12
    assert resumed["tokens_seen"] == 12 * 8 * 64 * 2 * 2
    # the first evaluation after the resume sees exactly the model that was saved
    assert resumed["initial_val_loss"] == pytest.approx(stopped["final_val_loss"], abs=1e-6)

    def losses(run):
        return [(r["step"], r["loss"]) for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train"
                and r["rank"] == 0]

    # same data order, same RNG, same optimizer state -> the same training losses step for step
    assert [s for s, _ in losses(split)] == [s for s, _ in losses(straight)] == [3, 6, 9, 12]
    assert [v for _, v in losses(split)] == pytest.approx([v for _, v in losses(straight)], abs=2e-3)
    assert resumed["final_val_loss"] == pytest.approx(json.loads((straight / "result.json").read_text())[
        "final_val_loss"], abs=2e-3)
