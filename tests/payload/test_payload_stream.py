"""A streamed corpus (payload/stream.py): the three packing strategies, each rank's share, exact resume of the
position (unit, on real datasets streaming over local files), and a 2-rank run stopped and resumed under torchrun
that trains on the same tokens as one never stopped."""

from __future__ import annotations

import json

import numpy as np
import pytest
from payload_helpers import base_args, read_jsonl, run_ok

from payload import data as D
from payload import stream as ST
from tests.conftest import ROOT

pytestmark = pytest.mark.payload

T = 8  # block size of the unit tests
EOS = 0


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def documents(n_files: int = 3, per_file: int = 7) -> list[list[str]]:
    """Documents of varied lengths (2 to 40 characters): some shorter than a block, some several blocks long."""
    rng = np.random.default_rng(7)
    return [
        [f"f{f}d{i}:" + "abcdefghij"[: rng.integers(0, 10)] * rng.integers(1, 4) for i in range(per_file)]
        for f in range(n_files)
    ]


@pytest.fixture
def jsonl_dir(tmp_path):
    out = tmp_path / "jsonl"
    out.mkdir()
    for f, docs in enumerate(documents()):
        rows = [json.dumps({"body": d, "n": i}) + "\n" for i, d in enumerate(docs)]
        (out / f"part-{f}.jsonl").write_text("".join(rows))
    return out


def tokens_of(docs: list[str]) -> list[int]:
    return [t for d in docs for t in (*encode(d), EOS)]


def stream(path, strategy="pack", rank=0, world=1, column="body") -> ST.TokenStream:
    source = ST.open_source(str(path), column, rank, world)
    return ST.TokenStream(source, encode, EOS, T, strategy).start()


def test_pack_gives_exactly_the_blocks_of_the_packed_cache(jsonl_dir):
    flat = np.asarray(tokens_of([d for f in documents() for d in f]))
    cache = D.Blocks(flat, T)
    s = stream(jsonl_dir)
    got = np.stack([s.next_block() for _ in range(cache.n)])
    x, y = cache.batch(np.arange(cache.n))
    assert (got[:, :-1] == x).all() and (got[:, 1:] == y).all()
    assert s.dropped == 0 and s.epoch == 0
    s.next_block()  # the corpus ends: the next epoch starts from the first document again
    assert s.epoch == 1


