"""Who a hung training job waits for: every rank's stacks and process state, and the rank(s) the others wait on.

When a collective stalls, the ranks that reached it wait (idle, inside c10d/gloo/NCCL's wait) for the ones that did
not: a rank stopped, blocked in the kernel, or still computing elsewhere. The stacks come from py-spy (the field's
tool, in the training venv), the state from /proc/<pid>/stat. Node side: `dump_rank` reads one rank; controller
side: `classify` says what each rank was doing and `attribute` names the ranks the others waited for, with the
frame they were in.

Plain Python (stdlib only), unit-tested on py-spy 0.4.3 dumps of a real 2-rank gloo DDP job
(tests/unit/plugins/module_utils/launch/test_hang.py, samples in tests/fixtures/hang/ with their source).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# Process states (proc(5), /proc/<pid>/stat field 3) that make a rank the one the others wait for by themselves.
HELD = {
    "T": "stopped (SIGSTOP or job control)",
    "t": "stopped by a tracer (a debugger)",
    "D": "in uninterruptible sleep (D: a disk, a network filesystem or a driver)",
    "Z": "exited (a zombie its agent has not reaped)",
}
# Libraries whose frames are the wait itself (futex, condition variable, the GIL), not who waits.
WAIT_LIBRARIES = ("libc.so", "libpthread", "libstdc++", "ld-linux", "libpython")
# The first frame above them in a rank that waits for its peers: c10d's work or reducer, gloo, NCCL.
COLLECTIVE_NATIVE = re.compile(r"^(c10d::|gloo::|nccl|c10d_|torch::distributed::)")
# torch.distributed's Python collectives (distributed_c10d.py), for dumps without native frames.
COLLECTIVE_PYTHON = {
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list", "barrier",
    "monitored_barrier", "gather", "scatter", "reduce", "send", "recv", "wait",
}  # fmt: skip
# The training code's own files: the frame a report names as "where" (innermost of these).
OWN_CODE = ("payload/",)


def proc_state(stat: str) -> str:
    """The state letter of a /proc/<pid>/stat line (after the command name, which may hold spaces and ')')."""
    return stat.rsplit(") ", 1)[1][:1]


def run_command(argv: list[str], timeout: float | None = None) -> tuple[int, str, str]:
    """`run` for dump_rank outside Ansible (a module passes its own run_command). No bound of its own by default:
    dump_rank bounds each read with coreutils' timeout, whose SIGKILL reaches py-spy; a Python timeout here would
    kill only that wrapper, leaving py-spy (and the rank it pauses) behind."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def local_ranks(metrics_lines: Iterable[str], hostname: str) -> dict[int, int]:
    """rank -> pid of the ranks on this host, from their latest `start` record in metrics.jsonl (each rank writes
    one at every start, restarts included; a shared out_dir holds every host's)."""
    ranks: dict[int, int] = {}
    for line in metrics_lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("kind") == "start" and rec.get("hostname") == hostname:
            ranks[int(rec["rank"])] = int(rec["pid"])
    return dict(sorted(ranks.items()))


def dump_rank(
    pid: int,
    rank: int,
    spy: str = "py-spy",
    run: Callable[[list[str]], tuple[int, str, str]] = run_command,
    proc_root: str = "/proc",
    limit: int = 30,
) -> dict[str, Any]:
    """One rank's record: its state (read first) and its threads' stacks from `py-spy dump --json`, native frames
    where py-spy can pause the process. A stopped or D-state process cannot be paused (py-spy 0.4.3: "Failed to
    suspend process"), so it is read without pausing, Python frames only; a failed native read is retried so.
    `run(argv)` returns (rc, stdout, stderr). Each read is bounded by coreutils' timeout (`limit` seconds, then
    SIGKILL): a py-spy that hangs holding a rank paused would hold the job, and the watch, with it (a killed
    tracer's process is let go by the kernel)."""
    record: dict[str, Any] = {"rank": rank, "pid": pid, "state": None, "native": False, "threads": [], "error": None}
    try:
        record["state"] = proc_state(Path(proc_root, str(pid), "stat").read_text())
    except (OSError, IndexError):
        record["error"] = "the process is gone"
        return record
    tries = [["--nonblocking"]] if record["state"] in HELD else [["--native"], ["--nonblocking"]]
    errors = []
    for mode in tries:
        rc, out, err = run(["timeout", "-k", "5", str(limit), spy, "dump", "--pid", str(pid), "--json", *mode])
        if rc in (124, 137):
            errors.append(f"py-spy {' '.join(mode)}: no answer in {limit} s")
            continue
        if rc == 0:
            try:
                record["threads"] = json.loads(out)
            except ValueError as exc:
                errors.append(f"py-spy {' '.join(mode)}: unreadable output ({exc})")
                continue
            record["native"] = mode == ["--native"]
            break
        errors.append(f"py-spy {' '.join(mode)}: {first_error(err)}")
    else:
        record["error"] = "; ".join(errors)
    return record


