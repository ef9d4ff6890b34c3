"""What the ladder's unit tests share: the recorded tool outputs (tests/fixtures/validate/, see its README) and
the rungs and ladders that several modules' tests build from them."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairs import evaluate_pairs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import evaluate_host_errors, make_rung

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "validate"
ROLE = ROOT / "roles" / "cluster_validate"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def pair_results(values):
    """Measurements of one rail per pair, [((a, b), Gb/s | None)]: None is a refused iperf3."""
    return [
        {"pair": list(p), "gbps": v, "error": None if v is not None else "iperf3: connection refused"}
        for p, v in values
    ]


def links(speeds):
    """node_health's rail_speeds for hosts of one fabric link each ({host: Gb/s | None})."""
    return {host: {"ens1": rate} for host, rate in speeds.items()}


def rail_results(values):
    """Measurements per rail, [((a, b), rail, Gb/s | None)]."""
    return [{"pair": list(p), "rail": r, "gbps": v, "error": None if v else "no result"} for p, r, v in values]


def sample_ladder(fail=False):
    """inventory passed, rdma_bw skipped, tcp_bw over three nodes: passing, or (fail) n3 slow to both peers."""
    speeds = {"n1": None, "n2": None, "n3": None}
    values = [(("n1", "n2"), 12.0), (("n1", "n3"), 0.09 if fail else 11.0), (("n2", "n3"), 0.1 if fail else 11.5)]
    return [
        make_rung("inventory", "pass"),
        make_rung("rdma_bw", "skip", reason="no RDMA device"),
        evaluate_pairs(pair_results(values), links(speeds), name="tcp_bw"),
    ]


def unreachable_ladder(keep_going):
    """The rungs validate.yml records when n3 does not answer: inventory fails, then either the rest is not run
    or (keep going) each runs on n1 and n2 and says it left n3 out."""
    left_out = {"n3": "ssh: connect to host 10.77.0.13 port 22: No route to host"}
    rungs = [evaluate_host_errors("inventory", {}, ["n1", "n2", "n3"], "preflight checks passed", left_out)]
    if keep_going:
        later = [
            make_rung("reachability", "pass", value=2, threshold=2, unit="checks"),
            make_rung("rdma_bw", "skip", reason="no RDMA device on n1, n2"),
            evaluate_pairs(pair_results([(("n1", "n2"), 12.0)]), links({"n1": None, "n2": None}), name="tcp_bw"),
        ]
        rungs += [ladder.note_left_out(r, left_out) for r in later]
    else:
        names = ["reachability", "node_health", "path_mtu", "rdma_bw", "rdma_lat", "tcp_bw", "allreduce", "switch"]
        rungs += ladder.skipped_after(names, "inventory")
    return ladder.verdict(rungs, ["n1", "n2", "n3"], keep_going=keep_going, left_out=left_out)
