"""User mistakes end with one clear line, exit code 2 (usage) or 1 (runtime) and a result.json saying why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from payload_helpers import base_args, train_py

from payload import train as T

pytestmark = pytest.mark.payload


def _train(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """One process, no torchrun: the payload makes itself a group of one."""
    return train_py(*args, timeout=timeout)


def _failed(proc: subprocess.CompletedProcess, out: Path, code: int, message: str) -> dict:
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert set(result) == set(T.RESULT_KEYS)
    assert result["status"] == "failed" and result["exit_code"] == code and message in result["error"]
    return result


def test_missing_data(tmp_path, tokenizer_dir):
    out = tmp_path / "run"
    proc = _train(base_args(out, tmp_path / "nope", tokenizer_dir, tmp_path / "cache"))
    _failed(proc, out, 2, "no such file or directory")


def test_empty_data(tmp_path, tokenizer_dir):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "empty.txt").write_text("")
    out = tmp_path / "run"
    proc = _train(base_args(out, tmp_path / "corpus", tokenizer_dir, tmp_path / "cache"))
    _failed(proc, out, 2, "use more data")


def test_unreadable_tokenizer(tmp_path, corpus):
    bad = tmp_path / "tok"
    bad.mkdir()
    (bad / "tokenizer.json").write_text('{"version": "1.0", "model": 42}')
    out = tmp_path / "run"
    proc = _train(base_args(out, corpus, bad, tmp_path / "cache"))
    _failed(proc, out, 2, "unreadable tokenizer")


def test_model_dir_whose_vocabulary_is_too_small(tmp_path, corpus, tokenizer_dir, token_cache):
    """`--model=DIR` keeps its config.json's vocabulary: one that cannot hold the tokenizer's is a usage error."""
    from transformers import LlamaConfig

    shape = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)
    LlamaConfig(vocab_size=256, **shape).save_pretrained(tmp_path / "model")
    out = tmp_path / "run"
    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, model=tmp_path / "model"))
    _failed(proc, out, 2, "vocab_size 256 < the tokenizer's 2048 tokens")


def test_corrupt_checkpoint_is_named_then_an_older_one_resumes(tmp_path, corpus, tokenizer_dir, token_cache):
    out = tmp_path / "run"
    opts = dict(max_steps=12, ckpt_interval=4)
    first = _train(base_args(out, corpus, tokenizer_dir, token_cache, stop_after=8, **opts))
    assert first.returncode == 0, first.stderr[-3000:]
    ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    assert ckpt.name == "step_0000008"
    model = ckpt / "model.pt"
    model.write_bytes(model.read_bytes()[:1000])
    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, **opts))
    result = _failed(proc, out, 1, "cannot resume from this checkpoint")
    assert str(ckpt) in result["error"] and "--resume_from" in result["error"]

    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=99, **opts))
    _failed(proc, out, 2, "is not a checkpoint")

    older = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=4, skip_optimizer="true", **opts))
    assert older.returncode == 0, older.stderr[-3000:]
    assert "step_0000004 at step 4" in older.stdout and "fresh optimizer state" in older.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["start_step"] == 4 and result["final_step"] == 12


def test_full_disk_while_saving(tmp_path, corpus, tokenizer_dir, token_cache):
    """A 1 MiB tmpfs under checkpoints/ fills on the first save (the tiny model's checkpoint is ~9 MiB)."""
    out = tmp_path / "run"
    disk = out / "checkpoints"
    disk.mkdir(parents=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if mount.returncode:
        pytest.skip(f"skip: cannot mount a small tmpfs here: {mount.stderr.decode().strip()}")
    try:
        proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, max_steps=4))
        result = _failed(proc, out, 1, "the disk is full")
        assert "step_0000004" in result["error"]
        assert not list(disk.glob("step_*")) and not (disk / "latest").exists()  # no half checkpoint left
    finally:
        subprocess.run(["umount", str(disk)], check=False)
