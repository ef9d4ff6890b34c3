"""The watch's poll (plugins/module_utils/launch/poll.py): its output split, the unit's state from systemd's
properties and its rejoin unit's, and the poll command run by sh on this machine."""

from __future__ import annotations

import json
import subprocess

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import outcome as O
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import poll as P

POLL = """LoadState=loaded
ActiveState=failed
SubState=failed
Result=signal
ExecMainCode=2
ExecMainStatus=9
ExecMainExitTimestamp=Sun 2026-11-22 20:00:00.250000 UTC
NRestarts=0
@@link
up
@@metrics
{"kind": "train", "rank": 0, "step": 10}
{"kind": "train", "rank": 1, "step": 10}
not json
@@failures
E1122 20:00:00.1 9 api.py:869] failed (exitcode: -9) local_rank: 0 (pid: 77) of binary: /venv/bin/python
"""


def test_watch_parses_the_poll() -> None:
    props, link, metrics, workers = P.parse_poll(POLL)
    assert workers == [
        {"local_rank": 0, "pid": 77, "code": -9, "text": "local rank 0 killed by SIGKILL", "time": None, "error": None}
    ]
    assert props["ExecMainStatus"] == "9"
    assert O.systemd_time(props["ExecMainExitTimestamp"]) == 1795377600.25
    assert O.systemd_time("@1763840000") == 1763840000.0 and O.systemd_time("n/a") is None
    assert link == "up"
    assert metrics == {"kind": "train", "rank": 0, "step": 10}
    assert P.unit_state(props) == "failed"


@pytest.mark.parametrize(
    ("props", "state"),
    [
        ({"LoadState": "not-found", "ActiveState": "inactive"}, "missing"),
        ({"LoadState": "loaded", "ActiveState": "active", "SubState": "running"}, "running"),
        ({"LoadState": "loaded", "ActiveState": "active", "SubState": "exited"}, "completed"),
        ({"LoadState": "loaded", "ActiveState": "failed", "SubState": "failed"}, "failed"),
        ({"LoadState": "loaded", "ActiveState": "deactivating", "SubState": "stop-sigterm"}, "running"),
        ({"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead"}, "stopped"),
    ],
)
def test_unit_state(props, state) -> None:
    assert P.unit_state(props) == state


GONE = "LoadState=not-found\nActiveState=inactive\nSubState=dead"
NO_REJOIN = "LoadState=not-found\nActiveState=inactive\nResult=success"


@pytest.mark.parametrize(
    ("systemctl", "saved", "rejoin", "state"),
    [
        ("LoadState=loaded\nActiveState=active\nSubState=running", None, NO_REJOIN, "running"),
        # Released after collection: systemd's record saved beside the logs answers instead.
        (GONE, "ActiveState=active\nSubState=exited\n", NO_REJOIN, "completed"),
        (GONE, "ActiveState=failed\nSubState=failed\n", NO_REJOIN, "failed"),
        (GONE, None, NO_REJOIN, "missing"),
        # The host restarted: the transient unit went with the boot, the rejoin unit has not run yet ...
        (GONE, None, "LoadState=loaded\nActiveState=inactive\nResult=success", "rejoining"),
        (GONE, None, "LoadState=loaded\nActiveState=activating\nResult=success", "rejoining"),
        # ... or its condition skipped it in this boot (the run had ended, or counted the host lost) ...
        (
            GONE,
            None,
            "LoadState=loaded\nActiveState=inactive\nConditionResult=no\nConditionTimestampMonotonic=8123",
            "missing",
        ),
        # ... or it ran and the share is gone all the same (its systemd-run failed).
        (GONE, None, "LoadState=loaded\nActiveState=failed\nResult=exit-code", "missing"),
        (GONE, None, "LoadState=loaded\nActiveState=active\nResult=success", "missing"),
        # The share came back: its unit answers, whatever the rejoin unit says.
        (
            "LoadState=loaded\nActiveState=active\nSubState=running",
            None,
            "LoadState=loaded\nActiveState=active",
            "running",
        ),
    ],
)
def test_poll_script_on_this_machine(tmp_path, systemctl: str, saved: str | None, rejoin: str, state: str) -> None:
    """The watch's poll command run by sh with a stand-in `systemctl` first on PATH: the unit's state (live, or
    from logs/unit.show once the unit was released), rank 0's latest metrics, this launch's worker failures."""
    bin_dir, run = tmp_path / "bin", tmp_path / "run"
    for d in (bin_dir, run / "logs", run / "out"):
        d.mkdir(parents=True)
    (bin_dir / "systemctl").write_text(
        f"#!/bin/sh\ncase \"$2\" in *-rejoin.service) printf '%s\\n' '{rejoin}';;\n"
        f"*) printf '%s\\n' '{systemctl}';; esac\n"
    )
    (bin_dir / "systemctl").chmod(0o755)
    if saved is not None:
        (run / "logs" / "unit.show").write_text(saved)
    (run / "out" / "metrics.jsonl").write_text(
        json.dumps({"rank": 1, "kind": "train", "step": 9})
        + "\n"
        + json.dumps({"rank": 0, "kind": "train", "step": 7})
        + "\n"
    )
    (run / "logs" / "torchrun.log").write_text(
        "E1122 19:00:00.1 9 api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 5) of binary: /venv/bin/python\n"
        "=== launch 2 ===\n[rank1]: error: out of memory\n"
        "E1122 20:00:00.1 9 api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 77) of binary: /venv/bin/python\n"
    )
    script = P.poll_script("train-r1", str(run), "lo", "2")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props, link, metrics, failures = P.parse_poll(out)
    assert P.unit_state(props) == state, out
    assert link == "unknown" or link in ("up", "down"), link  # lo's operstate
    assert metrics == {"rank": 0, "kind": "train", "step": 7}
    # Only this launch's (after its marker), with the payload's error line before it.
    assert [(f["pid"], f["error"]) for f in failures] == [(77, "out of memory")], failures
