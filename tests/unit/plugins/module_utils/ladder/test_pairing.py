"""The ladder's pairing (ladder/pairing.py): who pairs with whom in which round, over which rails, and the
probe's pair test (files/probe.py pair) on the rails it is given."""

from __future__ import annotations

import itertools
import json
import socket

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing, parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairs import evaluate_pairs

from tests.conftest import load_script
from tests.unit.plugins.module_utils.ladder.ladder_helpers import ROLE, links

# ------------------------------------------------------------------------------------ rounds


@pytest.mark.parametrize("n", range(2, 12))
def test_round_robin_covers_every_pair_once_in_disjoint_rounds(n) -> None:
    hosts = [f"h{i}" for i in range(n)]
    rounds = pairing.round_robin(hosts)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = []
    for pairs in rounds:
        in_round = [h for p in pairs for h in p]
        assert len(in_round) == len(set(in_round)), f"host twice in one round: {pairs}"
        assert len(pairs) == n // 2
        seen += [tuple(p) for p in pairs]
    assert sorted(seen) == sorted(itertools.combinations(hosts, 2))


def test_round_robin_edge_cases() -> None:
    assert pairing.round_robin([]) == []
    assert pairing.round_robin(["a"]) == []
    assert pairing.round_robin(["a", "b"]) == [[["a", "b"]]]


def test_round_roles_bye_for_odd() -> None:
    rounds = pairing.round_robin(["a", "b", "c"])
    roles = {h: pairing.round_roles(rounds, h) for h in "abc"}
    for i in range(3):
        kinds = sorted(roles[h][i]["role"] for h in "abc")
        assert kinds == ["bye", "client", "server"]
        client = next(h for h in "abc" if roles[h][i]["role"] == "client")
        server = roles[client][i]["peer"]
        assert roles[server][i] == {"role": "server", "peer": client, "pair": roles[client][i]["pair"]}


def test_suspects() -> None:
    assert pairing.suspects([("a", "c"), ("b", "c")]) == ["c"]
    assert pairing.suspects([("a", "b")]) == ["a", "b"]
    assert pairing.suspects([]) == []


# ------------------------------------------------------------------------------------ rails


def test_rails_of_a_node() -> None:
    """The rails reachability, path MTU and the pair tests use, from the inventory and node_health's endpoint."""
    interfaces = [{"name": "rdma0", "addresses": ["10.0.0.1/24"], "mtu": 9000},
                  {"name": "rdma1", "addresses": ["fd00::1/64", "10.0.1.1/24"], "mtu": 4200},
                  {"name": "ib2", "addresses": []}]  # fmt: skip
    rails = pairing.fabric_rails(interfaces)
    assert rails == [{"interface": "rdma0", "address": "10.0.0.1", "mtu": 9000},
                     {"interface": "rdma1", "address": "10.0.1.1", "mtu": 4200},
                     {"interface": "ib2", "address": "", "mtu": 1500}]  # fmt: skip
    # TCP: every fabric interface with an address.
    assert pairing.pair_rails(None, rails) == [{"name": "rdma0", "address": "10.0.0.1"},
                                          {"name": "rdma1", "address": "10.0.1.1"}]  # fmt: skip
    # RoCE: the endpoint's rails (NCCL's), each with its interface's address.
    roce = {"hca": "mlx5_0", "port": 1, "gid_index": 3,
            "rails": [{"hca": "mlx5_0", "port": 1, "gid_index": 3, "interface": "rdma0"},
                      {"hca": "mlx5_1", "port": 1, "gid_index": 5, "interface": "rdma1"}]}  # fmt: skip
    assert pairing.pair_rails(roce, rails) == [
        {"name": "rdma0", "address": "10.0.0.1", "device": "mlx5_0", "ib_port": 1, "gid_index": 3},
        {"name": "rdma1", "address": "10.0.1.1", "device": "mlx5_1", "ib_port": 1, "gid_index": 5},
    ]
    # With the host's QoS fact (rdma_stack_qos_env) every RDMA rail sends in the lossless class: the traffic class
    # NCCL gets; TCP rails are marked by nftables instead.
    qos_env = {"NCCL_IB_TC": "106", "NCCL_IB_QPS_PER_CONNECTION": "1"}
    assert [r["tclass"] for r in pairing.pair_rails(roce, rails, qos_env)] == [106, 106]
    assert "tclass" not in pairing.pair_rails(None, rails, qos_env)[0]
    # InfiniBand: every ACTIVE port, reached over the first fabric address (perftest then uses LIDs).
    ib = {"hca": "mlx5_0", "port": 1, "gid_index": None,
          "rails": [{"hca": "mlx5_0", "port": 1, "gid_index": None, "interface": None},
                    {"hca": "mlx5_1", "port": 1, "gid_index": None, "interface": None}]}  # fmt: skip
    assert [(r["name"], r["address"]) for r in pairing.pair_rails(ib, rails)] == [("mlx5_0:1", "10.0.0.1"),
                                                                             ("mlx5_1:1", "10.0.0.1")]  # fmt: skip
    # Each end on the rails both nodes have: the server binds its own address, the client also gets the peer's.
    two = pairing.pair_rails(roce, rails, qos_env)
    client = json.loads(pairing.pair_rail_args(two, two[:1], "client"))
    assert client == [{"name": "rdma0", "device": "mlx5_0", "ib_port": 1, "gid_index": 3, "tclass": 106,
                       "local": "10.0.0.1", "peer": "10.0.0.1"}]  # fmt: skip
    assert [r.get("peer") for r in json.loads(pairing.pair_rail_args(two, two, "server"))] == [None, None]


