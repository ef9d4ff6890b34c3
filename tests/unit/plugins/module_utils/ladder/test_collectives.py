"""The ladder's collective rungs (ladder/collectives.py): all-reduce and the transport NCCL's log proves, the
collectives beyond it and the bisection that names a slow node (files/probe.py on the nodes), nccl-tests."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import units
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.collectives import (
    COLLECTIVES,
    collective_floors,
    evaluate_allreduce,
    evaluate_collectives,
    evaluate_nccl_tests,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import check

from tests.conftest import ROOT, load_script
from tests.unit.plugins.module_utils.ladder.ladder_helpers import FIX, fixture

PROBE_PY = ROOT / "roles" / "cluster_validate" / "files" / "probe.py"
probe = load_script(PROBE_PY)


# ------------------------------------------------------------------------------------------- what each rank gets


def _deliver(name: str, sends: list[list[float]]) -> list[list[float]]:
    """What each rank receives, per chunk, by the collective's definition (MPI's / NCCL's semantics)."""
    n = len(sends)
    if name == "all_reduce":
        return [[sum(s[0] for s in sends)] for _ in range(n)]
    if name == "all_gather":
        return [[s[0] for s in sends] for _ in range(n)]
    if name == "reduce_scatter":
        return [[sum(s[j] for s in sends)] for j in range(n)]
    return [[sends[i][j] for i in range(n)] for j in range(n)]  # all_to_all: chunk i of rank j is rank i's chunk j


@pytest.mark.parametrize("name", probe.BUS_FACTOR)
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_each_rank_expects_what_the_collective_delivers(name: str, n: int) -> None:
    sends = [probe.chunk_values(name, r, n)[0] for r in range(n)]
    got = _deliver(name, sends)
    for rank in range(n):
        assert got[rank] == probe.chunk_values(name, rank, n)[1], (name, n, rank)
    # A chunk delivered to the wrong rank or place is seen: every rank expects something of its own.
    if n > 1 and name != "all_reduce" and name != "all_gather":
        assert len({tuple(probe.chunk_values(name, r, n)[1]) for r in range(n)}) == n


def test_bus_factors_are_nccl_tests() -> None:
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n.
    assert probe.BUS_FACTOR["all_reduce"](8) == 1.75 and probe.BUS_FACTOR["all_gather"](8) == 0.875
    assert probe.BUS_FACTOR["reduce_scatter"](4) == 0.75 and probe.BUS_FACTOR["all_to_all"](2) == 0.5
    assert set(probe.BUS_FACTOR) == set(COLLECTIVES)


# ------------------------------------------------------------------------------------------- bisection


def _fake_fabric(slow_ranks: set[int], fast=10.0, slow=1.0, full_only=False):
    """run_round for bisect(): a group is slow where it holds a slow rank (or, full_only, never alone). Records
    the rounds' groups."""
    seen = []

    def run_round(groups):
        seen.append(groups)
        flat = [r for g in groups for r in g]
        assert len(flat) == len(set(flat)), f"groups of one round share a node: {groups}"
        assert all(len(g) >= 2 for g in groups), groups
        return [fast if full_only or not (set(g) & slow_ranks) else slow for g in groups]

    return run_round, seen


@pytest.mark.parametrize("world", range(3, 17))
def test_bisection_names_any_slow_node_in_log2_rounds(world: int) -> None:
    for bad in range(world):
        run_round, seen = _fake_fabric({bad})
        got = probe.bisect(world, run_round, floor=5.0)
        assert got["suspects"] == [bad] and got["reason"] == "", (world, bad, got)
        assert len(got["rounds"]) == len(seen) <= math.ceil(math.log2(world)), (world, bad, got["rounds"])
        assert all(g["slow"] == (bad in g["group"]) for r in got["rounds"] for g in r)


def test_bisection_says_why_it_cannot_name_one_node() -> None:
    # Two nodes: a half of one has nobody to pair with.
    run_round, seen = _fake_fabric({1})
    assert probe.bisect(2, run_round, 5.0) == {"suspects": [0, 1], "rounds": [], "reason": "too few nodes to halve"}
    assert seen == []
    # A slow node in each half.
    got = probe.bisect(8, _fake_fabric({1, 6})[0], 5.0)
    assert got["reason"] == "both halves are slow alone: more than one slow node" and got["suspects"] == list(range(8))
    # Each half fast alone: the fabric between them (a switch uplink), not a node.
    got = probe.bisect(8, _fake_fabric(set(), full_only=True)[0], 5.0)
    assert got["reason"].startswith("each half is fast alone") and len(got["rounds"]) == 1


