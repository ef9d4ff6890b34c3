"""The pair rungs (ladder/pairs.py): bandwidth and latency of every rail of every pair, against the line rate
and the best pair."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers, units
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairs import evaluate_latency, evaluate_pairs

from tests.unit.plugins.module_utils.ladder.ladder_helpers import fixture, links, pair_results, rail_results

# ------------------------------------------------------------------------------------ bandwidth


def test_pairs_against_line_rate() -> None:
    speeds = {"a": 25.0, "b": 25.0, "c": 25.0, "d": 25.0}
    good = evaluate_pairs(pair_results([(("a", "b"), 23.1), (("c", "d"), 23.0)]), links(speeds), 0.9)
    assert good["status"] == "pass" and good["threshold"] == 22.5 and good["value"] == 23.0 and good["unit"] == "Gb/s"
    # The field's 1098 MiB/s on 25 GbE.
    bad = evaluate_pairs(pair_results([(("a", "b"), units.mib_per_s_to_gbps(1098))]), links(speeds), 0.9)
    assert bad["status"] == "fail" and bad["bad_pairs"] == [["a", "b"]] and bad["bad_hosts"] == ["a", "b"]


def test_pairs_unknown_speed_says_so_and_still_finds_the_slow_host() -> None:
    speeds = {"n1": None, "n2": None, "n3": None}
    ok = evaluate_pairs(pair_results([(("n1", "n2"), 12.0), (("n1", "n3"), 11.0), (("n2", "n3"), 10.5)]), links(speeds))
    assert ok["status"] == "pass" and ok["threshold"] is None and units.NO_SPEED in ok["reason"]
    slow = evaluate_pairs(
        pair_results([(("n1", "n2"), 12.0), (("n1", "n3"), 0.09), (("n2", "n3"), 0.1)]), links(speeds)
    )
    assert slow["status"] == "fail" and slow["bad_hosts"] == ["n3"]
    assert slow["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]] and "n3" in slow["reason"]
    broken = evaluate_pairs(pair_results([(("n1", "n2"), None)]), links(speeds))
    assert broken["status"] == "fail" and "connection refused" in broken["reason"]


def test_pairs_hold_each_rail_to_its_own_line_rate() -> None:
    speeds = {"n1": 25.0, "n2": 25.0}
    rails = {"n1": {"rdma0": 25.0, "rdma1": 100.0}, "n2": {"rdma0": 25.0, "rdma1": 100.0}}
    values = [(("n1", "n2"), "rdma0", 23.5), (("n1", "n2"), "rdma1", 50.0)]
    # Against the node's slowest link alone, the 100 Gb/s rail at 50 would pass (50 >= 22.5) ...
    assert evaluate_pairs(rail_results(values), links(speeds), 0.9, consistency=0.1)["status"] == "pass"
    # ... against its own line rate it fails, and rdma0 is still held to 25.
    rung = evaluate_pairs(rail_results(values), rails, 0.9, consistency=0.1)
    assert rung["status"] == "fail" and [p["threshold"] for p in rung["pairs"]] == [22.5, 90.0]
    assert "n1-n2 rdma1: 50 Gb/s < 90 (90% of 100 Gb/s line rate)" in rung["reason"], rung["reason"]
    # A rail node_health does not know (an InfiniBand port's name, say) falls back to the node's slowest link.
    assert evaluate_pairs(rail_results([(("n1", "n2"), "mlx5_2:1", 23.0)]), rails)["threshold"] == 22.5


def test_pairs_judge_every_rail_and_name_the_slow_rail() -> None:
    speeds = {"n1": 100.0, "n2": 100.0, "n3": 100.0}
    good = [((a, b), r, 95.0) for a, b in (("n1", "n2"), ("n1", "n3"), ("n2", "n3")) for r in ("rdma0", "rdma1")]
    ok = evaluate_pairs(rail_results(good), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    assert ok["status"] == "pass" and ok["rails"] == ["rdma0", "rdma1"] and len(ok["checks"]) == 6
    # n3's second NIC is slow: its rdma1 pairs fail, n3 is named with that rail (not n1 and n2 as well).
    slow = [(p, r, 40.0 if r == "rdma1" and "n3" in p else v) for p, r, v in good]
    bad = evaluate_pairs(rail_results(slow), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    assert bad["status"] == "fail" and bad["bad_hosts"] == ["n3"] and bad["bad_rails"] == {"n3": ["rdma1"]}
    assert bad["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]]
    assert bad["reason"].startswith("2 of 6 rail(s) of the pairs failed; suspect host(s): n3 (rdma1); n1-n3 rdma1:")
    # The matrix shows each pair's slowest rail.
    m = ladder.bandwidth_matrix(["n1", "n2", "n3"], bad["pairs"])
    assert m["values"][0][2] == 40.0 and m["values"][0][1] == 95.0 and m["failed"] == [["n1", "n3"], ["n2", "n3"]]
    assert m["rails"] == ["rdma0", "rdma1"]
    # Two slow rails on two nodes: each named with its own rail.
    two = [(p, r, 40.0 if (r == "rdma1" and "n3" in p) or (r == "rdma0" and "n1" in p) else v) for p, r, v in good]
    both = evaluate_pairs(rail_results(two), links(speeds), 0.9)
    assert both["bad_rails"] == {"n1": ["rdma0"], "n3": ["rdma1"]}
    lat = evaluate_latency(
        [{"pair": ["n1", "n2"], "rail": "rdma0", "usec": 2.0}, {"pair": ["n1", "n2"], "rail": "rdma1", "usec": 9.0}],
        5.0,
    )
    assert lat["status"] == "fail" and lat["checks"][1]["host"] == "n1-n2 rdma1" and lat["bad_rails"]["n1"] == ["rdma1"]


# ------------------------------------------------------------------------------------ latency


def test_latency_ceiling() -> None:
    lat = parsers.parse_perftest_lat(fixture("ib_write_lat.txt"))["t_typical"]
    assert evaluate_latency([{"pair": ["a", "b"], "usec": lat}], 10.0)["status"] == "pass"
    rung = evaluate_latency([{"pair": ["a", "b"], "usec": lat}], 5.0)
    assert rung["status"] == "fail" and rung["value"] == 6.13 and rung["unit"] == "usec"
