"""FSDP2 (fully_shard) on 2 gloo ranks on CPU: learning, sharded checkpoints, exact resume, offline export."""

from __future__ import annotations

import json

import pytest
from payload_helpers import base_args, read_jsonl, run_ok, train_py

pytestmark = pytest.mark.payload

COMMON = dict(engine="fsdp", max_steps=12, log_interval=4, dropout=0.1, ema_decay=0.9)


def test_fsdp_learns_resumes_exactly_and_exports(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    straight, split = tmp_path / "straight", tmp_path / "split"
    log = run_ok(launch, base_args(straight, corpus, tokenizer_dir, token_cache, export_hf="true", **COMMON))
    assert "fsdp: units 2 x Block + the rest" in log, log[-3000:]
    result = json.loads((straight / "result.json").read_text())
    assert result["status"] == "completed" and result["engine"] == "fsdp" and result["world_size"] == 2
    assert result["final_val_loss"] < result["initial_val_loss"] - 0.5, result
    ckpt = straight / "checkpoints" / "step_0000012"
    shards = {p.name for p in (ckpt / "dcp").iterdir()}
    assert ".metadata" in shards and len([s for s in shards if s.endswith(".distcp")]) == 2  # one per rank
    assert not (ckpt / "model.pt").exists()  # no rank wrote the whole model

    first = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, stop_after=8, **COMMON))
    assert "step      8/12" in first
    second = run_ok(launch, base_args(split, corpus, tokenizer_dir, token_cache, export_hf="true", **COMMON))
    assert "at step 8" in second
    resumed = json.loads((split / "result.json").read_text())
    assert resumed["status"] == "completed" and resumed["start_step"] == 8

    def losses(run):
        records = read_jsonl(run / "metrics.jsonl")
        return [(r["step"], r["loss"]) for r in records if r["kind"] == "train" and r["rank"] == 0]

    # same data order, RNG and (sharded) optimizer state: the same losses step for step
    assert [s for s, _ in losses(split)] == [s for s, _ in losses(straight)] == [4, 8, 12]
    assert [v for _, v in losses(split)] == pytest.approx([v for _, v in losses(straight)], abs=2e-3)
    assert resumed["final_val_loss"] == pytest.approx(result["final_val_loss"], abs=2e-3)

    # offline export of the sharded checkpoint gives the same model as the end-of-run export
    from transformers import GPT2LMHeadModel

    exported = tmp_path / "exported"
    done = train_py("export", f"--out_dir={straight}", f"--export_dir={exported}")
    assert done.returncode == 0, done.stderr[-3000:]
    a = GPT2LMHeadModel.from_pretrained(str(exported), local_files_only=True).state_dict()
    b = GPT2LMHeadModel.from_pretrained(str(straight / "hf_model"), local_files_only=True).state_dict()
    assert a.keys() == b.keys() and all((a[k] - b[k]).abs().max() < 1e-6 for k in a)

    # The EMA of the weights, sharded like them, went through the sharded checkpoint: the resumed run's equals the
    # uninterrupted one's, and it is not the final weights.
    ema, ema_split = (
        GPT2LMHeadModel.from_pretrained(str(r / "hf_model_ema"), local_files_only=True).state_dict()
        for r in (straight, split)
    )
    assert ema.keys() == ema_split.keys() == b.keys()
    assert max((ema[k] - ema_split[k]).abs().max().item() for k in ema) < 1e-4
    assert max((ema[k] - b[k]).abs().max().item() for k in ema) > 1e-3

    # checkpoint averaging reads FSDP's sharded checkpoints (steps 8 and 12 of the split run): their mean
    for name, steps in (("avg", "8,12"), ("at8", "8"), ("at12", "12")):
        done = train_py("average", f"--out_dir={split}", f"--steps={steps}", f"--export_dir={tmp_path / name}")
        assert done.returncode == 0, done.stderr[-3000:]
    avg, at8, at12 = (
        GPT2LMHeadModel.from_pretrained(str(tmp_path / n), local_files_only=True).state_dict()
        for n in ("avg", "at8", "at12")
    )
    end = GPT2LMHeadModel.from_pretrained(str(split / "hf_model"), local_files_only=True).state_dict()
    assert all((at12[k] - end[k]).abs().max() < 1e-6 for k in end)  # one checkpoint averaged is that checkpoint
    assert all(((avg[k] - (at8[k] + at12[k]) / 2).abs().max() < 1e-6) for k in avg)
    assert any(((at8[k] - at12[k]).abs().max() > 1e-4) for k in avg)  # two different models were averaged
