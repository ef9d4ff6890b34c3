"""A run's checkpoints over their life, across ranks and nodes: saved, published, chosen for a resume, verified,
quarantined, loaded. `Trainer` makes one `CheckpointManager` and calls it once per decision.

The manager decides together with the other ranks (the collectives of `payload/runtime.py` Dist), so that every
rank saves the same step, and every node resumes from the same one and quarantines the same ones. What is done to
one directory on one disk is `payload/ckpt_verify.py`'s: its checksums, the names (`step_<n>`, `step_<n>.tmp`,
`quarantine-...`), publish, retention. That half stays a module of its own because it needs only the standard
library: the `checkpoints` command, the shard checksums of payload/shards.py and its tests use it without a
process group, and the launch role and its report name it as the description of those names.

A checkpoint directory holds the engine's files (payload/engines.py, with trainer.json: step, tokens, data
position, config), `rng_rank<r>.pt` per rank, a stream's position per rank, the tokenizer and checksums.json.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from payload import ckpt_verify as V
from payload import stream as ST
from payload.config import TrainConfig, to_dict
from payload.runtime import Dist, RunError, write_json

LATEST = "latest"  # checkpoints/latest: the name of the newest whole checkpoint (what a resume starts from)


def resume_candidate(cfg: TrainConfig, out: Path) -> Path | None:
    """The checkpoint a resume starts from, before any check: --resume_from's (a step number of this run, or any
    checkpoint directory), else the one `latest` names (None: this node has none). CheckpointManager.resume
    verifies it, and may fall back to an older one."""
    root = out / "checkpoints"
    if cfg.resume_from:
        value = cfg.resume_from
        return root / f"step_{int(value):07d}" if value.isdigit() else Path(value)
    latest = root / LATEST
    tag = latest.read_text().strip() if latest.exists() else ""
    return root / tag if tag else None


def saved_batch(cfg: TrainConfig, out: Path) -> int:
    """The micro-batch of the checkpoint a resume would start from (0: none): a resumed run keeps its batch
    whatever auto would pick now, so that it sees the data it would have seen."""
    ckpt = resume_candidate(cfg, out) if cfg.resume or cfg.resume_from else None
    if ckpt is None:
        return 0
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return int(json.loads((ckpt / "trainer.json").read_text())["config"]["batch_size"])
    return 0


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


class CheckpointManager:
    """<out_dir>/checkpoints of this run: the engine's state, the data's position (payload/data.py RunData) and
    every rank's RNG. `quarantined` lists what this launch's resume renamed (result.json, the resume record)."""

    def __init__(self, cfg: TrainConfig, out: Path, d: Dist, engine, data, log):
        self.cfg, self.out, self.dist, self.engine, self.data, self.log = cfg, out, d, engine, data, log
        self.root = out / "checkpoints"
        self.quarantined: list[dict] = []  # checkpoints a resume found corrupt and renamed (ckpt_verify.py)

    def remove_unfinished(self) -> None:
        """At the start, before any rank saves: a step_<n>.tmp here is a save an earlier start cut short."""
        if self.dist.writer:
            for name in V.remove_unfinished(self.root):
                print(f"checkpoints: removed {self.root / name} (a save cut short)", flush=True)

    # ------------------------------------------------------------------------------------------ save

    def save(self, step: int, tokens_seen: int, train_loss: float | None, val_loss: float | None) -> Path:
        """Every rank's part, then each node's writer checksums and publishes it, points `latest` at it and
        applies retention (--keep_ckpts, --keep_every). A failure on any node fails the save on every rank."""
        t0 = time.time()
        d, data = self.dist, self.data
        ckpt = self.root / f"step_{step:07d}"
        # Written as step_<n>.tmp and renamed once whole and checksummed: no step_<n> is ever torn.
        part = V.unfinished(ckpt)
        part.mkdir(parents=True, exist_ok=True)
        meta = {
            "step": step,
            "tokens_seen": tokens_seen,
            "sampler": data.sampler.state_dict(),
            "world_size": d.world_size,
            "engine": self.engine.name,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "saved_at": time.time(),
            "config": to_dict(self.cfg),
            "checksums": True,  # checksums.json comes with every checkpoint of this payload (ckpt_verify.py)
        }
        try:
            self.engine.save(part, meta, d.writer)
            torch.save(rng_state(), part / f"rng_rank{d.rank}.pt")
            if data.stream is not None:  # each rank's own position in the stream: the resume's next tokens
                write_json(part / ST.STATE_FILE.format(rank=d.rank), data.stream.state_dict())
            if d.writer:
                shutil.copytree(self.out / "tokenizer", part / "tokenizer", dirs_exist_ok=True)
        except (OSError, RuntimeError) as e:  # torch.save wraps write errors in RuntimeError
            raise self._save_failed(ckpt, part, e) from e
        d.barrier()  # every rank's part is on disk before the rename and `latest`
        error = None
        if d.writer:
            try:
                V.write(part)  # what a resume verifies it against (every file, every rank's, of this node)
                V.publish(part, ckpt)
                self._point_latest(ckpt.name)
            except OSError as e:
                error = self._save_failed(ckpt, part, e)
        # Every rank waits for every node's rename: a rank that exited first (SIGTERM) would have torchrun kill the
        # writer mid-hash. On the setup group, whose timeout (not pg_timeout) bounds a large checkpoint's hashing.
        if d.all_reduce([1.0 if error else 0.0], dist.ReduceOp.MAX, d.setup)[0]:
            raise error or RunError(f"saving checkpoint {ckpt} failed on another node (see its log)", 1)
        if d.writer:
            for p in V.expired(self.root, self.cfg.keep_ckpts, self.cfg.keep_every):
                shutil.rmtree(p, ignore_errors=True)
        self.log(f"checkpoint: {ckpt} ({time.time() - t0:.1f} s)")
        return ckpt

    def _point_latest(self, name: str) -> None:
        tmp = self.root / ".latest.tmp"
        tmp.write_text(name + "\n")
        tmp.replace(self.root / LATEST)

    def _save_failed(self, ckpt: Path, part: Path, e: Exception) -> RunError:
        """The run's error for a save that failed; the writer removes the unfinished directory (`latest` still
        names the last whole checkpoint)."""
        # torch.save reports a short write as "unexpected pos ...", not ENOSPC: look at the disk itself
        # (before removing the partial checkpoint, which is what filled it).
        free = None
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(self.root).free
        full = getattr(e, "errno", None) == errno.ENOSPC or (free is not None and free < 1 << 20)
        if self.dist.writer:
            shutil.rmtree(part, ignore_errors=True)
        hint = "the disk is full: free space or lower --keep_ckpts, then resume" if full else str(e)
        return RunError(f"saving checkpoint {ckpt} failed: {hint}", 1)

    # ------------------------------------------------------------------------------------------ resume

    def resume(self) -> tuple[Path, dict] | None:
        """The checkpoint this launch resumes, loaded into the engine, the data's position and the RNG: (its path,
        its trainer.json), or None where no node has one (the run starts at step 0)."""
        ckpt = self._chosen() if self.cfg.resume_from else self._newest_verified()
        return None if ckpt is None else (ckpt, self._load(ckpt))

    def _chosen(self) -> Path:
        """--resume_from's checkpoint, on every node and verified there; never quarantined: the user chose it and
        may know better than its checksums."""
        cfg, d = self.cfg, self.dist
        ckpt = resume_candidate(cfg, self.out)
        here = (ckpt / "trainer.json").is_file()
        if not d.all_reduce([1.0 if here else 0.0], dist.ReduceOp.MIN)[0]:  # every rank stops, not some
            raise RunError(
                f"--resume_from={cfg.resume_from}: {ckpt} is not a checkpoint"
                + (" on every node" if here else "")
                + " (`train.py checkpoints`)",
                2,
            )
        said = d.writers_say(V.verify(ckpt) if d.writer else None)
        if failed := [f"{host}: {why}" for host, why in said if why]:
            raise RunError(
                f"--resume_from={cfg.resume_from}: {ckpt} failed verification ({'; '.join(failed)}); "
                "point it at another checkpoint (`train.py checkpoints`)",
                1,
            )
        return ckpt

    def _newest_verified(self) -> Path | None:
        """What `latest` names, or an older one (`_verified`); None when no node has a `latest`."""
        candidate = resume_candidate(self.cfg, self.out)
        tag = candidate.name if candidate else ""
        found = self.dist.all_reduce([1.0 if tag else 0.0], dist.ReduceOp.MIN)[0]
        if not found:
            if tag:
                raise RuntimeError("only some nodes have a checkpoint in out_dir: cannot resume consistently")
            return None
        return self._verified(tag)

    def _verified(self, latest: str) -> Path:
        """The newest checkpoint, `latest` or older, that verifies against its checksums on every node; the
        newer ones that failed on some node are quarantined (renamed, never deleted: ckpt_verify.py) on every
        node and `latest` points at the one chosen. Each node's writer verifies its own copy, newest first and
        only as far as needed: the nodes agree on the lowest of their newest good steps, and a node whose newest
        good one is newer goes on down to it, until all name the same step."""
        d = self.dist
        limit = V.step_of(latest)
        if limit is None:
            raise RunError(f"{self.root / LATEST} names {latest!r}, not a step_<n> checkpoint", 1)
        verdicts: dict[str, str | None] = {}  # checkpoint name -> why it fails on this node (None: verified)
        while True:
            newest = None
            for ckpt in V.candidates(self.root, latest) if d.writer else ():
                if V.step_of(ckpt.name) > limit:
                    continue
                if ckpt.name not in verdicts:
                    verdicts[ckpt.name] = V.verify(ckpt)
                    if verdicts[ckpt.name]:
                        print(f"resume: {ckpt} failed verification: {verdicts[ckpt.name]}", flush=True)
                if verdicts[ckpt.name] is None:
                    newest = V.step_of(ckpt.name)
                    break
            steps = d.writers_say(newest)
            if bad := sorted({host for host, step in steps if step is None}):
                raise RunError(
                    f"no checkpoint up to {latest} verifies on {', '.join(bad)} (the 'failed verification' "
                    "lines above); point --resume_from at another one, or start over with --resume=false",
                    1,
                )
            limit = min(step for _, step in steps)
            if all(step == limit for _, step in steps):
                break
        name = f"step_{limit:07d}"
        # A newer checkpoint that failed on any node goes on every node (the nodes resume from the same step).
        failed = {n: why for n, why in verdicts.items() if why and V.step_of(n) > limit}
        reasons: dict[str, list[str]] = {}
        for host, fails in d.writers_say(failed):
            for n, why in fails.items():
                reasons.setdefault(n, []).append(f"{host}: {why}")
        if d.writer:
            for ckpt in V.candidates(self.root, latest):
                if ckpt.name in reasons:
                    print(f"resume: quarantined {ckpt.name} as {V.quarantine(ckpt)}", flush=True)
            self._point_latest(name)
        d.barrier(d.setup)
        self.quarantined = [
            {"checkpoint": n, "why": "; ".join(sorted(w))} for n, w in sorted(reasons.items(), reverse=True)
        ]
        if self.quarantined:
            said = "; ".join(f"{q['checkpoint']} ({q['why']})" for q in self.quarantined)
            self.log(f"resume: falling back to {name}: quarantined {said}")
        return self.root / name

    def _load(self, ckpt: Path) -> dict:
        """The engine's state (the optimizer's unless --skip_optimizer), the data's position and this rank's RNG
        from `ckpt`; returns its trainer.json. Every rank must come back at the same step."""
        cfg, d = self.cfg, self.dist
        try:
            meta = self.engine.load(ckpt, optimizer=not cfg.skip_optimizer)
        except Exception as e:  # truncated or foreign files: torch, json and DeepSpeed each raise their own
            raise RunError(
                f"{ckpt}: cannot resume from this checkpoint ({type(e).__name__}: {e}); "
                "point --resume_from at an older one (`train.py checkpoints`) or start over with --resume=false",
                1,
            ) from e
        saved = meta["config"]
        for key in ("model", "block_size", "batch_size", "grad_accum", "engine", "zero_stage", "data"):
            if saved.get(key) != getattr(cfg, key):
                self.log(f"resume: warning: {key} was {saved.get(key)!r}, now {getattr(cfg, key)!r}")
        if meta["world_size"] != d.world_size:
            # The per-rank batch (batch_size x grad_accum) stays: tokens per step follow the world size, the
            # step count and the learning-rate schedule stay those of the run (max_steps).
            per_rank = cfg.batch_size * cfg.block_size * cfg.grad_accum
            self.log(
                f"resume: world size {meta['world_size']} -> {d.world_size}: per-rank batch kept, tokens per step "
                f"{per_rank * meta['world_size']:,} -> {per_rank * d.world_size:,}; the data "
                "order goes on after the blocks already dealt in this epoch"
            )
        if self.data.stream is not None:
            self._load_stream(ckpt, meta)
        else:
            self.data.sampler.load_state_dict({"world_size": meta["world_size"], **meta["sampler"]})
        rng = ckpt / f"rng_rank{d.rank}.pt"
        if rng.exists():
            set_rng_state(torch.load(rng, weights_only=False))
        steps = d.all_reduce([-meta["step"], meta["step"]], dist.ReduceOp.MAX)
        if -steps[0] != steps[1]:
            raise RuntimeError(f"ranks resumed at different steps {-steps[0]:.0f}..{steps[1]:.0f}")
        self.log(
            f"resume: {ckpt} at step {meta['step']}, {meta['tokens_seen']:,} tokens seen"
            + (", fresh optimizer state (--skip_optimizer)" if cfg.skip_optimizer else "")
        )
        return meta

    def _load_stream(self, ckpt: Path, meta: dict) -> None:
        """Each rank goes on from its own saved position. Another world size deals the documents anew: each rank
        then starts its new share at the saved epoch (documents of that epoch may repeat or be skipped)."""
        stream, world = self.data.stream, self.dist.world_size
        if meta["world_size"] == world:
            try:
                stream.load_state_dict(json.loads((ckpt / ST.STATE_FILE.format(rank=self.dist.rank)).read_text()))
            except (OSError, ValueError, KeyError) as e:
                raise RunError(f"{ckpt}: cannot resume the stream's position: {e}", 1) from e
            return
        stream.epoch = int(meta["sampler"].get("epoch", 0))
        self.log(
            f"resume: world size {meta['world_size']} -> {world}: each rank streams its new share from the "
            f"start of epoch {stream.epoch}"
        )
