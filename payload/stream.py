"""A corpus read as a stream (`--stream=true`): no token cache, documents tokenized and packed as training needs
them, so a corpus larger than a node's disk or memory trains from where it lies (a shared file system).

The source is Hugging Face `datasets` in streaming mode over local files (jsonl/json, parquet, arrow, or text
files with one document per file), in the files' order. Each rank reads its own documents
(`datasets.distributed.split_dataset_by_node`: whole files where their count divides by the world size, else every
world-size-th document). A directory with an `index.json` is MosaicML streaming's MDS shards, read here (MDSSource:
the `streaming` package cannot share a venv with this torch), every world-size-th sample to each rank.
Documents become blocks of block_size + 1 tokens by one of three strategies (`packing`):

- `pack`: documents end to end, each followed by the end-of-text token, cut into blocks; a document may continue
  in the next block, and no token is dropped (as the packed cache does).
- `overflow`: each document cut into blocks of its own, no block holds two documents; the tail shorter than a
  block is dropped.
- `trunc`: one block per document, its first tokens; the rest, and documents shorter than a block, dropped.

Exact resume: the position is the source's own state (`IterableDataset.state_dict`: the file and row after the
last document read) plus the tokens read but not yet trained on, saved per rank with every checkpoint, so a
resumed run trains on the same next tokens as one never stopped. At the end of the corpus the stream starts again
(the next epoch). No shuffling: datasets' shuffle buffer is not part of its state; shuffle when writing the files.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

STRATEGIES = ("pack", "overflow", "trunc")
# datasets' builder for each file suffix; text files are read whole, one document per file.
FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".arrow": "arrow", ".txt": "text"}
STATE_FILE = "stream_rank{rank}.json"


class StreamError(ValueError):
    """A corpus that cannot be streamed; the message names it."""


def stream_files(data: str) -> tuple[str, list[str]]:
    """(datasets builder, files in order) of a file or a directory of files of one format; ("mds", shards in the
    index's order) of an MDS directory."""
    p = Path(data)
    if (p / MDS_INDEX).is_file():
        return "mds", [str(p / stored_entry(s)["basename"]) for s in mds_index(p)]
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in FORMATS)
    else:
        raise StreamError(f"{data}: no such file or directory")
    if not files:
        raise StreamError(f"{data}: no {'/'.join(FORMATS)} files to stream")
    kinds = {FORMATS.get(f.suffix.lower()) for f in files}
    if None in kinds or len(kinds) > 1:
        raise StreamError(f"{data}: stream files of one format ({', '.join(sorted(map(str, kinds)))} found)")
    return kinds.pop(), [str(f) for f in files]


def open_source(data: str, text_column: str, rank: int, world_size: int, found: tuple[str, list[str]] | None = None):
    """This rank's documents as a datasets IterableDataset of one column, `text`. `found`: stream_files(data)
    where the caller has it already."""
    import datasets
    from datasets.distributed import split_dataset_by_node

    builder, files = found or stream_files(data)
    if builder == "mds":
        return MDSSource(data, text_column, rank, world_size)
    opts = {"sample_by": "document"} if builder == "text" else {}
    ds = datasets.load_dataset(builder, data_files=files, split="train", streaming=True, **opts)
    if text_column not in (ds.column_names or [text_column]):
        raise StreamError(f"{data}: no column {text_column!r} (columns: {ds.column_names})")
    if builder != "text" and text_column != "text":
        ds = ds.rename_column(text_column, "text")
    return split_dataset_by_node(ds.select_columns(["text"]), rank=rank, world_size=world_size)


# MosaicML streaming's MDS format (streaming/base/format/mds, version 2): a directory's index.json lists the shards;
# a shard file is its sample count (uint32), count + 1 offsets (uint32, from the file's start), then the samples;
# a sample is the byte sizes of its variable-size columns (uint32 each), then every column's bytes.
MDS_INDEX = "index.json"
# The MDS encodings that hold text (UTF-8 bytes both); the decompressors of the compressions MDS offers that Python
# has built in.
MDS_TEXT = ("str", "bytes")
MDS_DECOMPRESS = {"gz": gzip.decompress, "bz2": bz2.decompress}


