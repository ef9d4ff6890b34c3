"""Pre-tokenized corpus shards with a SHA-256 manifest, for corpora bigger than one node's memory.

`train.py prepare` tokenizes a corpus once (on the controller or one node) into fixed-size shards:

    <dir>/manifest.json        format, dtype, tokenizer hash, and per shard: file, tokens, sha256
    <dir>/tokenizer/           the tokenizer the shards were made with (training uses exactly this one)
    <dir>/shard_00000.npy ...  token ids, documents joined by <|endoftext|>

Training with `--data=<dir>` verifies the manifest before the first step (a missing, truncated or corrupted
shard is an error naming it), holds out the last shard(s) for validation, and deals the remaining shards
round-robin to the ranks: rank r trains only on its own shards, read through memory maps, so no rank ever
loads the corpus and a shard directory can be copied to each node or shared.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from payload import ckpt_verify as V
from payload import data as D

FORMAT = "rdma-llm-shards/1"
MANIFEST = "manifest.json"


class ShardError(ValueError):
    """A shard directory that cannot be trained on; the message names the directory and the shard."""


def is_shard_dir(data: str) -> bool:
    return bool(data) and (Path(data) / MANIFEST).is_file()


class _ShardWriter:
    """Accumulates token arrays and writes a shard each time `shard_tokens` ids are buffered."""

    def __init__(self, out: Path, shard_tokens: int, dtype: type):
        self.out, self.shard_tokens, self.dtype = out, shard_tokens, dtype
        self.buf: list[np.ndarray] = []
        self.buffered = 0
        self.shards: list[dict] = []

    def add(self, ids: np.ndarray) -> None:
        self.buf.append(ids)
        self.buffered += len(ids)
        while self.buffered >= self.shard_tokens:
            flat = np.concatenate(self.buf)
            self._write(flat[: self.shard_tokens])
            rest = flat[self.shard_tokens :]
            self.buf, self.buffered = ([rest] if len(rest) else []), len(rest)

    def close(self) -> None:
        if self.buffered:
            self._write(np.concatenate(self.buf))
        self.buf, self.buffered = [], 0

    def _write(self, tokens: np.ndarray) -> None:
        name = f"shard_{len(self.shards):05d}.npy"
        fd, tmp = tempfile.mkstemp(prefix=".shard-", suffix=".npy", dir=self.out)
        with os.fdopen(fd, "wb") as f:
            np.save(f, tokens.astype(self.dtype, copy=False))
        os.replace(tmp, self.out / name)
        self.shards.append({"file": name, "tokens": len(tokens), "sha256": V.sha256(self.out / name)})


def prepare(documents: Iterable[str], tok, out_dir: str | Path, shard_tokens: int, source: str = "") -> dict:
    """Tokenize `documents` into shards of `shard_tokens` ids under `out_dir`; returns the manifest.

    The manifest is written last (atomically), so a directory without one is an unfinished preparation."""
    if shard_tokens < 1024:
        raise ShardError(f"shard_tokens={shard_tokens}: must be >= 1024")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if (out / MANIFEST).exists():
        raise ShardError(f"{out}: already holds prepared shards ({MANIFEST}); choose an empty directory")
    eos = tok.convert_tokens_to_ids(D.EOS)
    if eos is None:
        raise ShardError(f"tokenizer has no {D.EOS} token to separate documents")
    dtype = np.uint16 if len(tok) <= np.iinfo(np.uint16).max + 1 else np.uint32
    writer = _ShardWriter(out, shard_tokens, dtype)
    n_docs = 0
    for doc in documents:
        for enc in tok.backend_tokenizer.encode_batch(list(D._chunks(doc)), add_special_tokens=False):
            writer.add(np.asarray(enc.ids, dtype=dtype))
        writer.add(np.asarray([eos], dtype=dtype))
        n_docs += 1
    writer.close()
    if not writer.shards:
        raise ShardError(f"{source or 'corpus'}: no text to tokenize")
    tok.save_pretrained(str(out / "tokenizer"))
    manifest = {
        "format": FORMAT,
        "source": source,
        "documents": n_docs,
        "tokens": sum(s["tokens"] for s in writer.shards),
        "dtype": np.dtype(dtype).name,
        "shard_tokens": shard_tokens,
        "vocab": len(tok),
        "tokenizer_sha256": D.tokenizer_sha256(tok),
        "shards": writer.shards,
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(out / MANIFEST)
    return manifest


def read_manifest(data: str | Path) -> dict:
    path = Path(data) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ShardError(f"{path}: unreadable manifest: {e}") from e
    if manifest.get("format") != FORMAT or not manifest.get("shards"):
        raise ShardError(f"{path}: not a {FORMAT} manifest (prepare the corpus with `train.py prepare`)")
    return manifest


def verify(data: str | Path, manifest: dict, files: Iterable[str] | None = None, deep: bool = True) -> None:
    """Check the named shards (default: all) exist with the manifest's size and, if `deep`, its SHA-256."""
    root = Path(data)
    wanted = set(files) if files is not None else None
    itemsize = np.dtype(manifest["dtype"]).itemsize
    for s in manifest["shards"]:
        if wanted is not None and s["file"] not in wanted:
            continue
        path = root / s["file"]
        if not path.is_file():
            raise ShardError(f"{path}: shard listed in {MANIFEST} is missing")
        try:
            n = len(np.load(path, mmap_mode="r"))
        except (OSError, ValueError) as e:
            raise ShardError(f"{path}: unreadable shard: {e}") from e
        if n != s["tokens"] or path.stat().st_size < n * itemsize:
            raise ShardError(f"{path}: has {n} tokens, {MANIFEST} says {s['tokens']} (truncated or replaced?)")
        if deep and V.sha256(path) != s["sha256"]:
            raise ShardError(f"{path}: SHA-256 differs from {MANIFEST} (corrupted or modified shard)")


