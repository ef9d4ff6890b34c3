"""User mistakes end with one clear line, exit code 2 (usage) or 1 (runtime) and a result.json saying why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from payload_helpers import base_args, read_jsonl, train_py

from payload import ckpt_verify as V
from payload import metrics as M

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
    assert set(result) == set(M.RESULT_KEYS)
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


def test_corrupt_latest_checkpoint_is_quarantined_and_the_one_before_resumes(
    tmp_path, corpus, tokenizer_dir, token_cache
):
    """A truncated latest checkpoint: chosen by hand it is refused and left alone; a plain resume renames it
    quarantine-step_... (kept for a post-mortem), goes back to the one before and finishes; a save cut short
    (step_<n>.tmp) is removed at the start; a checkpoint without checksums (an older payload's) is not judged,
    so its damage shows only when it loads."""
    out = tmp_path / "run"
    root = out / "checkpoints"
    opts = dict(max_steps=12, ckpt_interval=4)
    first = _train(base_args(out, corpus, tokenizer_dir, token_cache, stop_after=8, **opts))
    assert first.returncode == 0, first.stderr[-3000:]
    # Every save renamed its step_<n>.tmp: only whole checkpoints, each with its checksums (keep_ckpts=2).
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_0000004", "step_0000008"]
    assert (root / "latest").read_text().strip() == "step_0000008"
    assert all(
        V.verify(root / n) is None and (root / n / V.CHECKSUMS).is_file() for n in ("step_0000004", "step_0000008")
    )
    model = root / "step_0000008" / "model.pt"
    size = model.stat().st_size
    model.write_bytes(model.read_bytes()[:1000])
    why = f"model.pt has 1000 bytes, {size} when saved"

    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=8, **opts))
    result = _failed(proc, out, 1, "failed verification")
    assert why in result["error"] and "step_0000008" in result["error"] and model.is_file()

    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=99, **opts))
    _failed(proc, out, 2, "is not a checkpoint")

    torn = root / "step_0000012.tmp"  # what a save killed halfway leaves
    torn.mkdir()
    (torn / "model.pt").write_bytes(b"half")
    again = _train(base_args(out, corpus, tokenizer_dir, token_cache, **opts))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"removed {torn} (a save cut short)" in again.stdout
    assert f"{root / 'step_0000008'} failed verification: {why}" in again.stdout
    assert "resume: falling back to step_0000004: quarantined step_0000008 (" in again.stdout, again.stdout[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["start_step"] == 4 and result["final_step"] == 12, result
    (q,) = result["quarantined"]
    assert q["checkpoint"] == "step_0000008" and q["why"].endswith(why), q
    resume = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "resume"]
    assert resume[-1]["step"] == 4 and resume[-1]["quarantined"] == [q], resume
    (moved,) = root.glob("quarantine-step_0000008-*")
    assert (moved / "model.pt").stat().st_size == 1000  # as it was found
    assert sorted(p.name for p in root.glob("step_*")) == ["step_0000008", "step_0000012"]  # saved again, whole
    assert V.verify(root / "step_0000008") is None

    # Chosen by hand and whole: resumed; its step 12 is saved again over the one there.
    older = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=8, skip_optimizer="true", **opts))
    assert older.returncode == 0, older.stderr[-3000:]
    assert "step_0000008 at step 8" in older.stdout and "fresh optimizer state" in older.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["start_step"] == 8 and result["quarantined"] == []
    assert sorted(p.name for p in root.glob("step_*")) == ["step_0000008", "step_0000012"]
    assert V.verify(root / "step_0000012") is None

    # An older payload's checkpoint (no checksums) is not judged: its damage is found when it loads.
    ckpt = root / "step_0000012"
    (ckpt / V.CHECKSUMS).unlink()
    meta = json.loads((ckpt / "trainer.json").read_text())
    (ckpt / "trainer.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "checksums"}))
    (ckpt / "model.pt").write_bytes((ckpt / "model.pt").read_bytes()[:1000])
    proc = _train(base_args(out, corpus, tokenizer_dir, token_cache, resume_from=12, **opts))
    result = _failed(proc, out, 1, "cannot resume from this checkpoint")
    assert str(ckpt) in result["error"] and "--resume_from" in result["error"]


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
