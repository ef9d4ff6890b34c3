"""PyTorch's flight recorder, dumped on request while the job runs.

torch records every collective of every process group in a ring buffer when TORCH_FR_BUFFER_SIZE (or
TORCH_NCCL_TRACE_BUFFER_SIZE) is above 0; NCCL's watchdog writes it by itself at a collective's timeout
(TORCH_NCCL_DUMP_ON_TIMEOUT). A stall is seen sooner than that: the launch's watch asks every host to dump its
ranks (module train_hang_dump), which touches the file RDMA_LLM_FR_REQUEST. A daemon thread of each rank then
writes the buffer as JSON beside it, `fr-rank<rank>.json`. The thread runs while the main thread waits inside a
collective (torch releases the GIL there); a rank that is stopped writes nothing, which is itself the answer.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path


def buffer_size() -> int:
    """Entries the recorder keeps (0: off), as torch reads them."""
    raw = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
    try:
        return int(raw)
    except ValueError:
        return 0


def _stamp(request: Path) -> str | None:
    try:
        return request.read_text().strip() or None
    except OSError:
        return None


# torch keeps two recorders: ProcessGroupNCCL's own (dumped by `_dump_nccl_trace_json`, in CUDA builds only) and the
# generic one of every other backend, gloo here (`_dump_fr_trace_json`). On a GPU the NCCL collectives, the ones a
# hang waits in, are only in the first (an H200 run of the generic dump alone held the gloo setup group's only).
RECORDERS = ("_dump_nccl_trace_json", "_dump_fr_trace_json")


def traces(c10d=None) -> tuple[list[dict], dict[str, object]]:
    """Every recorder's entries (finished collectives too), NCCL's first, and per recorder its entry count or why
    it could not be read; a recorder this torch lacks is left out."""
    if c10d is None:
        from torch._C import _distributed_c10d as c10d
    entries: list[dict] = []
    said: dict[str, object] = {}
    for name in RECORDERS:
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        try:
            got = json.loads(fn(True, False)).get("entries") or []
        except Exception as e:  # one recorder failing must not cost the other's entries
            said[name] = f"{type(e).__name__}: {e}"
            continue
        entries += got
        said[name] = len(got)
    return entries, said


def dump(out: Path, stamp: str, c10d=None) -> Path:
    """This rank's recorders (every process group, finished collectives too) as JSON, written whole or not at all:
    `trace` holds the entries of both (hang.flight_summary reads it), `recorders` what each gave."""
    entries, said = traces(c10d)
    tmp = out.with_name(f".{out.name}.tmp")
    record = {"request": stamp, "pid": os.getpid(), "time": time.time()}
    tmp.write_text(json.dumps({**record, "trace": {"entries": entries}, "recorders": said}))
    tmp.replace(out)
    return out


def _watch(request: Path, rank: int, poll: float) -> None:
    seen = _stamp(request)  # a request older than this start is not for it
    while True:
        time.sleep(poll)
        stamp = _stamp(request)
        if stamp and stamp != seen:
            seen = stamp
            try:
                dump(request.parent / f"fr-rank{rank}.json", stamp)
            except Exception as e:  # a failed dump must never end training
                print(f"rank {rank}: flight recorder dump failed: {type(e).__name__}: {e}", flush=True)


def start(rank: int, request: str | None = None, poll: float = 0.5) -> threading.Thread | None:
    """The dumping thread of this rank, where the recorder is on and the launch names a request file."""
    request = request if request is not None else os.environ.get("RDMA_LLM_FR_REQUEST", "")
    if not request or buffer_size() <= 0:
        return None
    thread = threading.Thread(target=_watch, args=(Path(request), rank, poll), name="flight-recorder", daemon=True)
    thread.start()
    return thread
