"""A checkpoint directory's life on disk: written whole, checksummed, verified, quarantined (standard library only).
An inference bundle's check too (`verify_bundle`; `python ckpt_verify.py bundle DIR`, which serve.yml runs).

payload/checkpoint.py (the lifecycle across ranks and nodes, which calls this module for each directory) saves
every checkpoint into `step_<n>.tmp`; once every rank's files are there (after the barrier) the
writer of each node hashes them into `checksums.json` and renames the directory `step_<n>` (`publish`), then
points `latest` at it. A `step_<n>` directory is therefore never torn: a save cut short leaves only
`step_<n>.tmp`, which the next start removes (`remove_unfinished`). checksums.json holds each file's size and
SHA-256 (the hash of the corpus shards' manifest, payload/shards.py). A resume verifies the checkpoint before
loading it; one that fails (a file missing, truncated or changed after the save: a disk, a copy, a person) is
renamed `quarantine-step_<n>-<UTC time>` beside the others, never deleted: no `step_*` pattern of the payload or
the launch role matches it any more, and the files stay for a post-mortem. A checkpoint of a payload older than
the checksums (no checksums.json and no `checksums` in its trainer.json) is not judged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKSUMS = "checksums.json"
FORMAT = "rdma-llm-checkpoint/1"
QUARANTINE = "quarantine-"
UNFINISHED = ".tmp"  # a save in progress, or one cut short
BUNDLE_MANIFEST = "manifest.json"  # an inference bundle's (commands.bundle): every file's size and SHA-256
REPLACED = ".old"  # a checkpoint of the same step being replaced (publish), for the moment between two renames
_STEP = re.compile(r"^step_(\d+)$")
# hashlib releases the GIL on large buffers: one thread per file hashes a node's rank files side by side
# (1.4 GB/s for one thread on the 2-core dev machine, so a 1.5 GB GPT-2 124M DDP checkpoint costs ~1 s).
_THREADS = min(8, os.cpu_count() or 1)


def sha256(path: Path) -> str:
    """A file's SHA-256, read in 4 MiB chunks (checkpoints here, corpus shards in payload/shards.py)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _hashes(paths: list[Path]) -> list[str]:
    with ThreadPoolExecutor(_THREADS) as pool:
        return list(pool.map(sha256, paths))


def _files(ckpt: Path) -> list[Path]:
    # Every file, dot files included: FSDP's shard index is dcp/.metadata.
    return sorted(p for p in ckpt.rglob("*") if p.is_file() and p.relative_to(ckpt) != Path(CHECKSUMS))


def write(ckpt: Path) -> dict:
    """Hash every file of `ckpt` into ckpt/checksums.json; returns what it wrote. `ckpt` is still the unfinished
    directory (publish renames it afterwards), so a plain write is whole by the time anyone reads it."""
    files = _files(ckpt)
    record = {
        "format": FORMAT,
        "written_at": time.time(),
        "files": {
            str(p.relative_to(ckpt)): {"size": p.stat().st_size, "sha256": digest}
            for p, digest in zip(files, _hashes(files), strict=True)
        },
    }
    (ckpt / CHECKSUMS).write_text(json.dumps(record, indent=1) + "\n")
    return record


