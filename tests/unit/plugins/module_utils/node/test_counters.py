"""The NIC counters (plugins/module_utils/node/counters.py) on the recorded H100 node's sysfs, read twice with
counters changed between."""

from __future__ import annotations

import shutil
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import STATE_FILE
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import check

from tests.unit.plugins.module_utils.node.helpers import NOW, FakeTools, bump, counters_run, fake_root, fixture


def test_port_counters_that_grow_between_two_readings_fail(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    first = counters_run(root, state)
    port = next(c for c in first["checks"] if c["check"] == "port counters")
    assert port == check("port counters", "skip", "first reading: 2 port(s) read, kept for the next run")
    assert first["counters"]["ports"]["mlx5_0:1"]["counters"]["port_rcv_errors"] == 14  # the recording's old errors
    assert (state / STATE_FILE).is_file() and first["exit"] == 0
    # Nothing moved: old errors (14 receive errors, 15 buffer overruns) do not fail a node.
    same = counters_run(root, state, now=NOW + 60)
    assert next(c for c in same["checks"] if c["check"] == "port counters")["status"] == "pass", same["checks"]
    # A congestion counter grows (the recording's mlx5 has no CNP counters: out_of_buffer): reported, not judged.
    bump(root, "mlx5_bond_0", "hw_counters", "out_of_buffer", 3)
    busy = counters_run(root, state, now=NOW + 120)
    assert busy["status"] == "pass" and busy["counters"]["deltas"]["mlx5_bond_0:1"]["out_of_buffer"] == 3
    detail = next(c for c in busy["checks"] if c["check"] == "port counters")["detail"]
    assert detail.endswith("(reported: mlx5_bond_0:1 out_of_buffer +3)"), detail
    # An error counter grows: the run fails naming device, port, counter and growth.
    bump(root, "mlx5_0", "counters", "symbol_error", 3)
    bump(root, "mlx5_0", "counters", "link_downed", 1)
    bad = counters_run(root, state, now=NOW + 180)
    assert bad["status"] == "fail" and bad["exit"] == 2
    assert bad["reason"].startswith("mlx5_0 port 1: link_downed +1; mlx5_0 port 1: symbol_error +3 (since "), bad
    # The next run compares with that reading: no new growth, passes again.
    assert counters_run(root, state, now=NOW + 240)["status"] == "pass"


def test_counters_that_went_back_or_another_boot_start_over(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    counters_run(root, state)
    bump(root, "mlx5_0", "counters", "port_rcv_errors", -14)
    reset = next(c for c in counters_run(root, state, now=NOW + 60)["checks"] if c["check"] == "port counters")
    assert reset["status"] == "skip" and "counters went back" in reset["detail"]
    rebooted = fake_root(tmp_path / "again", boot=NOW)
    shutil.copy(state / STATE_FILE, tmp_path / "s2")
    (tmp_path / "state2").mkdir()
    shutil.copy(tmp_path / "s2", tmp_path / "state2" / STATE_FILE)
    bump(rebooted, "mlx5_0", "counters", "symbol_error", 5)
    other = next(c for c in counters_run(rebooted, tmp_path / "state2", now=NOW + 60)["checks"]
                 if c["check"] == "port counters")  # fmt: skip
    assert other["status"] == "skip" and "another boot" in other["detail"]


def test_pause_counters_of_the_nodrop_priority_are_reported(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    (root / "sys/class/net/ib0").mkdir(parents=True)
    off = counters_run(root, state, FakeTools({"ethtool": fixture("ethtool_mlx5_cx4.txt")}))
    pause = next(c for c in off["checks"] if c["check"] == "pause counters")
    assert pause == check("pause counters", "skip", "no per-priority pause counters for priority 3 (driver or PFC off)")
    pfc = fixture("ethtool_mlx5_pfc_prio3.txt")
    counters_run(root, state, FakeTools({"ethtool": pfc}), now=NOW + 60)
    later = pfc.replace("rx_prio3_pause: 41927", "rx_prio3_pause: 42027")
    got = counters_run(root, state, FakeTools({"ethtool": later}), now=NOW + 120)
    detail = next(c for c in got["checks"] if c["check"] == "pause counters")["detail"]
    assert detail.startswith("reported: ib0 rx_prio3_pause 42027 (+100), rx_prio3_pause_duration 8134 (+0)"), detail
    assert got["counters"]["pause"]["ib0"]["tx_prio3_pause"] == 1290418 and got["status"] == "pass"
    missing = counters_run(root, state, FakeTools({}), now=NOW + 180)
    assert next(c for c in missing["checks"] if c["check"] == "pause counters")["detail"] == "ethtool not installed"
