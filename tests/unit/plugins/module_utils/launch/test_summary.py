"""One collected run read into the report's summary (plugins/module_utils/launch/summary.py): every launch's
manifest, rank 0's lineage, this launch's worker failures and NCCL's transport from the hosts' logs."""

from __future__ import annotations

import json

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import goodput as G
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import summary as Y

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.launch.run_records import RESTART, rec, train


def test_run_accounting_reads_every_launch_manifest(tmp_path) -> None:
    """A failed launch A (steps 1-17, checkpoint at 10) and its resume B: the resume recomputes steps 11-17, the
    run's wall time runs from A's launch to B's end and the time between them is down time."""
    records = [
        rec(100, "start"), train(110, 10), rec(112, "result", status="failed", final_step=17),
        rec(300, "start"), rec(305, "resume", step=10), train(310, 20),
    ]  # fmt: skip
    for launch, (since, until) in {"A": (90, 120), "B": (290, 320)}.items():
        manifest = {"launch_id": launch, "nodes": [], "timings": {"launched_epoch": since, "ended_epoch": until}}
        (tmp_path / f"manifest-{launch}.json").write_text(json.dumps(manifest))
    this = json.loads((tmp_path / "manifest-B.json").read_text())
    launch, run = Y.run_accounting(tmp_path, this, records)
    assert launch["resume_recomputed"] == 7 and launch["productive_s"] == 10.0 and launch["wall_s"] == 30.0
    assert run["launches"] == 2 and run["wall_s"] == 230.0 and run["between_launches_s"] == 170.0
    assert run["productive_s"] == 20.0 and run["steps_recomputed"] == 7


def test_the_restart_after_losing_node_rank_0_is_seen_through_the_survivor() -> None:
    """min_nodes with the rendezvous store elsewhere: n1 (rank 0) is lost for good and not collected; n2 was rank 1
    and is rank 0 of one after the restart. Rank 0's records alone hold one start: no restart. The lineage follows
    n2 back through rank 1."""
    n2 = [
        rec(100, "start", rank=1, world_size=2, local_rank=0),
        train(110, 5, rank=1),
        train(115, 10, rank=1),
        train(120, 15, rank=1),
        rec(160, "start", rank=0, world_size=1, local_rank=0),
        rec(165, "resume", step=10, world_size_before=2),
        train(170, 15),
    ]
    records = [{**r, "host": "n2"} for r in n2]
    lost = [{"host": "n1", "at": 125.0, "why": "unreachable for 45 s"}]
    assert G.restarts([r for r in records if r["rank"] == 0], 100, [], lost) == []
    line = Y.lineage(records)
    assert [(r["kind"], r["rank"]) for r in line][:2] == [("start", 1), ("train", 1)]
    (restart,) = G.restarts(line, 100, [], lost)
    assert restart["cause"] == "n1 lost (unreachable for 45 s)" and restart["resumed_at_step"] == 10, restart
    assert (restart["world_size_before"], restart["world_size_after"], restart["last_step_before"]) == (2, 1, 15)
    # Where rank 0 never moved, the lineage is rank 0's records.
    both = [{**r, "host": "n1", "local_rank": 0} for r in RESTART] + [{**r, "host": "n2", "rank": 1} for r in RESTART]
    assert Y.lineage(both) == [r for r in both if r["host"] == "n1"]


def test_report_says_which_transport_nccl_used_on_each_host(tmp_path) -> None:
    """NCCL's own log on each host (logs/nccl.*.log, recorded formats), judged by the ladder's rules: RDMA where
    the host has RDMA devices, GPUDirect RDMA there; a host without NCCL logs (gloo) is left out."""
    fixtures = ROOT / "tests" / "fixtures" / "validate"
    for host, name in (("n1", "nccl_roce_gdr.txt"), ("n2", "nccl_roce_no_gdr.txt"), ("n3", "nccl_socket.txt")):
        (tmp_path / host / "logs").mkdir(parents=True)
        (tmp_path / host / "logs" / f"nccl.{host}.41.log").write_text((fixtures / name).read_text())
    (tmp_path / "n4" / "logs").mkdir(parents=True)
    rdma = {"devices": ["mlx5_0"], "hca": "mlx5_0"}
    nodes = [{"host": h, "rdma": rdma} for h in ("n1", "n2", "n3", "n4")]
    got = Y.nccl_transport(tmp_path, nodes)
    assert sorted(got) == ["n1", "n2", "n3"]
    status = {h: [(c["check"], c["status"]) for c in t["checks"]] for h, t in got.items()}
    assert status == {
        "n1": [("nccl transport", "pass"), ("gpudirect rdma", "pass")],
        "n2": [("nccl transport", "pass"), ("gpudirect rdma", "fail")],
        "n3": [("nccl transport", "fail")],
    }
    assert got["n1"]["network"] == "IB" and got["n1"]["channels"] == got["n1"]["gdr_channels"] > 0
    lines = R.transport_lines(got)
    assert lines[0].startswith("n1: NCCL 2.") and ": pass" in lines[0] and "FAIL" not in lines[0]
    assert "staged through host memory" in lines[1] and lines[1].endswith("FAIL")
    assert "fell back to TCP sockets" in lines[2]
    # Sockets on a host without RDMA devices are what it has: reported, not failed.
    plain = Y.nccl_transport(tmp_path, [{"host": "n3", "rdma": {"devices": []}}])
    assert [c["status"] for c in plain["n3"]["checks"]] == ["skip"]
    # Nor where the user chose TCP (train_launch_allow_tcp: devices, but no HCA given to NCCL).
    chosen = Y.nccl_transport(tmp_path, [{"host": "n3", "rdma": {"devices": ["mlx5_0"], "hca": None}}])
    assert [c["status"] for c in chosen["n3"]["checks"]] == ["skip"]


def test_report_reads_worker_failures_of_this_launch_only(tmp_path) -> None:
    logs = tmp_path / "n2" / "logs"
    logs.mkdir(parents=True)
    # torchrun 2.13's line (recorded in the lab): glog prefix with the UTC month-day and time, no year.
    line = "E1122 20:00:0{} 9 api.py:1002] failed (exitcode: {}) local_rank: 0 (pid: {}) of binary: /venv/bin/python"
    (logs / "torchrun.log").write_text(
        "=== launch A ===\n" + line.format("0.1", 1, 5) + "\n=== launch B ===\n" + line.format("1.5", -9, 7) + "\n"
    )
    nodes = [{"host": "n1"}, {"host": "n2"}]
    near = 1795377600.0  # 2026-11-22 20:00:00 UTC
    (got,) = Y.worker_failures(tmp_path, nodes, "B", near)
    assert got["host"] == "n2" and got["text"] == "local rank 0 killed by SIGKILL" and got["pid"] == 7
    assert got["time"] == pytest.approx(near + 1.5)
    assert [f["text"] for f in Y.worker_failures(tmp_path, nodes, "A")] == ["local rank 0 exit code 1"]
    assert Y.worker_failures(tmp_path, nodes, "A")[0]["time"] is None  # no epoch to take the year from
