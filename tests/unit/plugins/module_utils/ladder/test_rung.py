"""One rung (ladder/rung.py): its record, its console line, the inventory rung from per-host errors."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import (
    console_line,
    evaluate_host_errors,
    make_rung,
)

from tests.unit.plugins.module_utils.ladder.ladder_helpers import sample_ladder


@pytest.mark.parametrize(
    ("errors", "unreachable", "status", "bad", "in_reason"),
    [
        ({}, {}, "pass", [], "preflight checks passed"),
        ({}, {"n3": "ssh: connect to host 10.77.0.13 port 22: No route to host"}, "fail", ["n3"],
         "n3: unreachable over SSH (ssh: connect to host 10.77.0.13 port 22: No route to host); host checks not run"),
        ({"n1": "fabric interface 'rdma0' does not exist"}, {"n3": "no answer"}, "fail", ["n1", "n3"],
         "n1: fabric interface 'rdma0' does not exist; n3: unreachable over SSH (no answer)"),
        ({}, {"n1": "a", "n2": "b", "n3": "c"}, "fail", ["n1", "n2", "n3"], "n2: unreachable over SSH (b)"),
    ],
)  # fmt: skip
def test_inventory_rung_names_the_unreachable_host(errors, unreachable, status, bad, in_reason) -> None:
    rung = evaluate_host_errors("inventory", errors, ["n1", "n2", "n3"], "preflight checks passed", unreachable)
    assert rung["status"] == status and rung["bad_hosts"] == bad, rung
    assert in_reason in rung["reason"]
    assert rung["value"] == 3 - len(bad) and rung["threshold"] == 3 and rung["unit"] == "hosts"
    ssh = [c for c in rung["checks"] if c["check"] == "ssh"]
    assert sorted(c["host"] for c in ssh) == sorted(unreachable) and all(c["status"] == "fail" for c in ssh)


def test_console_line() -> None:
    line = console_line(sample_ladder(fail=True)[2])
    assert line.startswith("[FAIL] tcp_bw") and "n3" in line and "Gb/s" in line
    assert console_line(make_rung("rdma_bw", "skip", reason="no RDMA device")) == (
        "[SKIP] rdma_bw        — no RDMA device"
    )
    with pytest.raises(ValueError):
        make_rung("x", "ok")
