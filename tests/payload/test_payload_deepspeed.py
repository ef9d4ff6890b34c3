"""DeepSpeed ZeRO on CPU (DS_ACCELERATOR=cpu, gloo): learning, its own checkpoint format, resume, export."""

from __future__ import annotations

import json

import pytest
from payload_helpers import base_args, run_ok, train_py

pytestmark = pytest.mark.payload

pytest.importorskip("deepspeed")


def test_deepspeed_zero2_learns_resumes_and_exports(launch, tmp_path, corpus, tokenizer_dir, token_cache):
    out = tmp_path / "run"
    args = dict(engine="deepspeed", zero_stage=2, max_steps=10, log_interval=5, ema_decay=0.9)
    first = run_ok(launch, base_args(out, corpus, tokenizer_dir, token_cache, stop_after=5, **args))
    # the ~30 s shared-memory op build is skipped, and no optimizer op is JIT-compiled
    assert "Building extension" not in first and "shm" not in first.lower(), first[-3000:]
    stopped = json.loads((out / "result.json").read_text())
    assert stopped["status"] == "stopped" and stopped["final_step"] == 5 and stopped["zero_stage"] == 2
    ckpt = out / "checkpoints" / "step_0000005"
    names = {p.name for p in ckpt.iterdir()}
    # DeepSpeed's own format: one ZeRO optimizer partition per rank
    assert {
        "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
        "rng_rank0.pt",
        "rng_rank1.pt",
        "ema.pt",  # the EMA of the weights: ZeRO-2 keeps whole parameters on each rank, the writer saves it
    } <= names, names

    second = run_ok(launch, base_args(out, corpus, tokenizer_dir, token_cache, export_hf="true", **args))
    assert "at step 5" in second
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["start_step"] == 5 and result["final_step"] == 10
    assert result["engine"] == "deepspeed" and result["world_size"] == 2
    assert result["initial_val_loss"] == pytest.approx(stopped["final_val_loss"], abs=1e-6)
    assert result["final_val_loss"] < stopped["initial_val_loss"] - 1.0, (stopped, result)

    # offline consolidation of the ZeRO partitions gives the same weights as the in-run export
    exported = tmp_path / "exported"
    proc = train_py("export", f"--out_dir={out}", f"--export_dir={exported}", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import torch
    from transformers import GPT2LMHeadModel

    a = GPT2LMHeadModel.from_pretrained(str(out / "hf_model"), local_files_only=True).state_dict()
    b = GPT2LMHeadModel.from_pretrained(str(exported), local_files_only=True).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k]) for k in a)
    assert (exported / "tokenizer.json").exists()
    ema = GPT2LMHeadModel.from_pretrained(str(out / "hf_model_ema"), local_files_only=True).state_dict()
    assert ema.keys() == a.keys() and max((ema[k] - a[k]).abs().max().item() for k in a) > 1e-3