def test_overflow_keeps_each_block_inside_one_document_and_trunc_takes_one_block_each(jsonl_dir):
    docs = [tokens_of([d]) for f in documents() for d in f]
    per_doc = [(len(d) - 1) // T for d in docs]
    s = stream(jsonl_dir, "overflow")
    blocks = [s.next_block().tolist() for _ in range(sum(per_doc))]
    want = [d[i * T : i * T + T + 1] for d in docs for i in range((len(d) - 1) // T)]
    assert blocks == want and s.epoch == 0
    assert all(b.count(EOS) <= 1 and (EOS not in b or b[-1] == EOS) for b in blocks)  # no block spans two documents

    s = stream(jsonl_dir, "trunc")
    long_enough = [d for d in docs if len(d) >= T + 1]
    assert 0 < len(long_enough) < len(docs)  # the corpus has documents too short for a block: dropped
    assert [s.next_block().tolist() for _ in long_enough] == [d[: T + 1] for d in long_enough]
    # dropped so far: the short documents, and the rest of each long one, up to the last long one read
    read = docs[: max(i for i, d in enumerate(docs) if len(d) >= T + 1) + 1]
    assert s.dropped == sum(len(d) - (T + 1) if len(d) >= T + 1 else len(d) for d in read)


@pytest.mark.parametrize("strategy", ST.STRATEGIES)
@pytest.mark.parametrize("stop_at", [3, 11, 40])  # 40: past the end of the corpus, into the second epoch
def test_a_resumed_stream_gives_the_same_next_blocks(jsonl_dir, strategy, stop_at):
    straight = stream(jsonl_dir, strategy)
    want = [straight.next_block().tolist() for _ in range(stop_at + 25)]
    first = stream(jsonl_dir, strategy)
    assert [first.next_block().tolist() for _ in range(stop_at)] == want[:stop_at]
    state = json.loads(json.dumps(first.state_dict()))  # as the checkpoint stores it
    second = stream(jsonl_dir, strategy)
    second.load_state_dict(state)
    assert [second.next_block().tolist() for _ in range(25)] == want[stop_at:]
    assert (second.epoch, second.docs, second.blocks) == (straight.epoch, straight.docs, straight.blocks)


def test_each_rank_streams_its_own_documents(jsonl_dir):
    seen = []
    for rank in range(2):
        source = ST.open_source(str(jsonl_dir), "body", rank, 2)
        seen.append([row["text"] for row in source])
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(d for f in documents() for d in f)


def test_parquet_and_text_files_stream_too(jsonl_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [d for f in documents() for d in f]
    pq.write_table(pa.table({"body": docs}), tmp_path / "corpus.parquet")
    s = stream(tmp_path / "corpus.parquet")
    assert [s.next_block().tolist() for _ in range(5)] == [b.tolist() for b in _blocks(stream(jsonl_dir), 5)]
    texts = tmp_path / "texts"
    texts.mkdir()
    for i, d in enumerate(docs[:3]):
        (texts / f"{i}.txt").write_text(d)  # one document per file, whole
    s = ST.TokenStream(ST.open_source(str(texts), "text", 0, 1), encode, EOS, 4, "pack").start()
    assert np.concatenate([s.next_block()[:-1] for _ in range(3)]).tolist() == tokens_of(docs[:3])[:12]


MDS = ROOT / "tests" / "fixtures" / "stream"


def test_mds_shards_stream_the_documents_mosaicml_wrote(jsonl_dir, tmp_path):
    """MDS shards written by MosaicML streaming's own MDSWriter (tests/fixtures/stream/, 3 shards of 10, 9 and 2
    samples: raw with SHA-1 and xxh64 digests, and gzip-compressed): the same documents in the same order as the
    jsonl files (the blocks of `pack` equal, both ranks' shares the documents), and a resumed MDS stream gives the
    same next blocks."""
    from tests.fixtures.stream.write_mds import documents as written

    flat = [d for f in documents() for d in f]
    assert written() == flat  # the fixtures hold these documents
    assert ST.stream_files(str(MDS / "mds")) == ("mds", [str(MDS / "mds" / f"shard.0000{i}.mds") for i in range(3)])
    for kind in ("mds", "mds_gz"):
        assert [row["text"] for row in ST.open_source(str(MDS / kind), "body", 0, 1)] == flat, kind
        want = [b.tolist() for b in _blocks(stream(jsonl_dir), 30)]
        assert [b.tolist() for b in _blocks(stream(MDS / kind), 30)] == want, kind
    shares = [[row["text"] for row in ST.open_source(str(MDS / "mds"), "body", r, 2)] for r in range(2)]
    assert shares == [flat[0::2], flat[1::2]]
    straight = stream(MDS / "mds", "overflow", rank=1, world=2)
    want = [b.tolist() for b in _blocks(straight, 20)]
    first = stream(MDS / "mds", "overflow", rank=1, world=2)
    _blocks(first, 7)
    second = stream(MDS / "mds", "overflow", rank=1, world=2)
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert [b.tolist() for b in _blocks(second, 13)] == want[7:] and second.epoch == straight.epoch


def test_bad_mds_input_is_named(tmp_path):
    import shutil

    bad = tmp_path / "mds"
    shutil.copytree(MDS / "mds", bad)
    with pytest.raises(ST.StreamError, match=r"no column 'text' \(columns: \['body', 'n'\]\)"):
        ST.open_source(str(bad), "text", 0, 1)
    with pytest.raises(ST.StreamError, match="column 'n' is MDS 'int', not text"):
        ST.open_source(str(bad), "n", 0, 1)
    shard = bad / "shard.00001.mds"
    shard.write_bytes(shard.read_bytes().replace(b"abc", b"abd", 1))
    with pytest.raises(ST.StreamError, match=r"shard.00001.mds: sha1 differs from index.json"):
        list(ST.open_source(str(bad), "body", 0, 1))
    # A share of one document, all of it held out for validation: training has nothing left, and says why.
    tiny = ST.TokenStream(ST.open_source(str(MDS / "mds"), "body", 20, 21), encode, EOS, 2, "trunc")
    tiny.next_block()
    tiny.start()
    with pytest.raises(ST.StreamError, match="ends within the blocks held out for validation"):
        tiny.next_block()
    (bad / "index.json").write_text("{}")
    with pytest.raises(ST.StreamError, match="not an MDS index"):
        ST.stream_files(str(bad))
    try:
        import zstandard  # noqa: F401
    except ImportError:  # the payload's venv: named, not misread
        with pytest.raises(ST.StreamError, match=r"compressed with zstd, which this venv cannot read"):
            list(ST.open_source(str(MDS / "mds_zstd"), "body", 0, 1))
    else:
        assert len(list(ST.open_source(str(MDS / "mds_zstd"), "body", 0, 1))) == 21


def _blocks(s, n):
    return [s.next_block() for _ in range(n)]


def test_bad_stream_input_is_named(jsonl_dir, tmp_path):
    with pytest.raises(ST.StreamError, match="no such file"):
        ST.stream_files(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ST.StreamError, match=r"no .* files to stream"):
        ST.stream_files(str(tmp_path / "empty"))
    (jsonl_dir / "extra.parquet").write_bytes(b"")
    with pytest.raises(ST.StreamError, match="one format"):
        ST.stream_files(str(jsonl_dir))
    (jsonl_dir / "extra.parquet").unlink()
    with pytest.raises(ST.StreamError, match="no column 'text'"):
        ST.open_source(str(jsonl_dir), "text", 0, 1)
    with pytest.raises(ST.StreamError, match="packing='zip'"):
        ST.TokenStream(None, encode, EOS, T, "zip")
    state = stream(jsonl_dir, "pack").state_dict()
    with pytest.raises(ST.StreamError, match="packing=pack at block_size=8, this run packing=trunc"):
        stream(jsonl_dir, "trunc").load_state_dict(state)


# ---------------------------------------------------------------------------------------------- under torchrun


@pytest.fixture(scope="module")
def play_jsonl(corpus, tmp_path_factory):
    """The test plays as 4 jsonl files of one document per paragraph (each rank gets two whole files)."""
    out = tmp_path_factory.mktemp("jsonl-corpus")
    paragraphs = [p for f in sorted(corpus.iterdir()) for p in f.read_text().split("\n\n") if p.strip()]
    for i in range(4):
        part = paragraphs[i::4]
        (out / f"part-{i}.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in part))
    return out


STREAM = dict(stream="true", max_steps=12, log_interval=4, eval_batches=2, ckpt_interval=0)


def test_two_ranks_resume_a_stream_exactly(launch, tmp_path, play_jsonl, tokenizer_dir):
    """Stop after 8 of 12 steps and resume: the same losses step for step as the run never stopped."""
    straight, split, cache = tmp_path / "straight", tmp_path / "split", tmp_path / "cache"
    log = run_ok(launch, base_args(straight, play_jsonl, tokenizer_dir, cache, **STREAM))
    assert "data: streaming" in log and "4 json files" in log and "packing=pack" in log, log[-3000:]
    assert "after 2 held out for validation" in log
    result = json.loads((straight / "result.json").read_text())
    assert result["status"] == "completed" and result["final_val_loss"] < result["initial_val_loss"] - 0.5, result
    assert not cache.exists()  # no token cache: the stream is read as training goes

    run_ok(launch, base_args(split, play_jsonl, tokenizer_dir, cache, stop_after=8, **STREAM))
    ckpt = split / "checkpoints" / "step_0000008"
    states = [json.loads((ckpt / f"stream_rank{r}.json").read_text()) for r in range(2)]
    assert all(s["blocks"] > 0 and s["strategy"] == "pack" for s in states)
    assert states[0]["source"] != states[1]["source"]  # each rank its own position
    second = run_ok(launch, base_args(split, play_jsonl, tokenizer_dir, cache, **STREAM))
    assert "resume:" in second and "at step 8" in second

    def losses(run):
        return [
            (r["step"], r["loss"]) for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "train" and r["rank"] == 0
        ]

    assert [s for s, _ in losses(split)] == [s for s, _ in losses(straight)]
    assert [v for _, v in losses(split)] == pytest.approx([v for _, v in losses(straight)], abs=2e-3)


def test_two_ranks_train_on_mds_shards(launch, tmp_path, tokenizer_dir):
    """MDS shards through train.py under torchrun: each rank streams its share of the written samples (a corpus this
    small is read many times over: epochs) and its position is checkpointed with the run."""
    out = tmp_path / "run"
    opts = {**STREAM, "max_steps": 4, "batch_size": 2, "block_size": 8, "eval_batches": 1}
    args = base_args(out, MDS / "mds", tokenizer_dir, tmp_path / "cache", **opts)
    log = run_ok(launch, [*args, "--text_column=body", "--ckpt_interval=4"])
    assert "data: streaming" in log and "(3 mds files, each rank its share)" in log, log[-3000:]
    assert json.loads((out / "result.json").read_text())["status"] == "completed"
    states = [json.loads((out / "checkpoints" / "step_0000004" / f"stream_rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["source"]["sample"] % 2 for s in states] == [0, 1] and all(s["epoch"] > 0 for s in states), states