FLIGHT_REQUEST = ".fr-request"


def request_flight(logs: str, stamp: str) -> None:
    """Ask every rank of this host for its flight recorder (payload/flight.py reads the file's new content)."""
    path = Path(logs, FLIGHT_REQUEST)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(stamp + "\n")
    tmp.replace(path)


def read_flight(
    logs: str,
    ranks: Iterable[int],
    stamp: str,
    wait: float = 5,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> dict[int, dict[str, Any] | None]:
    """rank -> flight_summary of the dump it wrote for `stamp` (`logs`/fr-rank<rank>.json), None for a rank that
    wrote none within `wait` seconds (stopped, blocked with the GIL held, or the recorder off)."""
    import time

    sleep, clock = sleep or time.sleep, clock or time.monotonic
    out: dict[int, dict[str, Any] | None] = dict.fromkeys(ranks)
    end = clock() + wait
    while True:
        for rank in [r for r, v in out.items() if v is None]:
            try:
                dump = json.loads(Path(logs, f"fr-rank{rank}.json").read_text())
            except (OSError, ValueError):
                continue
            if dump.get("request") == stamp:
                out[rank] = flight_summary(dump.get("trace") or {})
        if all(v is not None for v in out.values()) or clock() >= end:
            return out
        sleep(0.2)


def flight_summary(trace: Mapping[str, Any]) -> dict[str, Any]:
    """One rank's flight recorder (torch's JSON dump) per process group: the newest collective it issued (`last`,
    `op`: its sequence number and name) and the oldest not finished (`pending`, `pending_op`; None when all
    finished). Point-to-point entries are left out (their own sequence)."""
    groups: dict[str, dict[str, Any]] = {}
    for entry in trace.get("entries") or []:
        if entry.get("is_p2p"):
            continue
        pg = (entry.get("process_group") or [str(entry.get("pg_id", "?"))])[-1]
        group = groups.setdefault(pg, {"last": 0, "op": None, "pending": None, "pending_op": None})
        seq = int(entry.get("collective_seq_id") or 0)
        if seq >= group["last"]:
            group.update(last=seq, op=entry.get("profiling_name"))
        finished = entry.get("retired") or entry.get("state") == "completed"
        if not finished and (group["pending"] is None or seq < group["pending"]):
            group.update(pending=seq, pending_op=entry.get("profiling_name"))
    return groups


def flight_verdict(ranks: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the ranks' flight recorders (`classify`'s `flight`) say: the collective the waiting ranks are in (the
    newest pending one over every rank and group), the ranks that have not issued it yet (`behind`: their last
    collective in that group is older) and the ranks without a dump (`silent`). None without any dump or with
    nothing pending."""
    dumped = [r for r in ranks if r.get("flight") is not None]
    pending = [(g["pending"], pg, g["pending_op"]) for r in dumped for pg, g in r["flight"].items()
               if g.get("pending") is not None]  # fmt: skip
    if not pending:
        return None
    seq, pg, op = max(pending)
    waiting = [r["rank"] for r in dumped if (r["flight"].get(pg) or {}).get("pending") == seq]
    behind = {r["rank"]: (r["flight"].get(pg) or {}).get("last", 0) for r in dumped
              if (r["flight"].get(pg) or {}).get("last", 0) < seq}  # fmt: skip
    silent = [r["rank"] for r in ranks if r.get("flight") is None]
    text = f"flight recorder: {plural(len(waiting))} in collective #{seq} {op} of {pg}"
    if behind:
        text += ", " + ", ".join(f"rank {r} only at #{last}" for r, last in sorted(behind.items()))
    if silent:
        text += f", no dump from rank {', '.join(str(r) for r in silent)}"
    return {"group": pg, "seq": seq, "op": op, "waiting": waiting, "behind": sorted(behind), "silent": silent,
            "message": text}  # fmt: skip


def first_error(stderr: str) -> str:
    """py-spy's error and its causes on one line, without the backtrace it prints after them."""
    text = stderr.split("\nStack backtrace:", 1)[0]
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or "no output"


def main_thread(record: Mapping[str, Any]) -> dict[str, Any] | None:
    threads = record.get("threads") or []
    for thread in threads:
        if thread.get("os_thread_id") == record.get("pid") or thread.get("thread_name") == "MainThread":
            return thread
    return threads[0] if threads else None


def frame_text(frame: Mapping[str, Any]) -> str:
    where = frame.get("short_filename") or frame.get("filename") or "?"
    return f"{frame['name']} ({where}:{frame['line']})" if frame.get("line") else f"{frame['name']} ({where})"


def own_frame(frames: Iterable[Mapping[str, Any]], own: tuple[str, ...] = OWN_CODE) -> str | None:
    """The innermost frame of the training code itself."""
    for frame in frames:
        if any(part in (frame.get("filename") or "") for part in own):
            return frame_text(frame)
    return None


def collective_wait(frames: list[Mapping[str, Any]], native: bool) -> str | None:
    """The collective a thread waits in, or None. Native frames: the first frame above the wait primitives is
    c10d's, gloo's or NCCL's (a rank computing inside DDP's reducer is above other frames). Python frames only: the
    innermost frame is one of torch.distributed's collectives."""
    if native:
        for frame in frames:
            library = frame.get("short_filename") or ""
            if frame["name"].startswith("0x") or library.startswith(WAIT_LIBRARIES):
                continue
            return frame["name"] if COLLECTIVE_NATIVE.match(frame["name"]) else None
        return None
    if frames and frames[0]["name"] in COLLECTIVE_PYTHON and "torch/distributed/" in (frames[0].get("filename") or ""):
        return frames[0]["name"]
    return None


def classify(record: Mapping[str, Any], host: str = "") -> dict[str, Any]:
    """What one rank was doing: `stopped`/`blocked`/`gone` (its state), `waiting` (idle in a collective), `busy`
    (running, or idle outside a collective, with native frames to tell) or `unknown` (Python frames only and not in
    a collective: the wait may be inside a C++ call such as DDP's backward)."""
    out: dict[str, Any] = {"rank": record["rank"], "host": host, "pid": record.get("pid"), "state": record.get("state")}
    out["flight"] = record.get("flight")  # read_flight's summary, where the rank dumped its flight recorder
    thread = main_thread(record)
    frames = (thread or {}).get("frames") or []
    # The innermost Python frame (py-spy gives native frames line 0): what a reader recognises.
    python = next((f for f in frames if f.get("line")), frames[0] if frames else None)
    out["frame"] = frame_text(python) if python else None
    out["where"] = own_frame(frames)
    state = record.get("state")
    if state is None:
        out.update(status="gone", why=record.get("error") or "the process is gone")
    elif state in ("T", "t"):
        out.update(status="stopped", why=HELD[state])
    elif state in HELD:
        out.update(status="blocked", why=HELD[state])
    elif thread is None:
        out.update(status="unknown", why=f"no stacks: {record.get('error') or 'py-spy returned none'}")
    elif (wait := collective_wait(frames, bool(record.get("native")))) and not thread.get("active"):
        out.update(status="waiting", why=f"waiting in {wait}", collective=wait)
    elif record.get("native") or thread.get("active"):
        busy = "running outside any collective" if thread.get("active") else "idle outside any collective"
        out.update(status="busy", why=busy)
    else:
        out.update(status="unknown", why="Python frames only, not in a collective")
    return out


def attribute(ranks: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The ranks the others waited for, from every rank's `classify`: those stopped, blocked, gone or busy while
    the others wait in a collective. A message for the play and the report."""
    ranks = sorted(ranks, key=lambda r: r["rank"])
    flight = flight_verdict(ranks)
    if flight:
        # A rank whose stacks could not tell, but whose last collective is older than the one the others wait in,
        # is behind them.
        for r in ranks:
            if r["status"] == "unknown" and r["rank"] in flight["behind"]:
                r.update(status="busy", why=f"behind: not yet in collective #{flight['seq']} ({flight['op']})")
    waiting = [r for r in ranks if r["status"] == "waiting"]
    culprits = [r for r in ranks if r["status"] in ("stopped", "blocked", "gone", "busy")]
    unknown = [r for r in ranks if r["status"] == "unknown"]
    if len(culprits) == len(ranks) and all(r["status"] == "busy" for r in culprits):
        culprits = []  # every rank computing: nobody waits, nothing to attribute
    if culprits:
        parts = [f"{who(r)} {r['why']}" + (f" in {r['where']}" if r.get("where") else "") for r in culprits]
        message = "; ".join(parts)
        if waiting:
            sample, them = waiting[0], "it" if len(culprits) == 1 else "them"
            message += (
                f" — {plural(len(waiting))} waited for {them} in {sample['collective']}"
                + (f", from {sample['where']}" if sample.get("where") else "")
                + f" ({', '.join(who(r) for r in waiting)})"
            )
    elif waiting and len(waiting) == len(ranks):
        message = (
            f"every rank waits in a collective ({', '.join(who(r) for r in waiting)}): none of them is behind, so"
            " the wait is on the fabric or on a peer these dumps do not cover"
        )
    else:
        message = "no rank stands out: " + "; ".join(f"{who(r)} {r['why']}" for r in ranks)
    if flight:
        message += f" ({flight['message']})"
    return {
        "culprits": [r["rank"] for r in culprits],
        "culprit_hosts": sorted({r["host"] for r in culprits if r.get("host")}),
        "waiting": [r["rank"] for r in waiting],
        "unknown": [r["rank"] for r in unknown],
        "ranks": ranks,
        "message": message,
        "flight": flight,
    }


def who(rank: Mapping[str, Any]) -> str:
    return f"rank {rank['rank']}" + (f" ({rank['host']})" if rank.get("host") else "")


def plural(n: int) -> str:
    return "1 rank" if n == 1 else f"{n} ranks"


def verdict(jobs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The attribution over every host's dumps from the launch's watch (`job["hang"]["records"]`, taken while the
    job's steps stalled), or None when no host dumped. A host whose ranks were not read (lost, or its job already
    ended) while every rank read waits is the one they waited for."""
    dumped = {h: j["hang"] for h, j in jobs.items() if (j.get("hang") or {}).get("records")}
    if not dumped:
        return None
    out = attribute([classify(rec, host) for host, stall in dumped.items() for rec in stall["records"]])
    unread = [f"{h} ({j.get('state') or 'not read'})" for h, j in jobs.items() if h not in dumped]
    if unread and not out["culprits"]:
        sample = next(r for r in out["ranks"] if r["status"] == "waiting") if out["waiting"] else None
        out["culprit_hosts"] = sorted(h for h in jobs if h not in dumped)
        out["message"] = (
            f"{', '.join(who(r) for r in out['ranks'])} waited"
            + (f" in {sample['collective']}" if sample else "")
            + f" for {', '.join(unread)}, whose ranks could not be read"
        )
        if out.get("flight"):
            out["message"] += f" ({out['flight']['message']})"
    elif unread:
        out["message"] += f"; not read: {', '.join(unread)}"
    out["at"] = min(stall["at"] for stall in dumped.values())
    return out