def test_ping_targets_every_peer_on_every_rail() -> None:
    rails = {
        "n1": pairing.fabric_rails([{"name": "rdma0", "addresses": ["10.0.0.1/24"], "mtu": 9000},
                               {"name": "rdma1", "addresses": ["10.0.1.1/24"], "mtu": 9000}]),
        "n2": pairing.fabric_rails([{"name": "rdma0", "addresses": ["10.0.0.2/24"], "mtu": 9000},
                               {"name": "rdma1", "addresses": ["10.0.1.2/24"], "mtu": 4200}]),
        "n3": pairing.fabric_rails([{"name": "rdma0", "addresses": ["10.0.0.3/24"], "mtu": 1500}]),
    }  # fmt: skip
    assert json.loads(pairing.ping_targets(rails, "n1")) == [
        {"peer": "n2", "address": "10.0.0.2"},
        {"peer": "n2/rdma1", "address": "10.0.1.2", "source": "10.0.1.1"},
        {"peer": "n3", "address": "10.0.0.3"},
    ]
    # Path MTU: each rail at the smaller MTU of its two ends.
    sizes = {t["peer"]: t["size"] for t in json.loads(pairing.ping_targets(rails, "n1", df=True))}
    assert sizes == {"n2": 8972, "n2/rdma1": 4172, "n3": 1472}


def test_a_rail_one_end_lacks_fails_the_pair_saying_so() -> None:
    two = [{"name": "rdma0", "address": "10.0.0.1"}, {"name": "rdma1", "address": "10.0.1.1"}]
    rails = {"n1": two, "n2": two[:1], "n3": two}
    rounds = pairing.round_robin(["n1", "n2", "n3"])
    gaps = pairing.rail_gaps(rounds, rails, ["iperf3"])
    assert sorted((tuple(g["pair"]), g["rail"]) for g in gaps) == [(("n1", "n2"), "rdma1"), (("n2", "n3"), "rdma1")]
    assert {g["error"] for g in gaps} == {"n2 has no rail 2 (rdma1): 2 rail(s) on n1, 1 on n2",
                                          "n2 has no rail 2 (rdma1): 1 rail(s) on n2, 2 on n3"}  # fmt: skip
    measured = [{"pair": p, "rail": r["name"], "gbps": 10.0} for ps in rounds for p in ps for r in two[:1]]
    rung = evaluate_pairs(measured + gaps, links({h: None for h in rails}))
    assert rung["status"] == "fail" and rung["bad_rails"] == {"n2": ["rdma1"]}, rung
    assert pairing.rail_gaps(rounds, {h: two for h in rails}, ["iperf3"]) == []


# ------------------------------------------------------------------------------------ the probe's pair test


