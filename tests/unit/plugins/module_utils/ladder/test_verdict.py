"""The ladder's verdict (ladder/verdict.py): the rungs together, the hosts left out or lost, the matrix."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairs import evaluate_pairs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import console_line, make_rung

from tests.unit.plugins.module_utils.ladder.ladder_helpers import links, pair_results, sample_ladder, unreachable_ladder


def test_verdict_names_bad_host_and_pairs() -> None:
    hosts = ["n1", "n2", "n3"]
    v = ladder.verdict(sample_ladder(fail=True), hosts, cluster="lab")
    assert v["schema"] == ladder.SCHEMA and v["status"] == "fail" and v["first_failure"] == "tcp_bw"
    assert v["bad_hosts"] == ["n3"] and v["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]]
    assert v["matrix"]["values"][0][1] == 12.0 and v["matrix"]["values"][1][0] == 12.0
    assert v["matrix"]["failed"] == [["n1", "n3"], ["n2", "n3"]]
    assert ladder.verdict(sample_ladder(), hosts)["status"] == "pass"


def test_unreachable_host_stops_the_ladder_at_inventory() -> None:
    v = unreachable_ladder(keep_going=False)
    assert v["status"] == "fail" and v["first_failure"] == "inventory" and v["stopped_early"]
    assert v["bad_hosts"] == ["n3"] and v["bad_pairs"] == [] and v["hosts"] == ["n1", "n2", "n3"]
    assert v["left_out"] == {"n3": "ssh: connect to host 10.77.0.13 port 22: No route to host"}
    assert v["matrix"] is None
    first, *later = v["rungs"]
    assert first["status"] == "fail" and "n3: unreachable over SSH" in first["reason"]
    assert later and all(r["status"] == "skip" for r in later)
    assert {r["reason"] for r in later} == {"not run: the ladder stopped at the failing rung inventory"}
    assert console_line(first).startswith("[FAIL] inventory      2 hosts (threshold 3) bad hosts: n3 — n3: ")


def test_unreachable_host_keep_going_rungs_say_what_they_left_out() -> None:
    v = unreachable_ladder(keep_going=True)
    assert v["status"] == "fail" and v["first_failure"] == "inventory" and not v["stopped_early"]
    assert v["bad_hosts"] == ["n3"], v
    by = {r["name"]: r for r in v["rungs"]}
    for name in ("reachability", "rdma_bw", "tcp_bw"):
        assert by[name]["left_out"] == ["n3"], by[name]
        assert by[name]["reason"].endswith("left out n3 (unreachable over SSH, see inventory)"), by[name]
    # The status of a later rung is about the hosts it ran on; the reason it had is kept.
    assert by["reachability"]["status"] == "pass" and by["reachability"]["reason"] == (
        "left out n3 (unreachable over SSH, see inventory)"
    )
    assert by["rdma_bw"]["status"] == "skip" and by["rdma_bw"]["reason"].startswith("no RDMA device on n1, n2; ")
    assert by["tcp_bw"]["status"] == "pass" and v["bad_pairs"] == []
    # The matrix keeps every host: n3's row is empty (not measured), not missing.
    assert v["matrix"]["hosts"] == ["n1", "n2", "n3"] and v["matrix"]["values"][2] == [None, None, None]
    assert ladder.note_left_out(by["inventory"], {}) is by["inventory"]


def test_a_node_lost_mid_rung_fails_the_rung_and_is_left_out_after() -> None:
    """n3 answered at `inventory` and stopped answering in `tcp_bw`: that rung fails naming it first (whatever it
    measured on n1 and n2), and the rungs after it say they left it out since then."""
    why = {"n3": "unreachable over SSH: ssh: connect to host 10.77.0.13 port 22: No route to host"}
    measured = evaluate_pairs(pair_results([(("n1", "n2"), 12.0)]), links({"n1": None, "n2": None}), name="tcp_bw")
    rung = ladder.mark_lost(measured, why)
    assert measured["status"] == "pass" and rung["status"] == "fail", (measured, rung)
    assert rung["lost"] == ["n3"] and rung["bad_hosts"] == ["n3"], rung
    assert rung["reason"].startswith(f"n3: left the play during this rung ({why['n3']})"), rung
    assert ladder.mark_lost(measured, {}) is measured
    after = ladder.note_left_out(make_rung("allreduce", "pass"), {"n4": "refused", **why}, {"n3": "tcp_bw"})
    assert after["left_out"] == ["n3", "n4"], after
    assert (
        after["reason"]
        == "left out n4 (unreachable over SSH, see inventory); left out n3 (left the play during tcp_bw)"
    )
    v = ladder.verdict([rung, after], ["n1", "n2", "n3", "n4"], left_out={"n4": "refused", **why})
    assert v["first_failure"] == "tcp_bw" and v["bad_hosts"] == ["n3"] and v["left_out"]["n3"] == why["n3"], v