def test_bisection_halves_borrow_a_node_outside_the_suspects() -> None:
    assert probe.bisect_halves(4, [2, 3]) == [([2], [0, 2]), ([3], [1, 3])]
    assert probe.bisect_halves(3, [0, 1]) == [([0], [0, 2]), ([1], None)]
    assert probe.bisect_halves(3, [0, 1, 2]) == [([0, 1], [0, 1]), ([2], None)]
    # Untested half: decided by elimination (the whole set was slow).
    assert probe.bisect_next([([0], [0, 2]), ([1], None)], [False, None]) == ([1], "")
    assert probe.bisect_next([([0], [0, 2]), ([1], None)], [True, None]) == ([0], "")
    assert probe.bisect_next([([0, 1], [0, 1]), ([2], None)], [False, None]) == ([2], "")


# ------------------------------------------------------------------------------------------- the rungs

SWEEP = [{"bytes": 1 << 20, "algbw_gbps": 4.0, "busbw_gbps": 3.0, "correct": True},
         {"bytes": 1 << 25, "algbw_gbps": 8.0, "busbw_gbps": 6.0, "correct": True}]  # fmt: skip


def _outputs(world=4, bisection=None, wrong=None, **sweeps):
    hosts = [f"n{i + 1}" for i in range(world)]
    colls = {"all_reduce": SWEEP, "all_gather": SWEEP, "reduce_scatter": SWEEP, "all_to_all": SWEEP} | sweeps
    out = {h: {"ok": True, "rank": i, "world": world, "backend": "gloo", "wrong": {}} for i, h in enumerate(hosts)}
    out["n1"] |= {"collectives": colls}
    if bisection:
        out["n1"]["bisection"] = bisection
    for host, per in (wrong or {}).items():
        out[host]["wrong"] = per
    return out


SLOW = [{"bytes": 1 << 20, "algbw_gbps": 0.2, "busbw_gbps": 0.1, "correct": True},
        {"bytes": 1 << 25, "algbw_gbps": 0.4, "busbw_gbps": 0.3, "correct": True}]  # fmt: skip


def _bisected(collective, suspects, reason=""):
    rounds = [
        [{"group": [0, 1], "busbw_gbps": 6.0, "slow": False}, {"group": [2, 3], "busbw_gbps": 0.3, "slow": True}],
        [{"group": [0, 2], "busbw_gbps": 6.1, "slow": False}, {"group": [1, 3], "busbw_gbps": 0.2, "slow": True}],
    ]
    return {"collective": collective, "bytes": 1 << 25, "floor_gbps": 5.0, "suspects": suspects, "rounds": rounds,
            "reason": reason}  # fmt: skip


def test_floors_from_the_line_rate_or_the_inventory() -> None:
    assert collective_floors({"a": 25.0, "b": 100.0}, 0.7)["all_to_all"] == 17.5
    assert set(collective_floors({"a": None}, 0.7).values()) == {None}
    floors = collective_floors({"a": None}, 0.7, {"all_gather": 300})
    assert floors == {"all_reduce": None, "all_gather": 300.0, "reduce_scatter": None, "all_to_all": None}
    with pytest.raises(RuleError, match=r"cluster_validate_collective_floor_gbps.all_to_all: '1; reload'"):
        collective_floors({}, 0.7, {"all_to_all": "1; reload"})
    with pytest.raises(RuleError, match="all_gather: 0 is not"):
        collective_floors({}, 0.7, {"all_gather": 0})


