"""Pre-tokenized shards: prepare, manifest verification, rank-owned shards, training on them, checkpoints."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from payload_helpers import base_args, run_ok, train_py

from payload import data as D
from payload import shards as S

pytestmark = pytest.mark.payload

SHARD_TOKENS = 40_000


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory, corpus, tokenizer_dir):
    """The test corpus prepared by the CLI, as a user runs it."""
    out = tmp_path_factory.mktemp("shards") / "s"
    proc = _cli("prepare", data=corpus, out_dir=out, tokenizer=tokenizer_dir, shard_tokens=SHARD_TOKENS)
    assert proc.returncode == 0, proc.stderr
    assert "prepared" in proc.stdout and "shards" in proc.stdout
    return out


def _cli(command: str, **opts) -> subprocess.CompletedProcess:
    return train_py(command, *(f"--{k}={v}" for k, v in opts.items()))


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        if f.is_file():
            (dst / f.name).write_bytes(f.read_bytes())
    (dst / "tokenizer").symlink_to(src / "tokenizer")
    return dst


def test_shards_hold_exactly_the_packed_corpus(shard_dir, corpus, tokenizer_dir, tmp_path):
    manifest = S.read_manifest(shard_dir)
    tok = D.load_tokenizer(str(tokenizer_dir))
    packed = D.load_tokens(D.tokenize_corpus(str(corpus), "text", tok, tmp_path / "cache"))
    parts = [np.load(shard_dir / s["file"]) for s in manifest["shards"]]
    assert np.array_equal(np.concatenate(parts), packed)  # same ids, same order, nothing lost at the cuts
    assert all(len(p) == SHARD_TOKENS for p in parts[:-1]) and 0 < len(parts[-1]) <= SHARD_TOKENS
    assert manifest["tokens"] == len(packed) and manifest["documents"] == 3
    assert manifest["tokenizer_sha256"] == D.tokenizer_sha256(tok)
    S.verify(shard_dir, manifest)  # fresh shards match their hashes


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("flip", "SHA-256 differs"),
        ("delete", "is missing"),
        ("truncate", "unreadable shard"),
    ],
)
def test_verify_names_the_bad_shard(shard_dir, tmp_path, damage, message):
    bad = _copy(shard_dir, tmp_path / "bad")
    victim = bad / "shard_00001.npy"
    if damage == "flip":
        raw = bytearray(victim.read_bytes())
        raw[-7] ^= 0xFF
        victim.write_bytes(bytes(raw))
    elif damage == "delete":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:200])
    with pytest.raises(S.ShardError, match=message) as err:
        S.verify(bad, S.read_manifest(bad))
    assert "shard_00001.npy" in str(err.value)
    proc = _cli("verify", data=bad)
    assert proc.returncode == 1 and "shard_00001.npy" in proc.stderr and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_prepare_refuses_a_prepared_directory_and_a_missing_corpus(shard_dir, tmp_path, corpus, tokenizer_dir):
    proc = _cli("prepare", data=tmp_path / "corpus", out_dir=tmp_path / "s", tokenizer=tokenizer_dir)
    assert proc.returncode == 1 and "no such file or directory" in proc.stderr
    proc = _cli("prepare", data=corpus, out_dir=shard_dir, tokenizer=tokenizer_dir)
    assert proc.returncode == 1 and "already holds prepared shards" in proc.stderr


def test_blocks_stay_inside_shards_and_ranks_own_disjoint_shards(shard_dir):
    manifest = S.read_manifest(shard_dir)
    blocks = S.ShardBlocks(shard_dir, manifest, 64)
    last = blocks.shard_ids(0)[-1]
    x, y = blocks.batch(np.array([last, last + 1]))
    shard0, shard1 = (np.load(shard_dir / manifest["shards"][i]["file"]) for i in (0, 1))
    assert np.array_equal(x[0], shard0[(len(blocks.shard_ids(0)) - 1) * 64 :][:64])
    assert np.array_equal(x[1], shard1[:64]) and np.array_equal(y[1], shard1[1:65])

    n = len(manifest["shards"])
    rank_shards, val = S.split_shards(n, 0.1, 2)
    assert val == [n - 1] and sorted(rank_shards[0] + rank_shards[1]) == list(range(n - 1))
    samplers = [S.RankShardSampler(blocks, rank_shards, 4, r, seed=7) for r in (0, 1)]
    assert samplers[0].batches_per_epoch == samplers[1].batches_per_epoch
    seen = [set(np.concatenate([s.next_ids() for _ in range(s.batches_per_epoch)]).tolist()) for s in samplers]
    assert not seen[0] & seen[1]  # ranks never share a block
    assert seen[0] <= set(np.concatenate([blocks.shard_ids(i) for i in rank_shards[0]]).tolist())

    # resume: a fresh sampler at the saved position yields the same next batches
    a = S.RankShardSampler(blocks, rank_shards, 4, 0, seed=7)
    for _ in range(a.batches_per_epoch + 3):
        a.next_ids()
    b = S.RankShardSampler(blocks, rank_shards, 4, 0, seed=7)
    b.load_state_dict(a.state_dict())
    assert all(np.array_equal(a.next_ids(), b.next_ids()) for _ in range(5))

    # resume on one rank (a node lost for good): the shards are dealt anew, the epoch goes on from the same share
    one_rank, _ = S.split_shards(n, 0.1, 1)
    c = S.RankShardSampler(blocks, one_rank, 4, 0, seed=7)
    c.load_state_dict(a.state_dict())
    share = a.state_dict()["pos"] / a.batches_per_epoch
    assert (c.epoch, c.pos) == (a.epoch, math.ceil(share * c.batches_per_epoch))
    assert len(c.next_ids()) == 4

    with pytest.raises(S.ShardError, match="smaller --shard_tokens"):
        S.split_shards(3, 0.1, 4)


def test_two_ranks_train_on_verified_shards_then_list_checkpoints(launch, shard_dir, tmp_path):
    out = tmp_path / "run"
    args = base_args(out, shard_dir, "", "", max_steps=12, log_interval=4, ckpt_interval=6, keep_ckpts=3)
    log = run_ok(launch, [a for a in args if not a.startswith(("--tokenizer=", "--cache_dir="))])
    assert "verified shards" in log and "dealt to 2 ranks" in log
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed" and result["final_step"] == 12
    assert result["final_val_loss"] < result["initial_val_loss"] - 1.0, result

    proc = _cli("checkpoints", out_dir=out)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["step", "train", "loss"]
    rows = {int(line.lstrip("* ").split()[0]): line for line in lines[1:]}
    assert set(rows) == {6, 12} and rows[12].startswith("*")  # `*` marks the latest
    assert f"{result['final_val_loss']:.4f}" in rows[12]


def test_a_corrupted_shard_stops_every_rank_before_training(launch, shard_dir, tmp_path):
    bad = _copy(shard_dir, tmp_path / "bad")
    raw = bytearray((bad / "shard_00000.npy").read_bytes())
    raw[-3] ^= 0x01
    (bad / "shard_00000.npy").write_bytes(bytes(raw))
    out = tmp_path / "run"
    args = [a for a in base_args(out, bad, "", "") if not a.startswith(("--tokenizer=", "--cache_dir="))]
    job = launch(args)
    rc = job.wait(120)
    output = job.output()
    assert rc != 0 and "shard_00000.npy: SHA-256 differs" in output, output[-3000:]
    assert "step " not in output.split("shard_00000.npy", 1)[0]  # nothing trained before the check
