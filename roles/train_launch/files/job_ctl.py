#!/usr/bin/env python3
"""Watch or stop one training job on this host by the process groups it recorded. Stdlib only.

The job's launcher runs in its own session and writes its process-group id to <run_dir>/job.pgid.
torchrun starts each worker in a new session of its own, so the worker groups are found as descendants
of the launcher and recorded in <run_dir>/job.pgids while the job runs: even a worker orphaned by a
killed torchrun is still stopped by its recorded group. Nothing is ever matched by name.

  job_ctl.py status --run-dir D [--wait S]   JSON: running, rc, pgids, last metrics line
  job_ctl.py stop   --run-dir D [--grace S]  SIGTERM every recorded group, SIGKILL what is left
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from pathlib import Path


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, pgid) for every live process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces) start after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        table[int(entry)] = (int(fields[1]), int(fields[2]))
    return table


def job_groups(run_dir: Path) -> set[int]:
    """The launcher's group, every descendant's group, and every group recorded before."""
    pgid = read_int(run_dir / "job.pgid")
    recorded = set()
    pgids_file = run_dir / "job.pgids"
    if pgids_file.exists():
        recorded = {int(x) for x in pgids_file.read_text().split() if x.isdigit()}
    if pgid is None:
        return recorded
    table = proc_table()
    members = {pid for pid, (_, g) in table.items() if g == pgid}
    frontier = set(members)
    while frontier:
        children = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - members
        members |= children
        frontier = children
    groups = {table[pid][1] for pid in members} | {pgid} | recorded
    tmp = pgids_file.with_suffix(".tmp")
    tmp.write_text(" ".join(str(g) for g in sorted(groups)) + "\n")
    tmp.replace(pgids_file)
    return groups


def live_groups(groups: set[int]) -> set[int]:
    alive = {g for _, g in proc_table().values()}
    return groups & alive


def last_metrics(run_dir: Path) -> dict | None:
    """The newest `train` or `eval` record of the lowest rank on this node."""
    path = run_dir / "out" / "metrics.jsonl"
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    best = None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") in ("train", "eval", "result") and (best is None or rec.get("rank", 0) < best["rank"]):
            best = {**rec, "rank": rec.get("rank", 0)}
            if best["rank"] == 0 and rec.get("kind") == "train":
                break
    return best


def status(run_dir: Path, wait: float) -> dict:
    deadline = time.monotonic() + wait
    while True:
        groups = job_groups(run_dir)
        alive = live_groups(groups)
        rc = read_int(run_dir / "job.rc")
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    started = (run_dir / "job.pgid").exists()
    return {
        "started": started,
        "running": bool(alive),
        "rc": rc,
        "state": "running" if alive else ("not started" if not started else "finished" if rc is not None else "killed"),
        "pgids": sorted(groups),
        "alive_pgids": sorted(alive),
        "metrics": last_metrics(run_dir),
    }


def stop(run_dir: Path, grace: float) -> dict:
    groups = job_groups(run_dir)
    termed, killed = sorted(live_groups(groups)), []
    for g in termed:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(g, signal.SIGTERM)  # the payload checkpoints on SIGTERM if it can
    deadline = time.monotonic() + grace
    while live_groups(groups) and time.monotonic() < deadline:
        time.sleep(0.5)
    for g in sorted(live_groups(groups)):
        try:
            os.killpg(g, signal.SIGKILL)
            killed.append(g)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    left = sorted(live_groups(groups))
    return {"changed": bool(termed), "terminated": termed, "killed": killed, "remaining": left}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["status", "stop"])
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--wait", type=float, default=0.0, help="status: block up to S seconds while running")
    ap.add_argument("--grace", type=float, default=30.0, help="stop: seconds between SIGTERM and SIGKILL")
    args = ap.parse_args()
    out = status(args.run_dir, args.wait) if args.command == "status" else stop(args.run_dir, args.grace)
    print(json.dumps(out))
    return 0 if args.command == "status" or not out["remaining"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