def test_collectives_rung_passes_and_reports_each_busbw() -> None:
    rung = evaluate_collectives(_outputs(), {"n1": 10.0, "n2": 10.0}, 0.5)
    assert rung["status"] == "pass" and rung["value"] == 6.0 and rung["threshold"] == 5.0, rung
    assert rung["reason"].startswith("all_gather 6, reduce_scatter 6, all_to_all 6 Gb/s busbw, gloo over 4 ranks")
    assert set(rung["sweeps"]) == {"all_gather", "reduce_scatter", "all_to_all"}
    unknown = evaluate_collectives(_outputs(), {"n1": None}, 0.5)
    assert unknown["status"] == "pass" and unknown["threshold"] is None and "link speed unknown" in unknown["reason"]
    only = _outputs()
    only["n1"]["collectives"] = {"all_reduce": SWEEP}
    assert evaluate_collectives(only, {}, 0.5)["status"] == "skip"
    dead = evaluate_collectives({"n1": {"error": "timeout"}, "n2": {"ok": True, "rank": 1}}, {})
    assert dead["status"] == "fail" and dead["bad_hosts"] == ["n1"]


def test_a_slow_collective_is_bisected_to_the_node() -> None:
    out = _outputs(all_to_all=SLOW, bisection=_bisected("all_to_all", [3]))
    rung = evaluate_collectives(out, {"n1": 10.0}, 0.5)
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n4"] and rung["suspects"] == ["n4"], rung
    assert rung["reason"] == (
        "all_to_all busbw 0.3 Gb/s < 5 (50% of the slowest link); bisection names n4 (2 round(s): n1+n2 6 | "
        "n3+n4 0.3 slow; n1+n3 6.1 | n2+n4 0.2 slow, floor 5 Gb/s)"
    )
    # The all-reduce rung is not the one bisected: it passes.
    assert evaluate_allreduce(out, {"n1": 10.0}, 0.5)["status"] == "pass"
    # The inventory's floor: a slow all-gather under it fails where the line rate is unknown.
    floor = evaluate_collectives(_outputs(all_gather=SLOW), {"n1": None}, 0.5, {"all_gather": 1.0})
    assert floor["status"] == "fail" and floor["reason"].startswith("all_gather busbw 0.3 Gb/s < 1 (the inventory's")
    assert floor["bad_hosts"] == []  # nothing bisected: nobody named


def test_a_slow_allreduce_names_the_bisected_node_or_says_why_not() -> None:
    out = _outputs(all_reduce=SLOW, bisection=_bisected("all_reduce", [2]))
    rung = evaluate_allreduce(out, {"n1": 10.0}, 0.5)
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n3"] and "bisection names n3" in rung["reason"], rung
    two = _outputs(all_reduce=SLOW, bisection=_bisected("all_reduce", [0, 1, 2, 3], "both halves are slow alone: x"))
    rung = evaluate_allreduce(two, {"n1": 10.0}, 0.5)
    assert rung["status"] == "fail" and rung["bad_hosts"] == [], rung
    assert "bisection could not name one node: both halves are slow alone: x; suspects n1, n2, n3, n4" in rung["reason"]


def test_a_wrong_result_of_any_collective_names_the_rank() -> None:
    bad = [dict(SWEEP[0]), dict(SWEEP[1], correct=False)]
    out = _outputs(reduce_scatter=bad, wrong={"n3": {"reduce_scatter": [1 << 25]}})
    rung = evaluate_collectives(out, {}, 0.5)
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n3"], rung
    assert rung["reason"] == "wrong reduce_scatter result at 33554432 bytes on n3"
    assert rung["checks"] == [check("n3", "reduce_scatter result", "fail", "wrong result at [33554432] bytes")]


def test_allreduce_rung() -> None:
    results = [
        {"bytes": 1 << 20, "algbw_gbps": 2.0, "busbw_gbps": 2.67, "correct": True},
        {"bytes": 1 << 24, "algbw_gbps": 6.0, "busbw_gbps": 8.0, "correct": True},
    ]
    out = {
        "n1": {"ok": True, "rank": 0, "world": 3, "backend": "gloo", "collectives": {"all_reduce": results}},
        "n2": {"ok": True, "rank": 1},
    }
    unknown = evaluate_allreduce(out, {"n1": None, "n2": None})
    assert unknown["status"] == "pass" and unknown["threshold"] is None and units.NO_SPEED in unknown["reason"]
    slow = evaluate_allreduce(out, {"n1": 25.0, "n2": 25.0}, 0.7)
    assert slow["status"] == "fail" and slow["threshold"] == 17.5 and slow["value"] == 8.0
    dead = evaluate_allreduce({"n1": {"error": "n2 did not join"}, "n2": {}}, {})
    assert dead["status"] == "fail" and dead["bad_hosts"] == ["n1", "n2"]


