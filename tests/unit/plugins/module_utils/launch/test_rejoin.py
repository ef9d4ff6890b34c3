"""A host's share after a reboot (plugins/module_utils/launch/rejoin.py): the unit file's command line words, the
rejoin unit, and its condition script run by sh."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import rejoin as U


def test_systemd_quote_keeps_each_word_whole() -> None:
    assert U.systemd_quote("--setenv=A=b c") == '"--setenv=A=b c"'
    # A specifier (%), a variable ($), a quote and a backslash reach the process as written.
    assert U.systemd_quote('50% of $HOME "x" \\y') == '"50%% of $$HOME \\"x\\" \\\\y"'
    with pytest.raises(RuleError, match="line break"):
        U.systemd_quote("a\nExecStartPost=/bin/rm -rf /")


def test_rejoin_unit_runs_the_same_command_line_at_the_next_boot_when_its_check_allows() -> None:
    argv = ["systemd-run", "--unit=train-r1", "--setenv=NCCL_IB_HCA=mlx5_0", "--", "/v/bin/torchrun", "--nnodes=2"]
    text = U.rejoin_unit_text(argv, "r1", "1", "/var/lib/rdma-llm/runs/r1/logs/torchrun.log", "/r/r1/rejoin-check")
    lines = text.splitlines()
    assert (
        'ExecStart=systemd-run "--unit=train-r1" "--setenv=NCCL_IB_HCA=mlx5_0" "--" "/v/bin/torchrun" "--nnodes=2"'
        in lines
    )
    # Nothing starts unless the check allows it; the rejoin is marked in the job's log, which gets its output.
    assert 'ExecCondition=/bin/sh "/r/r1/rejoin-check"' in lines
    assert any(x.startswith("ExecStartPre=/bin/sh -c") and "(node rank 1)" in x for x in lines), text
    assert "StandardOutput=append:/var/lib/rdma-llm/runs/r1/logs/torchrun.log" in lines
    # Started by the boot (enabled), once (oneshot), after the network (torchrun reaches the store over it).
    assert {"Type=oneshot", "WantedBy=multi-user.target", "After=network-online.target"} <= set(lines)
    assert U.rejoin_unit_name("train-r1") == "train-r1-rejoin.service"
    with pytest.raises(RuleError, match="plain executable"):
        U.rejoin_unit_text(["-/bin/sh", "x"], "r1", 0, "/l", "/c")


@pytest.mark.parametrize(
    ("until", "seen_ago", "listening", "rc", "said"),
    [
        (4102444800, 5, True, 0, ""),  # soon after the watch's last read, the store answers: rejoin
        (1000000000, 5, True, 1, "the launch's deadline has passed"),
        (4102444800, 300, True, 1, "the watch last read this host"),  # counted lost, or the run ended
        (4102444800, None, True, 1, "no watch read this host"),
        (4102444800, 5, False, 1, "does not answer (the run has ended)"),
    ],
)
def test_rejoin_check_runs_in_sh(tmp_path, until, seen_ago, listening, rc, said) -> None:
    """The rejoin unit's condition as the host runs it: sh, the venv's python probing the store."""
    import socket

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    if seen_ago is not None:
        (run / "logs" / ".watched").touch()
        os.utime(run / "logs" / ".watched", (time.time() - seen_ago,) * 2)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    if listening:
        server.listen()
    else:
        server.close()
    try:
        script = U.rejoin_check(str(run), until, 60, "127.0.0.1", port, sys.executable, wait=2)
        (run / "rejoin-check").write_text(script)
        proc = subprocess.run(["sh", str(run / "rejoin-check")], capture_output=True, text=True, timeout=30)
    finally:
        server.close()
    assert proc.returncode == rc and said in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