def test_pair_probe_commands() -> None:
    """`probe.py pair` runs the field's tools with the options the parsers expect (iperf3 -J, perftest -F -D), on
    the rail it is given: its own address bound, the HCA, port and GID index of the rail."""
    probe = load_script(ROLE / "files" / "probe.py")

    def args(*argv):
        return probe.parser().parse_args(["pair", *argv, "--rails", "[]"])

    rail = {"name": "rdma1", "local": "10.0.1.1", "peer": "10.0.1.2"}
    server = probe.command(args("server", "--tool", "iperf3", "--port", "18515"), rail, 18516)
    assert server == ["iperf3", "-s", "-1", "-p", "18516", "-B", "10.0.1.1", "--rcv-timeout", "10000"]
    client = probe.command(args("client", "--tool", "iperf3", "--port", "1", "--seconds", "2"), rail, 1)
    assert client[:3] == ["iperf3", "-c", "10.0.1.2"] and "-J" in client and client[client.index("-t") + 1] == "2"
    assert client[client.index("-B") + 1] == "10.0.1.1" and "--snd-timeout" in client
    roce = rail | {"device": "mlx5_1", "ib_port": 1, "gid_index": 3, "tclass": 106}
    bw = args("client", "--tool", "ib_write_bw", "--port", "1", "--seconds", "5")
    # RoCE: the rail's GID index (-x) and the lossless class's traffic class (perftest's --tclass, the GRH's).
    assert probe.command(bw, roce, 2) == ["ib_write_bw", "-d", "mlx5_1", "-p", "2", "-F", "-i", "1", "-x", "3",
                                          "--tclass=106", "-D", "5", "10.0.1.2"]  # fmt: skip
    lat = args("server", "--tool", "ib_write_lat", "--port", "1")
    assert probe.command(lat, roce | {"tclass": 104}, 1) == ["ib_write_lat", "-d", "mlx5_1", "-p", "1", "-F", "-i", "1",
                                                             "-x", "3", "--tclass=104", "-n", "1000"]  # fmt: skip
    # InfiniBand: the service level instead (--sl); no class where the host has no QoS fact.
    assert probe.command(lat, {"device": "mlx5_0", "ib_port": 2, "sl": 3}, 1) == [
        "ib_write_lat", "-d", "mlx5_0", "-p", "1", "-F", "-i", "2", "--sl=3", "-n", "1000"]  # fmt: skip
    assert probe.command(lat, {"device": "mlx5_0", "ib_port": 2}, 1) == [
        "ib_write_lat", "-d", "mlx5_0", "-p", "1", "-F", "-i", "2", "-n", "1000"]  # fmt: skip


def test_pair_probe_runs_every_rail_at_once_on_loopback(capsys) -> None:
    """Both ends of an iperf3 pair test on two rails (127.0.0.1 and 127.0.0.2, each bound), one port per rail;
    what the controller then makes of it. Loopback only."""
    import concurrent.futures
    import shutil

    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed (make setup installs it)")
    probe = load_script(ROLE / "files" / "probe.py")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # free now; rail 1 takes port + 1
    mine = [{"name": "lo0", "address": "127.0.0.1"}, {"name": "lo1", "address": "127.0.0.2"}]
    theirs = [{"name": "lo0", "address": "127.0.0.1"}, {"name": "lo1", "address": "127.0.0.2"}]

    def end(mode):
        rails = pairing.pair_rail_args(mine, theirs, mode)
        argv = ["pair", mode, "--tool", "iperf3", "--port", str(port), "--seconds", "1", "--rails", rails]
        return probe.pair_test(probe.parser().parse_args(argv))

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        served = pool.submit(end, "server")
        client = end("client")
    server = served.result(timeout=60)
    assert [r["rail"] for r in client["rails"]] == ["lo0", "lo1"], client
    assert all(r["rc"] == 0 for r in client["rails"] + server["rails"]), (client, server)
    got = parsers.measurements([{"pair": ["a", "b"], "tool": "iperf3", "out": client}], {"iperf3 a b": server})
    assert [(m["rail"], m["error"]) for m in got] == [("lo0", None), ("lo1", None)]
    assert all(m["gbps"] > 0 for m in got), got