def test_allreduce_rung_fails_a_wrong_result_naming_the_rank() -> None:
    results = [
        {"bytes": 1 << 20, "algbw_gbps": 2.0, "busbw_gbps": 2.67, "correct": True},
        {"bytes": 1 << 24, "algbw_gbps": 6.0, "busbw_gbps": 8.0, "correct": True},
    ]
    out = {
        "n1": {
            "ok": True,
            "rank": 0,
            "world": 2,
            "backend": "gloo",
            "collectives": {"all_reduce": results},
            "wrong": {},
        },
        "n2": {"ok": True, "rank": 1, "wrong": {"all_reduce": [1 << 24]}},
    }
    # Fast, and wrong on rank 1: the rung fails and names that node, whatever the bandwidth.
    rung = evaluate_allreduce(out, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["reason"] == "wrong all-reduce result at 16777216 bytes on n2"
    assert rung["bad_hosts"] == ["n2"] and rung["checks"][-1]["check"] == "allreduce result"
    # Rank 0's own result wrong (its sweep says so).
    out["n2"]["wrong"] = {}
    results[0]["correct"] = False
    rung = evaluate_allreduce(out, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["reason"] == "wrong all-reduce result at 1048576 bytes"


# ------------------------------------------------------------------------------------------- the probe itself


def run_probe_ranks(script: str, modes: list[str], *argv: str) -> dict:
    """files/probe.py allreduce on len(modes) gloo ranks on loopback, rank r run by `script` (which loads the probe
    from its first argument) in mode modes[r]; {"n1": rank 0's JSON, ...}."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    common = ["--world", str(len(modes)), "--master", "127.0.0.1", "--port", str(port), "--ifname", "lo",
              "--backend", "gloo", *argv]  # fmt: skip
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                str(PROBE_PY),
                mode,
                "allreduce",
                "--rank",
                str(rank),
                *common,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, mode in enumerate(modes)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    return {f"n{rank + 1}": json.loads(out.strip().splitlines()[-1]) for rank, (out, _) in enumerate(outs)}


# Run the probe's all-reduce as the ladder does, two ranks over gloo on loopback; `corrupt` makes one rank's
# all-reduce return a wrong sum (the reduction ran, then one element set per call goes off by one).
CORRUPT_RANK = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("probe", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
if sys.argv[2] == "corrupt":
    import torch.distributed as dist
    real = dist.all_reduce
    def all_reduce(tensor, *args, **kwargs):
        work = real(tensor, *args, **kwargs)
        tensor[-1] += 1.0
        return work
    dist.all_reduce = all_reduce
raise SystemExit(probe.main(sys.argv[3:]))
"""


def _two_ranks(corrupt_rank: int | None) -> dict:
    modes = ["corrupt" if rank == corrupt_rank else "-" for rank in (0, 1)]
    return run_probe_ranks(CORRUPT_RANK, modes, "--sizes", "4096,65536", "--iters", "2", "--timeout", "60")


def test_allreduce_probe_checks_the_result_on_every_rank() -> None:
    pytest.importorskip("torch")
    good = _two_ranks(None)
    assert good["n1"]["ok"] and good["n1"]["wrong"] == {} and good["n2"]["wrong"] == {}, good
    assert [r["correct"] for r in good["n1"]["collectives"]["all_reduce"]] == [True, True]
    assert evaluate_allreduce(good, {"n1": None, "n2": None})["status"] == "pass"
    # Rank 1 gets a wrong sum: rank 0's result is right, so only rank 1's own check can see it.
    bad = _two_ranks(1)
    assert [r["correct"] for r in bad["n1"]["collectives"]["all_reduce"]] == [True, True], bad
    assert bad["n2"]["wrong"] == {"all_reduce": [4096, 65536]}, bad
    rung = evaluate_allreduce(bad, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"], rung
    assert rung["reason"] == "wrong all-reduce result at 4096, 65536 bytes on n2"
    assert probe.allreduce_expected(3) == 6  # 1 + 2 + 3


# One rank of the probe as the ladder runs it; `slow` makes every collective of that rank take 0.5 s longer
# (a node on a bad link or a throttled GPU, as its peers see it).
SLOW_RANK = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("probe", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
if sys.argv[2] == "slow":
    import torch.distributed as dist
    def slowed(real):
        def call(*args, **kwargs):
            time.sleep(0.5)
            return real(*args, **kwargs)
        return call
    for name in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"):
        setattr(dist, name, slowed(getattr(dist, name)))
raise SystemExit(probe.main(sys.argv[3:]))
"""


def _ranks(world: int, slow_rank: int | None, *extra: str) -> dict:
    modes = ["slow" if rank == slow_rank else "-" for rank in range(world)]
    return run_probe_ranks(SLOW_RANK, modes, "--sizes", "65536", "--iters", "2", "--timeout", "120", *extra)


def test_probe_measures_every_collective_and_bisects_to_the_slow_rank() -> None:
    """Three ranks over gloo on loopback, rank 1 slowed: every collective is right on every rank, each is below
    the floor (0.01 Gb/s: 64 KiB in 52 ms; the slowed calls take 0.5 s, loopback well under 1 ms, wide both
    ways because CI's loaded machine once took over 10 ms), and the probe's bisection names rank 1 in two rounds
    (0+1 slow, then 0 with the borrowed 2 fast)."""
    pytest.importorskip("torch")
    floors = [f"--floor={c}=0.01" for c in COLLECTIVES]
    out = _ranks(3, 1, "--collectives", ",".join(COLLECTIVES), *floors)
    assert all(o["ok"] and o["wrong"] == {} for o in out.values()), out
    sweeps = out["n1"]["collectives"]
    assert set(sweeps) == set(COLLECTIVES) and all(s[0]["correct"] for s in sweeps.values()), sweeps
    assert all(s[0]["busbw_gbps"] < 0.01 for s in sweeps.values()), sweeps
    b = out["n1"]["bisection"]
    assert b["collective"] == "all_reduce" and b["suspects"] == [1] and b["reason"] == "", b
    assert [[g["group"] for g in r] for r in b["rounds"]] == [[[0, 1]], [[0, 2]]], b["rounds"]
    assert [[g["slow"] for g in r] for r in b["rounds"]] == [[True], [False]], b["rounds"]
    floor = {c: 0.01 for c in COLLECTIVES}
    rung = evaluate_allreduce(out, {"n1": None}, 0.7, floors=floor)
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"] and "bisection names n2" in rung["reason"], rung
    coll = evaluate_collectives(out, {"n1": None}, 0.7, floor)
    assert coll["status"] == "fail" and coll["world"] == 3, coll


def test_probe_without_a_slow_rank_does_not_bisect() -> None:
    """A floor no healthy loopback misses, even on a loaded machine (0.001 Gb/s: 64 KiB in 0.5 s; CI once saw
    a 0.05 floor missed under load): nothing is below it, so nothing is bisected."""
    pytest.importorskip("torch")
    out = _ranks(2, None, "--collectives", ",".join(COLLECTIVES), "--floor=all_reduce=0.001")
    assert all(o["ok"] and o["wrong"] == {} for o in out.values()), out
    assert "bisection" not in out["n1"] and "results" not in out["n1"], out["n1"]
    rung = evaluate_collectives(out, {"n1": None}, 0.7)
    assert rung["status"] == "pass" and rung["value"] > 0.001, rung


def test_report_shows_each_sweep_and_the_bisection() -> None:
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import report
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder

    rung = evaluate_collectives(_outputs(all_to_all=SLOW, bisection=_bisected("all_to_all", [3])), {"n1": 10.0}, 0.5)
    md = report.markdown(ladder.verdict([rung], ["n1", "n2", "n3", "n4"], cluster="lab"))
    assert "| all_to_all | 33554432 | 0.4 | 0.3 | True |" in md and "| all_gather | 1048576 | 4 | 3 | True |" in md
    assert "Bisection of all_to_all at 33554432 bytes (floor 5 Gb/s): suspects n4" in md


# ------------------------------------------------------------------------------------------- NCCL's transport


def _nccl(name: str) -> list[str]:
    return fixture(name).splitlines()


def test_parse_nccl_log_roce_with_gpudirect() -> None:
    p = nccl.parse_nccl_log(_nccl("nccl_roce_gdr.txt"))
    assert p["version"] == "2.27.5+cuda12.9" and p["network"] == "IB" and p["devices"] == ["mlx5_0:1/RoCE"]
    assert p["gdr_hca"] == {"mlx5_0": "enabled (nvidia-peermem)"}
    assert p["gdr_gpu"] == [("enabled", "distance 4 <= 5")]
    assert (p["channels"], p["gdr_channels"], p["socket_channels"], p["no_device"]) == (4, 4, 0, False)


def test_parse_nccl_log_fallbacks() -> None:
    staged = nccl.parse_nccl_log(_nccl("nccl_roce_no_gdr.txt"))
    assert staged["gdr_hca"] == {"mlx5_0": "disabled"} and (staged["channels"], staged["gdr_channels"]) == (4, 0)
    sock = nccl.parse_nccl_log(_nccl("nccl_socket.txt"))
    assert sock["network"] == "Socket" and sock["no_device"] and sock["socket_channels"] == 2
    pxn = nccl.parse_nccl_log(_nccl("nccl_ib_pxn_dmabuf.txt"))
    assert pxn["devices"] == ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/IB", "mlx5_3:1/IB"]
    assert pxn["gdr_hca"]["mlx5_3"] == "enabled (DMABUF)" and (pxn["channels"], pxn["gdr_channels"]) == (2, 2)
    assert nccl.parse_nccl_log([]) == nccl.parse_nccl_log(None) and nccl.parse_nccl_log([])["network"] is None


GPU_NODE = {"devices": ["mlx5_0"], "gpus": 0}  # NCCL ran: GPUDirect RDMA applies whatever gpus_per_node says


RESULTS = [{"bytes": 1 << 25, "algbw_gbps": 150.0, "busbw_gbps": 150.0, "correct": True}]


def _nccl_outputs(log1: str, log2: str) -> dict:
    return {
        "n1": {
            "ok": True,
            "rank": 0,
            "world": 2,
            "backend": "nccl",
            "collectives": {"all_reduce": RESULTS},
            "nccl_log": _nccl(log1),
        },
        "n2": {"ok": True, "rank": 1, "world": 2, "backend": "nccl", "nccl_log": _nccl(log2)},
    }


def test_allreduce_proves_rdma_and_gpudirect_from_nccls_log() -> None:
    speeds = {"n1": 200.0, "n2": 200.0}
    good = evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_gdr.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE})  # fmt: skip
    assert good["status"] == "pass", good["reason"]
    assert good["reason"].endswith("NCCL 2.27.5+cuda12.9 over IB (mlx5_0:1/RoCE), GPUDirect RDMA on every node"), good[
        "reason"
    ]
    assert good["transport"]["n1"]["gdr_channels"] == 4
    # One node without a peer-memory module: staged through host memory, named, even above the threshold.
    staged = evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_no_gdr.txt"), speeds, 0.7,
                                   expect={"n1": GPU_NODE, "n2": GPU_NODE})  # fmt: skip
    assert staged["status"] == "fail" and staged["bad_hosts"] == ["n2"]
    assert staged["reason"] == (
        "n2: 4 of 4 network channel(s) staged through host memory (no GDRDMA); "
        "GPU Direct RDMA disabled for HCA mlx5_0 (no peer-memory module: nvidia_peermem)"
    )
    # ... reported only with cluster_validate_gpudirect false.
    told = evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_no_gdr.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE}, require_gdr=False)  # fmt: skip
    assert told["status"] == "pass" and told["reason"].endswith("without GPUDirect RDMA on n2")
    # The silent fall-back to TCP fails whatever the bandwidth.
    sock = evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_socket.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE}, require_gdr=False)  # fmt: skip
    assert sock["status"] == "fail" and sock["bad_hosts"] == ["n2"]
    assert "n2: NCCL fell back to TCP sockets, not RDMA (NET/IB found no device)" in sock["reason"]


def test_allreduce_transport_where_no_rdma_is_expected_or_nothing_was_logged() -> None:
    no_rdma = {"devices": [], "gpus": 0}
    out = _nccl_outputs("nccl_socket.txt", "nccl_socket.txt")
    rung = evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": no_rdma, "n2": no_rdma})
    assert rung["status"] == "pass" and "over Socket" in rung["reason"]
    assert {c["status"] for c in rung["checks"]} == {"skip"}
    # cluster_rdma_devices left empty, but NCCL was given an HCA (the endpoint node_health found): sockets fail.
    out["n2"]["nccl_ib_hca"] = "=mlx5_0:1"
    given = evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": no_rdma, "n2": no_rdma})
    assert given["status"] == "fail" and given["bad_hosts"] == ["n2"] and "fell back to TCP" in given["reason"]
    for o in out.values():
        o["nccl_log"] = []
    quiet = evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": GPU_NODE, "n2": GPU_NODE})
    assert quiet["status"] == "pass" and quiet["reason"].endswith("; NCCL's log does not show its transport")
    assert {c["detail"] for c in quiet["checks"]} == {
        "NCCL's log does not show its transport",
        "NCCL's log does not show GPUDirect RDMA",
    }
    # A rank that failed still has its transport judged, and both are named.
    out = _nccl_outputs("nccl_roce_gdr.txt", "nccl_socket.txt")
    out["n1"] = {
        "ok": False,
        "rank": 0,
        "error": "DistBackendError: NCCL error",
        "nccl_log": _nccl("nccl_roce_gdr.txt"),
    }
    dead = evaluate_allreduce(out, {}, expect={"n1": GPU_NODE, "n2": GPU_NODE})
    assert dead["status"] == "fail" and dead["bad_hosts"] == ["n1", "n2"] and "fell back to TCP" in dead["reason"]


def test_allreduce_probe_env_and_log(tmp_path: Path) -> None:
    """The probe's NCCL settings (rdma_stack_nccl_env's, given by the controller) and the log lines it hands back."""
    args = probe.parser().parse_args(
        [
            "allreduce",
            "--rank=0",
            "--world=2",
            "--master=10.0.0.1",
            "--port=1",
            "--ifname=ens192",
            "--env=NCCL_IB_HCA==mlx5_0:1",
            "--env=NCCL_IB_GID_INDEX=3",
            "--env=NCCL_IB_TC=106",
        ]
    )
    assert probe.nccl_env(args) == {"NCCL_IB_TC": "106", "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3"}
    noise = ["ubunturdma1:1:1 [0] NCCL INFO cudaDriverVersion 12090", "ubunturdma1:1:1 [0] NCCL INFO comm 0x5 rank 0"]
    (tmp_path / "nccl.ubunturdma1.41327").write_text("\n".join(noise + _nccl("nccl_roce_gdr.txt")) + "\n")
    kept = probe.nccl_log(tmp_path)
    assert nccl.parse_nccl_log(kept) == nccl.parse_nccl_log(_nccl("nccl_roce_gdr.txt"))
    assert not any("cudaDriverVersion" in line for line in kept)


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("nccl_*.txt")))
def test_probe_keeps_every_nccl_line_the_parser_reads(name: str, tmp_path: Path) -> None:
    """The probe sends the controller only the lines its NCCL_LINE matches; the parser (rdma_stack's) must find
    in them all it finds in the whole log, for every recorded log: the two sets of patterns cannot drift."""
    (tmp_path / "nccl.host.1").write_text(fixture(name))
    assert nccl.parse_nccl_log(probe.nccl_log(tmp_path)) == nccl.parse_nccl_log(_nccl(name))


# ------------------------------------------------------------------------------------------- nccl-tests

NCCL_TESTS = (ROOT / "tests" / "fixtures" / "validate" / "nccl_tests_all_reduce_8gpu.txt").read_text()


def test_nccl_tests_output_is_read_in_gbps() -> None:
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers

    parsed = parsers.parse_nccl_tests(NCCL_TESTS)
    assert parsed["gpus"] == 8 and len(parsed["rows"]) == 11 and parsed["avg_busbw_gbps"] == 2187.3
    # 1 GiB: the better of out-of-place 427.24 and in-place 427.40 GB/s, in Gb/s.
    assert parsed["rows"][-1] == {"bytes": 1 << 30, "busbw_gbps": 3419.2, "wrong": 0}
    labelled = (
        " 0:   4294967296      33554432     float    none      -1    44904   95.65   92.66      0    44867   95.73   "
    )
    labelled += "92.74      3"
    assert parsers.parse_nccl_tests(labelled)["rows"] == [{"bytes": 1 << 32, "busbw_gbps": 741.92, "wrong": 3}]
    assert parsers.parse_nccl_tests("all_reduce_perf: error while loading shared libraries: libnccl.so.2") is None


def _fake_nccl_tests(bin_dir, busbw: float = 427.24, wrong: int = 0) -> None:
    """A stand-in for nccl-tests' binaries that prints the recorded layout (its arguments echoed in a comment)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    recorded = "  4398.1  244.14  427.24      0   4396.5  244.23  427.40      0"
    text = NCCL_TESTS.replace(
        recorded, f"  4398.1  244.14  {busbw:.2f}      {wrong}   4396.5  244.23  {busbw:.2f}      0"
    )
    for name in probe.NCCL_TESTS.values():
        path = bin_dir / name
        path.write_text("#!/bin/sh\necho \"# args: $*\"\ncat <<'OUT'\n" + text + "OUT\n")
        path.chmod(0o755)


def test_probe_runs_nccl_tests_where_installed(tmp_path) -> None:
    args = ["nccl_tests", "--gpus", "8", "--collectives", "all_reduce,all_to_all"]
    assert probe.nccl_tests(probe.parser().parse_args([*args[:2], "1"]))["skipped"].startswith("1 GPU(s)")
    missing = probe.nccl_tests(probe.parser().parse_args([*args, "--bin-dir", str(tmp_path / "none")]))
    assert missing["skipped"].startswith("nccl-tests not installed") and str(tmp_path / "none") in missing["skipped"]
    _fake_nccl_tests(tmp_path / "bin")
    out = probe.nccl_tests(probe.parser().parse_args([*args, "--bin-dir", str(tmp_path / "bin")]))
    assert sorted(out["outputs"]) == ["all_reduce", "all_to_all"] and out["gpus"] == 8
    assert out["outputs"]["all_to_all"]["stdout"].startswith("# args: -b 1M -e 1G -f 2 -g 8\n")
    assert evaluate_nccl_tests({"n1": out, "n2": out})["status"] == "pass"


def test_nccl_tests_rung_names_the_slow_or_wrong_node(tmp_path) -> None:
    def run(busbw=427.24, wrong=0):
        d = tmp_path / f"bin-{busbw}-{wrong}"
        _fake_nccl_tests(d, busbw, wrong)
        return probe.nccl_tests(probe.parser().parse_args(["nccl_tests", "--gpus", "8", "--bin-dir", str(d)]))

    good, slow = run(), run(busbw=150.0)
    rung = evaluate_nccl_tests({"n1": good, "n2": slow, "n3": good}, 0.0, 0.5)
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"], rung
    assert rung["reason"] == "n2: all_reduce busbw 1200 Gb/s < 50% of the best node (3417.92)"
    floor = evaluate_nccl_tests({"n1": good}, 3600.0, 0.5)
    assert floor["status"] == "fail" and "< 3600 (the inventory's floor)" in floor["reason"]
    bad = evaluate_nccl_tests({"n1": run(wrong=2)}, 0.0, 0.5)
    assert bad["status"] == "fail" and bad["reason"] == "n1: 2 wrong value(s) (#wrong)"
    broken = {"ok": True, "gpus": 8, "outputs": {"all_reduce": {"rc": 127, "stdout": "", "stderr": "libnccl.so.2: no"}}}
    assert evaluate_nccl_tests({"n1": broken})["reason"] == "n1: rc 127: libnccl.so.2: no"
    lab = {"ok": True, "skipped": "0 GPU(s) on the node: nothing between GPUs to measure"}
    skipped = evaluate_nccl_tests({"n1": lab, "n2": lab})
    assert skipped["status"] == "skip" and skipped["reason"] == lab["skipped"]