def mds_index(root: Path) -> list[dict]:
    try:
        index = json.loads((root / MDS_INDEX).read_text())
        shards = index["shards"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StreamError(f"{root / MDS_INDEX}: not an MDS index ({e})") from e
    for s in shards:
        if s.get("format") != "mds" or "samples" not in s or "raw_data" not in s:
            raise StreamError(f"{root / MDS_INDEX}: shard {s.get('raw_data')}: format {s.get('format')!r}, not mds")
    return shards


def stored_entry(shard: dict) -> dict:
    """The index's entry ({basename, bytes, hashes}) of the file a shard is read from: its compressed copy where it
    was compressed, else its raw data."""
    zipped = shard.get("zip_data") if shard.get("compression") else None
    return zipped or shard["raw_data"]


def _mds_decompress(path: Path, shard: dict, packed: bytes) -> bytes:
    """A compressed shard's samples (`packed`: the file at `path`, as read)."""
    raw = path.parent / shard["raw_data"]["basename"]
    if raw.exists():  # streaming keeps a decompressed copy beside the compressed one once it has read it
        return raw.read_bytes()
    algo = str(shard["compression"]).split(":")[0]
    if algo == "zstd":
        try:
            import zstandard

            return zstandard.ZstdDecompressor().decompress(packed)
        except ImportError:
            pass
    if algo not in MDS_DECOMPRESS:
        raise StreamError(
            f"{path}: compressed with {shard['compression']}, which this venv cannot read (gz and bz2 can be; "
            "or write the shards without compression)"
        )
    return MDS_DECOMPRESS[algo](packed)


class MDSSource:
    """MDS shards as a stream source (TokenStream's contract: iterate rows {"text"}, state_dict, load_state_dict).
    Rank r reads samples r, r + world, r + 2 world, ... in the index's order; its position is the next sample's
    global number. Each shard is checked against the digests its index holds that hashlib knows (sha1, md5, ...;
    xxh hashes are left out) when it is opened."""

    def __init__(self, data: str, column: str, rank: int, world_size: int):
        self.root, self.column = Path(data), column
        self.shards = mds_index(self.root)
        for s in self.shards:
            if column not in s.get("column_names", []):
                raise StreamError(f"{data}: no column {column!r} (columns: {s.get('column_names')})")
            encoding = s["column_encodings"][s["column_names"].index(column)]
            if encoding not in MDS_TEXT:
                raise StreamError(f"{data}: column {column!r} is MDS {encoding!r}, not text (str or bytes)")
        self.starts = np.cumsum([0] + [int(s["samples"]) for s in self.shards]).tolist()
        self.rank, self.world = rank, world_size
        self.position = rank
        self._open: tuple[int, bytes] | None = None

    def state_dict(self) -> dict:
        return {"sample": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["sample"])

    def _shard(self, i: int) -> bytes:
        if self._open is None or self._open[0] != i:
            shard, entry = self.shards[i], stored_entry(self.shards[i])
            path = self.root / entry["basename"]
            try:
                stored = path.read_bytes()
            except OSError as e:
                raise StreamError(f"{path}: {e.strerror}") from e
            for algo, digest in (entry.get("hashes") or {}).items():
                if algo in hashlib.algorithms_available and hashlib.new(algo, stored).hexdigest() != digest:
                    raise StreamError(f"{path}: {algo} differs from {MDS_INDEX} (corrupted or modified shard)")
            self._open = (i, _mds_decompress(path, shard, stored) if shard.get("compression") else stored)
        return self._open[1]

    def _sample(self, n: int) -> str:
        i = int(np.searchsorted(self.starts, n, side="right")) - 1
        shard, data = self.shards[i], self._shard(i)
        k = n - self.starts[i]
        begin, end = np.frombuffer(data, np.uint32, 2, 4 + 4 * k)
        sample = data[begin:end]
        sizes, at = [], 0
        for size in shard["column_sizes"]:
            if size is None:  # variable size: read from the sample's head
                size = int(np.frombuffer(sample, np.uint32, 1, at)[0])
                at += 4
            sizes.append(size)
        column = shard["column_names"].index(self.column)
        start = at + sum(sizes[:column])
        return sample[start : start + sizes[column]].decode("utf-8")

    def __iter__(self):
        while self.position < self.starts[-1]:
            n = self.position
            self.position += self.world
            yield {"text": self._sample(n)}


class TokenStream:
    """Rank `rank`'s training blocks from a streamed corpus; `batch(n)` has the contract of `data.Blocks.batch`.

    `encode(text) -> list[int]` tokenizes one document (the end-of-text token is added here)."""

    def __init__(self, source, encode, eos: int, block_size: int, strategy: str = "pack"):
        if strategy not in STRATEGIES:
            raise StreamError(f"packing={strategy!r}: must be one of {', '.join(STRATEGIES)}")
        self.source, self.encode, self.eos = source, encode, eos
        self.block_size, self.strategy = block_size, strategy
        self.buffer: list[int] = []  # tokens read, not yet in a block
        self.epoch = self.docs = self.blocks = self.dropped = 0
        self._iter = None
        self._start = source.state_dict()  # where each epoch begins (start() moves it)

    def _next_document(self) -> list[int]:
        for _ in range(2):
            if self._iter is None:
                self._iter = iter(self.source)
            for row in self._iter:
                self.docs += 1
                return [*self.encode(row["text"]), self.eos]
            # the end of this rank's share: the next epoch reads it again from the start
            self._iter = None
            self.epoch += 1
            self.source.load_state_dict(self._start)
        if self.docs:  # an epoch starts after the held-out head (start()), which took the rest of the share
            raise StreamError(
                "this rank's share of the corpus ends within the blocks held out for validation (eval_batches x "
                "batch_size): hold out fewer, or give --eval_data"
            )
        raise StreamError("the corpus has no documents for this rank")

    def next_block(self) -> np.ndarray:
        T = self.block_size
        while len(self.buffer) < T + 1:
            doc = self._next_document()
            if self.strategy == "pack":
                self.buffer.extend(doc)
            else:  # overflow, trunc: a block never holds two documents
                self.dropped += len(self.buffer)
                self.buffer = doc
        block = np.asarray(self.buffer[: T + 1], dtype=np.int64)
        if self.strategy == "trunc":
            self.dropped += len(self.buffer) - (T + 1)
            self.buffer = []
        else:  # the last token of a block is the first input of the next (as data.Blocks cuts the cache)
            self.buffer = self.buffer[T:]
        self.blocks += 1
        return block

    def batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.stack([self.next_block() for _ in range(n)])
        return rows[:, :-1], rows[:, 1:]

    def start(self) -> TokenStream:
        """Each epoch begins here from now on: after the blocks held out for validation."""
        self._start = self.source.state_dict()
        return self

    def state_dict(self) -> dict:
        return {
            "source": self.source.state_dict(),
            "buffer": list(map(int, self.buffer)),
            "epoch": self.epoch,
            "docs": self.docs,
            "blocks": self.blocks,
            "dropped": self.dropped,
            "strategy": self.strategy,
            "block_size": self.block_size,
        }

    def load_state_dict(self, state: dict) -> None:
        if (state["strategy"], state["block_size"]) != (self.strategy, self.block_size):
            raise StreamError(
                f"the checkpoint's stream was packing={state['strategy']} at block_size={state['block_size']}, "
                f"this run packing={self.strategy} at block_size={self.block_size}: its position does not apply"
            )
        self.source.load_state_dict(state["source"])
        self._iter = None
        self.buffer = list(state["buffer"])
        self.epoch, self.docs = int(state["epoch"]), int(state["docs"])
        self.blocks, self.dropped = int(state["blocks"]), int(state["dropped"])
