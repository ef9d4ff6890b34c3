"""The worker failures torchrun logged (logs/torchrun.log): which local rank, pid and exit code, when, the
payload's own error line before it, an agent stopped by a signal as its host's failure, and where a failure of
workers that died together started. Read by the watch every poll (poll.py), the outcome (outcome.py) and the run
report (summary.py)."""

from __future__ import annotations

import math
import re
import signal
from datetime import UTC, datetime
from typing import Any

# torchrun's elastic agent, when a worker dies: "E1122 22:09:19.425000 4232 torch/.../api.py:1002] failed
# (exitcode: -9) local_rank: 0 (pid: 123) of binary: ..." (the prefix is the log time, month-day and local time;
# the job's environment sets TZ=UTC so every host logs in UTC).
WORKER_FAILED = re.compile(
    r"^(?:[DIWEF](?P<md>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?) .*?)?"
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+) \(pid: (?P<pid>\d+)\)",
    re.M,
)


def exit_text(code: int) -> str:
    """A worker's exit code as torchrun reports it (negative: killed by that signal)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def log_time(month_day: str | None, hms: str | None, near: float | None) -> float | None:
    """Epoch of a torch log prefix (MMDD HH:MM:SS.us, UTC, no year): the year that puts it nearest `near`."""
    if not month_day or not hms or near is None:
        return None
    year = datetime.fromtimestamp(float(near), UTC).year
    best = None
    for y in (year - 1, year, year + 1):
        try:
            fmt = "%Y%m%d %H:%M:%S.%f" if "." in hms else "%Y%m%d %H:%M:%S"
            stamp = datetime.strptime(f"{y}{month_day} {hms}", fmt)
        except ValueError:
            continue
        t = stamp.replace(tzinfo=UTC).timestamp()
        if best is None or abs(t - near) < abs(best - near):
            best = t
    return best


# The payload's own last word before it exits on a failure it understood (payload/train.py RunError: a full
# disk, bad data, a corrupt checkpoint), as a worker's stderr line, "[rank1]: " prefixed or not.
PAYLOAD_ERROR = re.compile(r"^(?:\[rank\d+\]:\s*)?error: (?P<error>.+)$", re.M)


# torchrun's agent itself stopped by a signal (its host shutting down, its unit stopped): "W1127 18:01:50.663000
# 5381 torch/.../api.py:753] Received 15 death signal, shutting down workers"; its workers' peers then fail.
AGENT_SIGNAL = re.compile(
    r"^[DIWEF](?P<md>\d{4}) (?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?) +(?P<pid>\d+) .*?\] "
    r"Received (?P<sig>\d+) death signal, shutting down workers",
    re.M,
)
# What a rejoin unit writes into the job's log at the boot that starts the share again (rejoin_unit_text).
REJOINED = re.compile(r"^=== rejoin after a reboot at (?P<at>\S+) \(node rank \d+\) ===$", re.M)


def worker_failures(text: str, near: float | None = None) -> list[dict[str, Any]]:
    """The worker failures torchrun logged, in order: local rank, pid, exit code, text, the log time as an
    epoch when the line carries it (`near`: any epoch of the same run, to supply the year), and `error`, the
    payload's own error line logged before it, if any. An agent stopped by a signal counts as its host's
    failure (local rank None, the agent's pid, the signal as a negative code), said as a restart of the host where
    a rejoin unit started the share again after it."""
    errors = [(m.start(), m["error"].strip()) for m in PAYLOAD_ERROR.finditer(text)]
    rejoins = [(m.start(), m["at"]) for m in REJOINED.finditer(text)]
    found = []
    for m in WORKER_FAILED.finditer(text):
        found.append((m.start(), m.end(), m, None))
    for m in AGENT_SIGNAL.finditer(text):
        found.append((m.start(), m.end(), m, int(m["sig"])))
    out, seen = [], 0
    for start, end, m, sig in sorted(found, key=lambda f: f[0]):
        before = [e for at, e in errors if seen <= at < start]
        seen = end
        if sig is None:
            failure = {"local_rank": int(m["rank"]), "pid": int(m["pid"]), "code": int(m["code"])}
            failure["text"] = f"local rank {m['rank']} {exit_text(int(m['code']))}"
        else:
            rejoined = next((at for pos, at in rejoins if pos > start), None)
            name = signal.Signals(sig).name if sig in set(signal.Signals) else f"signal {sig}"
            failure = {"local_rank": None, "pid": int(m["pid"]), "code": -sig}
            failure["text"] = (
                f"restarted: torchrun got {name} as the host went down, and rejoined at its boot ({rejoined})"
                if rejoined
                else f"torchrun got {name} (its host shutting down, or its unit stopped)"
            )
            before = []
        out.append(failure | {"time": log_time(m["md"], m["hms"], near), "error": before[-1] if before else None})
    return out


def first_failure(failures: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Where a failure started among workers that died together: a worker killed by a signal is a cause (its
    peers then exit with an error when the collective breaks), and within each kind the earliest."""
    if not failures:
        return None
    return min(failures, key=lambda f: (not is_cause(f), math.inf if f.get("time") is None else f["time"]))


def is_cause(failure: dict[str, Any]) -> bool:
    """A worker killed by a signal, or one that ended on an error the payload named (its peers only see the
    collective break)."""
    return failure.get("code", 0) < 0 or bool(failure.get("error"))


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {"train_launch_worker_failures": worker_failures}
