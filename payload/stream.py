"""A corpus read as a stream (`--stream=true`): no token cache, documents tokenized and packed as training needs
them, so a corpus larger than a node's disk or memory trains from where it lies (a shared file system).

The source is Hugging Face `datasets` in streaming mode over local files (jsonl/json, parquet, arrow, or text
files with one document per file), in the files' order. Each rank reads its own documents
(`datasets.distributed.split_dataset_by_node`: whole files where their count divides by the world size, else every
world-size-th document). Documents become blocks of block_size + 1 tokens by one of three strategies (`packing`):

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

from pathlib import Path

import numpy as np

STRATEGIES = ("pack", "overflow", "trunc")
# datasets' builder for each file suffix; text files are read whole, one document per file.
FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".arrow": "arrow", ".txt": "text"}
STATE_FILE = "stream_rank{rank}.json"


class StreamError(ValueError):
    """A corpus that cannot be streamed; the message names it."""


def stream_files(data: str) -> tuple[str, list[str]]:
    """(datasets builder, files in order) of a file or a directory of files of one format."""
    p = Path(data)
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
    opts = {"sample_by": "document"} if builder == "text" else {}
    ds = datasets.load_dataset(builder, data_files=files, split="train", streaming=True, **opts)
    if text_column not in (ds.column_names or [text_column]):
        raise StreamError(f"{data}: no column {text_column!r} (columns: {ds.column_names})")
    if builder != "text" and text_column != "text":
        ds = ds.rename_column(text_column, "text")
    return split_dataset_by_node(ds.select_columns(["text"]), rank=rank, world_size=world_size)


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