class ShardBlocks:
    """Fixed-length blocks inside each shard (a block never spans two shards), read by memory map.

    Global block ids run shard by shard; `batch(ids)` has the same contract as `data.Blocks.batch`."""

    def __init__(self, data: str | Path, manifest: dict, block_size: int):
        self.root, self.block_size = Path(data), block_size
        self.files = [s["file"] for s in manifest["shards"]]
        counts = [max(0, (s["tokens"] - 1) // block_size) for s in manifest["shards"]]
        self.first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # first global id per shard
        self.n = int(self.first[-1])
        self.tokens = int(manifest["tokens"])
        self._maps: dict[int, np.ndarray] = {}

    def shard_ids(self, shard: int) -> np.ndarray:
        return np.arange(self.first[shard], self.first[shard + 1])

    def _map(self, shard: int) -> np.ndarray:
        if shard not in self._maps:
            self._maps[shard] = np.load(self.root / self.files[shard], mmap_mode="r")
        return self._maps[shard]

    def batch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        T = self.block_size
        shards = np.searchsorted(self.first, ids, side="right") - 1
        starts = (ids - self.first[shards]) * T
        rows = np.stack([self._map(int(s))[o : o + T + 1] for s, o in zip(shards, starts, strict=True)]).astype(
            np.int64
        )
        return rows[:, :-1], rows[:, 1:]


def split_shards(
    n_shards: int, val_fraction: float, world_size: int, hold_out: bool = True
) -> tuple[list[list[int]], list[int]]:
    """(train shards per rank, validation shards): the last shards are held out (unless validation has a
    corpus of its own), the rest dealt round-robin."""
    n_val = max(1, round(n_shards * val_fraction)) if hold_out else 0
    n_train = n_shards - n_val
    if n_train < world_size:
        raise ShardError(
            f"{n_shards} shards cannot give {world_size} ranks one training shard each after holding out "
            f"{n_val} for validation: prepare the corpus with a smaller --shard_tokens"
        )
    return [list(range(r, n_train, world_size)) for r in range(world_size)], list(range(n_train, n_shards))


class RankShardSampler(D.ShardedSampler):
    """Rank r's micro-batches from its own shards only; `next_ids` and the resume state as `ShardedSampler`.

    Each epoch is a permutation of the rank's blocks (seeded by seed, rank and epoch); every rank takes the
    same number of micro-batches per epoch (the smallest rank's), so all ranks step together."""

    def __init__(self, blocks: ShardBlocks, rank_shards: list[list[int]], batch_size: int, rank: int, seed: int):
        self.batch_size, self.rank, self.seed, self.world_size = batch_size, rank, seed, len(rank_shards)
        per_rank = [np.concatenate([blocks.shard_ids(s) for s in shards]) for shards in rank_shards]
        self.block_ids = per_rank[rank]
        self.batches_per_epoch = min(len(ids) for ids in per_rank) // batch_size
        if self.batches_per_epoch == 0:
            raise ShardError(
                f"the smallest rank's shards hold {min(len(ids) for ids in per_rank)} blocks, less than one "
                f"batch of {batch_size}: prepare bigger shards or lower batch_size/block_size"
            )
        self.epoch, self.pos = 0, 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        perm = np.random.default_rng([self.seed, self.rank, epoch]).permutation(self.block_ids)
        return perm[: self.batches_per_epoch * self.batch_size]

    def state_dict(self) -> dict[str, int]:
        return {**super().state_dict(), "batches_per_epoch": self.batches_per_epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Another world size deals the shards anew: the epoch goes on from the same share of it (blocks of
        this epoch may repeat or be skipped; the next epochs are whole)."""
        world = int(state.get("world_size", self.world_size))
        if world == self.world_size:
            super().load_state_dict(state)
            return
        done = int(state["pos"]) / max(int(state.get("batches_per_epoch") or 1), 1)
        self.epoch, self.pos = (
            int(state["epoch"]),
            min(math.ceil(done * self.batches_per_epoch), self.batches_per_epoch),
        )
        self._order = self._epoch_order(self.epoch)
