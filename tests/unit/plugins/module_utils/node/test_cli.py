"""The command (plugins/module_utils/node/cli.py) in this process: what it prints on a lab node, its exit codes for a
scheduler (0 pass, 1 warn, 2 fail, 3 could not check) and as Slurm's Prolog. The built command: test_build.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.cli import main
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import EXIT_ERROR, RESULT_FILE, SCHEMA
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.gpu import GPU_CHECKS

from tests.unit.plugins.module_utils.node.helpers import lab_root, line, write_config


def test_command_on_a_lab_node_passes_with_every_skip_said(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    args = ["--config", str(write_config(tmp_path)), "--root", str(lab_root(tmp_path)), "--state-dir", str(tmp_path)]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == SCHEMA and out["status"] == "pass" and out["exit"] == 0
    assert {c["check"]: c["status"] for c in out["checks"]} == {
        "fabric nic": "pass", "mtu": "pass", "nic speed": "skip", "rdma devices": "skip", "gpus": "skip",
        **{name: "skip" for name in GPU_CHECKS}, "port counters": "skip", "pause counters": "skip",
        "link flaps": "skip", "stack": "skip",
    }  # fmt: skip
    skips = {c["check"]: c["detail"] for c in out["checks"] if c["status"] == "skip"}
    assert skips["gpus"] == "no GPU" and skips["port counters"] == "no RDMA port counters (no RDMA device)"
    assert skips["link flaps"] == "kernel log not readable (journalctl not installed; dmesg not installed)"
    assert main([*args, "--brief"]) == 0
    assert capsys.readouterr().out == "pass: 2 checks passed, 18 skipped\n"


def test_command_exit_codes(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    root = lab_root(tmp_path)
    warn = write_config(tmp_path, interfaces=[{"name": "rdma0", "mtu": 9000}], modules=["ib_core"])
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("ib_core 458752 8 - Live 0x0\n")
    assert main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 0
    # A short link flap in the kernel's log (journalctl on PATH prints it): a warning, exit 1.
    tools = tmp_path / "tools"
    tools.mkdir()
    now = time.time()
    (tools / "journal.txt").write_text(
        line(now - 600, "mlx5_core 0000:42:00.1 rdma0: Link down")
        + line(now - 593, "mlx5_core 0000:42:00.1 rdma0: Link up")
    )
    (tools / "journalctl").write_text(f"#!/bin/sh\nexec /bin/cat '{tools / 'journal.txt'}'\n")
    (tools / "journalctl").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    assert main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "warn: rdma0: 1 short link flap(s) in 24 h (longest 7 s)"
    # As Slurm's Prolog a warning lets the job start (exit 0); Slurm's node is read either way.
    prolog = ["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief", "--slurm-prolog"]
    assert main([*prolog, "--slurm-node", "n1"]) == 0
    assert capsys.readouterr().err == "slurm: node n1 not read (scontrol not installed)\n"
    (root / "sys/class/net/rdma0/carrier").write_text("0\n")
    assert main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == "fail: rdma0: link down (operstate up, carrier 0)"
    # A failing node keeps the job off (non-zero: Slurm requeues the job and leaves the node as the check drained it).
    assert main([*prolog, "--slurm-node", "n1"]) == 2
    assert capsys.readouterr().out == "fail: rdma0: link down (operstate up, carrier 0)\n"
    # A config or a command line it cannot use: 3, never 2 (a scheduler must not drain a node for that).
    bad = tmp_path / "bad.json"
    bad.write_text('{"interfaces": []}')
    assert main(["--config", str(bad), "--brief"]) == EXIT_ERROR
    assert capsys.readouterr().out == "error: config: interfaces must be a non-empty list of {name, address, mtu}\n"
    # As a Prolog, a check that cannot run says so in slurmd's log and lets the job start.
    assert main(["--config", str(bad), "--brief", "--slurm-prolog"]) == 0
    assert capsys.readouterr().out.startswith("error: config: ")
    assert main(["--config", str(tmp_path / "none.json")]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "error"
    with pytest.raises(SystemExit) as exc:
        main(["--no-such-option"])
    assert exc.value.code == 3
    assert main(["--config", str(warn), "--root", str(root), "--only", "gpu,bogus"]) == 3


def test_the_printed_result_is_kept_for_the_metrics_collector(tmp_path: Path, capsys, monkeypatch) -> None:
    """Every run keeps what it printed as <state-dir>/node-check-result.json (rdma-llm-metrics reads it, never
    running the stateful check itself): a result, and the error of a config it cannot use; none where the state
    dir does not exist or is ''."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    state = tmp_path / "state"
    state.mkdir()
    kept = state / RESULT_FILE
    args = ["--config", str(write_config(tmp_path)), "--root", str(lab_root(tmp_path)), "--state-dir", str(state)]
    assert main([*args, "--only", "fabric"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(kept.read_text()) == printed and printed["status"] == "pass"
    assert main([*args, "--only", "fabric", "--brief"]) == 0  # --brief prints one line, keeps the whole result
    assert json.loads(kept.read_text())["checks"] == printed["checks"]
    assert [p.name for p in state.iterdir()] == [RESULT_FILE]  # no temporary file left
    bad = tmp_path / "bad.json"
    bad.write_text('{"interfaces": []}')
    assert main(["--config", str(bad), "--state-dir", str(state), "--brief"]) == EXIT_ERROR
    assert json.loads(kept.read_text()) == {
        "schema": SCHEMA, "status": "error", "exit": EXIT_ERROR,
        "reason": "config: interfaces must be a non-empty list of {name, address, mtu}",
    }  # fmt: skip
    capsys.readouterr()
    gone = tmp_path / "no-such-dir"
    assert main([*args[:4], "--state-dir", str(gone), "--only", "fabric"]) == 0
    assert not gone.exists()
    # Where it cannot be written, the check's verdict stands and stderr says why.
    kept.unlink()
    kept.mkdir()
    assert main([*args, "--only", "fabric", "--brief"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"rdma-node-check: result not kept in {state}: ") and err.count("\n") == 1, err
    assert sorted(p.name for p in state.iterdir()) == [RESULT_FILE]