def verify(ckpt: Path) -> str | None:
    """Why `ckpt` cannot be trusted, or None when every file it lists is there with its size and hash.

    Without checksums.json: a failure when its trainer.json says checksums were written (`"checksums": true`,
    this payload) or cannot be read, else None (an older payload's checkpoint, not judged). Sizes first, so a
    truncated file is named without hashing the rest."""
    if not ckpt.is_dir():
        return "not a directory"
    path = ckpt / CHECKSUMS
    if not path.exists():
        try:
            meta = json.loads((ckpt / "trainer.json").read_text())
        except (OSError, ValueError) as e:
            return f"no {CHECKSUMS} and trainer.json unreadable ({type(e).__name__})"
        return f"no {CHECKSUMS} (removed after the save)" if meta.get("checksums") else None
    try:
        files = json.loads(path.read_text())["files"]
        listed = sorted((name, int(want["size"]), str(want["sha256"])) for name, want in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return f"{CHECKSUMS} unreadable ({type(e).__name__})"
    for name, size, _ in listed:
        f = ckpt / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size != size:
            return f"{name} has {f.stat().st_size} bytes, {size} when saved"
    for (name, _, want), digest in zip(listed, _hashes([ckpt / n for n, _, _ in listed]), strict=True):
        if digest != want:
            return f"{name} does not match its SHA-256 when saved"
    return None


def step_of(name: str) -> int | None:
    """The step of a finished checkpoint's directory name (`step_<n>`); None for any other name."""
    m = _STEP.match(name)
    return int(m[1]) if m else None


def unfinished(ckpt: Path) -> Path:
    """Where the save of `ckpt` (step_<n>) writes until publish renames it."""
    return ckpt.with_name(ckpt.name + UNFINISHED)


def publish(part: Path, ckpt: Path) -> None:
    """Rename the whole, checksummed `part` to `ckpt`. A checkpoint of that step already there (a run resumed
    from an older one saves the same steps again) is moved aside first and removed after: a directory cannot be
    renamed over a full one."""
    old = ckpt.with_name(ckpt.name + REPLACED)
    if ckpt.exists():
        shutil.rmtree(old, ignore_errors=True)
        ckpt.rename(old)
    part.rename(ckpt)
    shutil.rmtree(old, ignore_errors=True)


def remove_unfinished(root: Path) -> list[str]:
    """Remove what saves cut short left in `root` (`step_<n>.tmp`, `step_<n>.old`); returns their names. Only
    at a start, before any rank saves: during a run, a save in progress is the only such directory."""
    gone = []
    for p in sorted(root.glob("step_*")):
        base, dot, suffix = p.name.partition(".")
        if p.is_dir() and step_of(base) is not None and dot + suffix in (UNFINISHED, REPLACED):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p.name)
    return gone


def finished(root: Path) -> list[Path]:
    """The published checkpoints in `root`, oldest first (by step, not by name)."""
    found = [(s, p) for p in root.glob("step_*") if p.is_dir() and (s := step_of(p.name)) is not None]
    return [p for _, p in sorted(found)]


def expired(root: Path, keep_last: int, keep_every: int = 0) -> list[Path]:
    """The published checkpoints retention removes: all but the newest `keep_last` and those whose step is a
    multiple of `keep_every` (0: none kept that way), oldest first. The newest is always kept (`latest`)."""
    done = finished(root)
    old = done[: -max(int(keep_last), 1)]
    return [p for p in old if not (keep_every and step_of(p.name) % keep_every == 0)]


def candidates(root: Path, latest: str) -> list[Path]:
    """The checkpoints a resume may use, newest first: `latest` and every older published one (a newer one
    never became `latest`: its run stopped between the rename and `latest`)."""
    limit = step_of(latest)
    if limit is None:
        return []
    return [p for p in reversed(finished(root)) if step_of(p.name) <= limit]


def quarantine(ckpt: Path) -> Path:
    """Rename `ckpt` out of the way (never delete it); returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = ckpt.with_name(f"{QUARANTINE}{ckpt.name}-{stamp}")
    n = 1
    while target.exists():
        target = ckpt.with_name(f"{QUARANTINE}{ckpt.name}-{stamp}-{n}")
        n += 1
    ckpt.rename(target)
    return target


def verify_bundle(path: Path) -> str | None:
    """None when every file an inference bundle's manifest lists is there with its size and SHA-256, else what is
    wrong (the bundle: commands.bundle)."""
    try:
        manifest = json.loads((path / BUNDLE_MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"no readable {BUNDLE_MANIFEST}: {e}"
    for name, want in files.items():
        f = path / name
        if not f.is_file():
            return f"{name}: missing"
        if f.stat().st_size != want["bytes"] or sha256(f) != want["sha256"]:
            return f"{name}: not the file the manifest lists (size or SHA-256 differ)"
    return None


if __name__ == "__main__":  # python ckpt_verify.py bundle DIR: exit 0 and "ok", or 1 and what is wrong
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "bundle":
        sys.exit("usage: python ckpt_verify.py bundle DIR")
    problem = verify_bundle(Path(sys.argv[2]))
    print(f"{sys.argv[2]}: {problem or 'ok'}")
    sys.exit(1 if problem else 0)
