"""2-process gloo DDP runs under torchrun on loopback: learning, exact resume, generation."""

from __future__ import annotations

import json

import pytest
from payload_helpers import base_args, read_jsonl, run_ok, train_py

pytestmark = pytest.mark.payload


# dropout makes the resume test depend on the RNG state being restored too
# ema_decay: an EMA of the weights rides along (checked at the resume: saved, loaded, exported).
COMMON = dict(max_steps=16, log_interval=4, dropout=0.1, ema_decay=0.9)


@pytest.fixture(scope="module")
def straight_run(launch_module, tmp_path_factory, corpus, tokenizer_dir, token_cache):
    """One uninterrupted 2-rank run: (out_dir, torchrun output)."""
    out = tmp_path_factory.mktemp("ddp") / "straight"
    log = run_ok(launch_module, base_args(out, corpus, tokenizer_dir, token_cache, export_hf="true", **COMMON))
    return out, log


def test_ddp_two_ranks_learn_and_write_metrics(straight_run):
    out, log = straight_run

    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 16
    assert result["engine"] == "ddp" and result["world_size"] == 2 and result["backend"] == "gloo"
    # validation loss falls clearly below its start (random init: ln(2048) ~ 7.6)
    assert result["final_val_loss"] < result["initial_val_loss"] - 1.0, result
    assert result["tokens_seen"] == 16 * 8 * 64 * 2 * 2
    assert result["tokens_per_s"] > 0 and result["versions"]["torch"].startswith("2.")

    records = read_jsonl(out / "metrics.jsonl")
    train = [r for r in records if r["kind"] == "train"]
    assert {r["rank"] for r in train} == {0, 1}  # every rank writes metrics
    assert [r["step"] for r in train if r["rank"] == 0] == [4, 8, 12, 16]
    first = train[0]
    for key in ("loss", "loss_global", "lr", "step_ms", "tokens_per_s", "tokens_per_s_per_rank", "mfu"):
        assert isinstance(first[key], float), key
    assert first["comm_share"] is not None  # grad_accum=2: sync vs no_sync micro-batch is measurable
    # Each rank's own forward time (the report's straggler rule) and the first step of the start (its goodput).
    assert all(isinstance(r["fwd_ms"], float) and 0 < r["fwd_ms"] < r["step_ms"] for r in train), train
    assert sorted((r["rank"], r["step"]) for r in records if r["kind"] == "first_step") == [(0, 1), (1, 1)]
    assert "step     16/16 (100%) eta 0:00 | loss" in log and "tok/s" in log and "mfu" in log
    assert "step      8/16 ( 50%) eta " in log and first["eta_s"] > 0  # from the measured step time

    config = json.loads((out / "config.json").read_text())
    assert config["engine"] == "ddp" and config["block_size"] == 64
    assert (out / "checkpoints" / "latest").read_text().strip() == "step_0000016"
    ckpt = out / "checkpoints" / "step_0000016"
    assert {"model.pt", "optimizer.pt", "trainer.json", "rng_rank0.pt", "rng_rank1.pt"} <= {
        p.name for p in ckpt.iterdir()
    }
    assert (ckpt / "tokenizer" / "tokenizer.json").exists()

    # the Hugging Face export and the generate command work from the run directory
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(out / "hf_model"), local_files_only=True)
    assert AutoTokenizer.from_pretrained(str(out / "hf_model"), local_files_only=True).eos_token_id is not None
    assert model.config.n_layer == 2
    gen = train_py("generate", f"--out_dir={out}", "--prompt=KING:", "--max_new_tokens=12", timeout=120)
    assert gen.returncode == 0, gen.stderr[-3000:]
    assert "--- sample 0\nKING:" in gen.stdout


def test_ddp_resume_continues_exactly(straight_run, launch, tmp_path, corpus, tokenizer_dir, token_cache):
    """Stop after 8 of 16 steps, resume, finish: the same losses as the uninterrupted run."""
    straight, split = straight_run[0], tmp_path / "split"
    first = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, stop_after=8, **COMMON))
    stopped = json.loads((split / "result.json").read_text())
    assert stopped["status"] == "stopped" and stopped["final_step"] == 8
    assert "step      8/16" in first

    second = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, export_hf="true", **COMMON))
    assert "resume:" in second and "at step 8" in second
    resumed = json.loads((split / "result.json").read_text())
    assert resumed["status"] == "completed" and resumed["start_step"] == 8 and resumed["final_step"] == 16
    assert resumed["tokens_seen"] == 16 * 8 * 64 * 2 * 2
    # the first evaluation after the resume sees exactly the model that was saved
    assert resumed["initial_val_loss"] == pytest.approx(stopped["final_val_loss"], abs=1e-6)

    def losses(run):
        return [
            (r["step"], r["loss"]) for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train" and r["rank"] == 0
        ]

    # same data order, same RNG, same optimizer state -> the same training losses step for step
    assert [s for s, _ in losses(split)] == [s for s, _ in losses(straight)] == [4, 8, 12, 16]
    assert [v for _, v in losses(split)] == pytest.approx([v for _, v in losses(straight)], abs=2e-3)
    assert resumed["final_val_loss"] == pytest.approx(
        json.loads((straight / "result.json").read_text())["final_val_loss"], abs=2e-3
    )
    # The EMA of the weights went through the checkpoint: the resumed run's equals the uninterrupted one's (one
    # started again from the step-8 weights would not), and it is not the final weights.
    assert "export: the weights' EMA (decay 0.9)" in second
    ema, ema_split, final = (
        hf_state(run / name)
        for run, name in ((straight, "hf_model_ema"), (split, "hf_model_ema"), (straight, "hf_model"))
    )
    assert ema.keys() == ema_split.keys() == final.keys()
    assert max((ema[k] - ema_split[k]).abs().max().item() for k in ema) < 1e-4
    assert max((ema[k] - final[k]).abs().max().item() for k in ema) > 1e-3


def hf_state(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True).state_dict()


def test_ddp_resume_on_fewer_ranks_goes_on_from_the_checkpoint(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    """A job that lost a node continues on the survivors (torchrun's elastic restart): 2 ranks stop at step 8,
    one rank resumes from their checkpoint and finishes, keeping its per-rank batch (batch_size=auto too: the
    checkpoint's 8, not the 4 auto gives a CPU)."""
    out = tmp_path / "elastic"
    run_ok(launch, base_args(out, corpus, tokenizer_dir, token_cache, stop_after=8, **COMMON))
    stopped = json.loads((out / "result.json").read_text())
    log = run_ok(launch, base_args(out, corpus, tokenizer_dir, token_cache, **COMMON, batch_size="auto"), nproc=1)
    assert "batch_size auto: 8, the batch of the run this launch resumes" in log, log[-3000:]
    assert "resume: world size 2 -> 1: per-rank batch kept, tokens per step 2,048 -> 1,024" in log, log[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["world_size"] == 1
    assert result["start_step"] == 8 and result["final_step"] == 16
    assert result["tokens_seen"] == 8 * 8 * 64 * 2 * 2 + 8 * 8 * 64 * 2 * 1
    # the one rank starts from the weights the two saved (its validation batches are both ranks' halves)
    assert result["initial_val_loss"] < stopped["initial_val_loss"] - 1.0, (stopped, result)
    assert result["final_val_loss"] < result["initial_val_loss"]
    resume = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "resume"]
    assert resume[-1] | {"checkpoint": None} == {
        "kind": "resume", "step": 8, "checkpoint": None, "world_size_before": 2, "world_size": 1,
        "rank": 0, "time": resume[-1]["time"],
    }  # fmt: skip
    # `train.py eval` validates each checkpoint with the ranks that saved it: two at step 8, one at step 16, each
    # the loss that run logged (not the result's world size for both).
    from payload import evaluate as E
    from payload.config import EvalConfig

    assert E.evaluate(EvalConfig(out_dir=str(out), steps="all", suite="").validate()) == 0
    for step, loss in ((8, stopped["final_val_loss"]), (16, result["final_val_loss"])):
        measured = json.loads((out / "eval" / f"step_{step:07d}.json").read_text())["corpora"]["validation"]
        assert measured["loss"] == pytest.approx(loss, abs=2e-4), (step, measured)
