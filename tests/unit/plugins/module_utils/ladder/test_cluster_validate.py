"""The validation ladder's logic on recorded tool outputs (tests/fixtures/validate/, see its README)."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check as nc
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing, parsers, report, units
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import rungs as vr
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder

from lab import cluster as lab
from tests.conftest import ROOT, load_script

FIX = ROOT / "tests" / "fixtures" / "validate"
ROLE = ROOT / "roles" / "cluster_validate"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


# ------------------------------------------------------------------------------------ units and thresholds


def test_perftest_mb_per_sec_is_mebibytes() -> None:
    # 1098 MiB/s (the field notes' ib_send_bw) is 9.21 Gb/s: 37 % of a 25 GbE port, not "1 GB/s, fine".
    assert units.mib_per_s_to_gbps(1098) == pytest.approx(9.2106, abs=1e-3)
    assert units.mib_per_s_to_gbps(1) == pytest.approx(0.008388608)


@pytest.mark.parametrize(
    ("raw", "gbps"),
    [
        (25000, 25.0),
        ("100000", 100.0),
        ("100 Gb/sec (4X EDR)", 100.0),
        ("25 Gb/sec (1X EDR)", 25.0),
        ("400 Gb/sec (4X NDR)", 400.0),
        (-1, None),  # ethtool's SPEED_UNKNOWN
        ("-1", None),
        ("", None),
        (None, None),  # veth: reading /sys/class/net/<veth>/speed fails with EINVAL
    ],
)
def test_link_rate(raw, gbps) -> None:
    assert units.link_rate_gbps(raw) == gbps


def test_threshold_never_made_up() -> None:
    assert units.threshold_for(25.0, 0.9) == 22.5
    assert units.threshold_for(None, 0.9) is None


@pytest.mark.parametrize(("world", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_formula(world, factor) -> None:
    assert units.busbw(10.0, world) == pytest.approx(10.0 * factor)


@pytest.mark.parametrize(("mtu", "ib_mtu"), [(9000, 4096), (4200, 4096), (2240, 2048), (1500, 1024), (576, 512)])
def test_required_active_mtu(mtu, ib_mtu) -> None:
    assert nc.required_ib_mtu(mtu) == ib_mtu


# ------------------------------------------------------------------------------------ pairing


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


# ------------------------------------------------------------------------------------ parsers


def test_parse_ibv_devinfo_roce() -> None:
    (dev,) = nc.parse_ibv_devinfo(fixture("ibv_devinfo_roce.txt"))
    assert dev["hca_id"] == "mlx5_0" and dev["vendor_id"] == "0x02c9" and dev["fw_ver"] == "16.35.2000"
    (port,) = dev["ports"]
    assert port == {
        "port": 1,
        "state": "PORT_ACTIVE",
        "max_mtu": 4096,
        "active_mtu": 4096,
        "sm_lid": 0,
        "port_lid": 0,
        "port_lmc": 0,
        "link_layer": "Ethernet",
    }


def test_parse_ibv_devinfo_infiniband_and_pvrdma() -> None:
    (ib,) = nc.parse_ibv_devinfo(fixture("ibv_devinfo_ib.txt"))
    assert ib["ports"][0]["link_layer"] == "InfiniBand" and ib["ports"][0]["port_lid"] == 7
    (pv,) = nc.parse_ibv_devinfo(fixture("ibv_devinfo_pvrdma.txt"))
    assert pv["vendor_id"] == nc.VMWARE_VENDOR_ID and pv["ports"][0]["active_mtu"] == 1024


def test_parse_perftest_bw_mib() -> None:
    res = parsers.parse_perftest_bw(fixture("ib_write_bw_mbs.txt"))
    assert res["unit"] == "MB/sec" and res["bw_average"] == 1098.21 and res["bytes"] == 65536
    assert res["gbps"] == pytest.approx(9.212, abs=1e-3)
    assert res["device"] == "rocep11s0" and res["link_type"] == "Ethernet" and res["mtu"] == 1024


def test_parse_perftest_bw_gbits() -> None:
    res = parsers.parse_perftest_bw(fixture("ib_write_bw_gbits.txt"))
    assert res["unit"] == "Gb/sec" and res["gbps"] == 0.48 and res["iterations"] == 224958464
    sweep = parsers.parse_perftest_bw(fixture("ib_write_bw_sweep_gbits.txt"))
    assert sweep["bytes"] == 8 and sweep["gbps"] == 0.17  # the last (largest) size of an -a sweep


def test_parse_perftest_bw_without_result() -> None:
    assert parsers.parse_perftest_bw(fixture("ib_write_bw_no_device.txt")) is None


def test_parse_perftest_lat() -> None:
    res = parsers.parse_perftest_lat(fixture("ib_write_lat.txt"))
    assert res["bytes"] == 2 and res["iterations"] == 1000
    assert res["t_typical"] == 6.13 and res["t_min"] == 5.84 and res["p99"] == 7.9 and res["p999"] == 21.37


def test_parse_sminfo() -> None:
    sm = nc.parse_sminfo(fixture("sminfo_master.txt"))
    assert sm["sm_lid"] == 1 and sm["priority"] == 15 and sm["state_name"] == "SMINFO_MASTER"
    assert nc.parse_sminfo(fixture("sminfo_no_sm.txt")) is None


def test_parse_iperf3() -> None:
    res = parsers.parse_iperf3(fixture("iperf3_client.json"))
    raw = json.loads(fixture("iperf3_client.json"))
    assert res["gbps"] == round(raw["end"]["sum_received"]["bits_per_second"] / 1e9, 3)
    assert "Connection refused" in parsers.parse_iperf3(fixture("iperf3_refused.json"))["error"]
    assert "no JSON" in parsers.parse_iperf3("iperf3: command not found")["error"]


def test_parse_nxos_pfc_counters() -> None:
    ports = parsers.parse_nxos_pfc(fixture("nxos_pfc.txt"))
    assert ports["Ethernet1/1"] == {"mode": "On", "oper": "On", "bitmap": 8, "rx_ppp": 1234, "tx_ppp": 5678}
    assert ports["Ethernet1/3"]["oper"] == "Off" and ports["Ethernet1/3"]["rx_ppp"] == 0


def test_parse_nxos_queuing() -> None:
    port = parsers.parse_nxos_queuing(fixture("nxos_queuing.txt"))["Ethernet1/1"]
    assert port["groups"][3]["tx_pkts"] == 104857600
    assert port["groups"][3]["wred_afd_tail_drop_pkts"] == 3
    assert port["groups"][3]["ecn_marked_pkts"] == 4711
    assert port["groups"][0]["tx_pkts"] == 2340871 + 1022  # unicast + multicast
    assert port["ingress"]["ingress_mmu_drop_pkts"] == 2


# ------------------------------------------------------------------------------------ rungs


def test_switch_rung_counts_nodrop_drops_between_reads() -> None:
    before = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), fixture("nxos_queuing.txt"))}
    assert before["sw"]["Ethernet1/1"]["drops_q3"] == 3 and before["sw"]["Ethernet1/1"]["ingress_drops"] == 2
    same = vr.evaluate_switch(before, before, 3, {"sw:Ethernet1/1": "node1"})
    assert same["status"] == "pass" and same["value"] == 0
    assert same["reason"] == "no drops in qos-group 3 on 1 port(s); 0 PFC pauses, 0 ECN-marked"
    grown = fixture("nxos_queuing.txt").replace("|               3|", "|              10|")
    after = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt").replace("1234", "1300"), grown)}
    rung = vr.evaluate_switch(before, after, 3, {"sw:Ethernet1/1": "node1"})
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["node1"] and rung["value"] == 7
    # Only the ports read with `show queuing` (the RoCE ports) are judged, not every port the PFC show lists.
    assert sorted(rung["deltas"]) == ["sw:Ethernet1/1"] and len(rung["checks"]) == 1
    assert "66 PFC pauses received" in rung["reason"]
    skipped = vr.evaluate_switch({}, {}, 3, skip_reason="the switch does not serve `show queuing interface`")
    assert skipped["status"] == "skip" and "show queuing" in skipped["reason"]


def test_each_switch_port_is_named_by_its_own_switch_description() -> None:
    """The lab's leaf-spine plan (lab/cluster.py): lab-node1 and lab-node3 on lab-leaf1 Ethernet1/1 and 1/2,
    lab-node2 on lab-leaf2 Ethernet1/1, the leaves' Ethernet1/8 up to lab-spine1's Ethernet1/1 and 1/2. Each port
    names the node its own switch's description gives; the same port name on another switch is another node, and an
    uplink names none. The lab's by-index map (Ethernet1/N -> the N-th node) only fills undescribed ports."""
    nodes = [lab.Node(i) for i in (1, 2, 3)]
    hostvars = {
        sw.name: {
            "nxos_roce_qos_host_interfaces": list(sw.host_interfaces),
            "nxos_roce_qos_uplink_interfaces": list(sw.uplink_interfaces),
        }
        for sw in lab.fabric_plan(nodes, 2, 1)
    }
    names = [n.name for n in nodes]
    by_index = {f"Ethernet1/{i}": n for i, n in enumerate(names, 1)}
    assert vr.switch_port_hosts(hostvars, sorted(hostvars), names, by_index) == {
        "lab-leaf1:Ethernet1/1": "lab-node1",
        "lab-leaf1:Ethernet1/2": "lab-node3",
        "lab-leaf2:Ethernet1/1": "lab-node2",
    }
    # The lab's one switch describes no port: the by-index map names them; an explicit switch:port entry wins.
    single = {"lab-switch": {"nxos_roce_qos_host_interfaces": [{"name": f"Ethernet1/{i}"} for i in (1, 2, 3)]}}
    got = vr.switch_port_hosts(single, ["lab-switch"], names, {**by_index, "lab-switch:Ethernet1/3": "lab-node1"})
    assert got == {"lab-switch:Ethernet1/1": "lab-node1", "lab-switch:Ethernet1/2": "lab-node2",
                   "lab-switch:Ethernet1/3": "lab-node1"}  # fmt: skip
    # Ports that name their far end with `peer` (the lab's one switch now does): that node, whatever the override.
    items = [{"name": f"Ethernet1/{i}", "peer": n, "peer_port": "rdma0"} for i, n in enumerate(reversed(names), 1)]
    keyed = {"lab-switch": {"nxos_roce_qos_host_interfaces": items}}
    assert vr.switch_port_hosts(keyed, ["lab-switch"], names, by_index) == {
        "lab-switch:Ethernet1/1": "lab-node3",
        "lab-switch:Ethernet1/2": "lab-node2",
        "lab-switch:Ethernet1/3": "lab-node1",
    }
    # The rung names the node behind the port that dropped, on the switch that dropped.
    before = {sw: {"Ethernet1/2": {"drops_q3": 0}} for sw in ("lab-leaf1", "lab-spine1")}
    after = {"lab-leaf1": {"Ethernet1/2": {"drops_q3": 5}}, "lab-spine1": {"Ethernet1/2": {"drops_q3": 0}}}
    rung = vr.evaluate_switch(before, after, 3, vr.switch_port_hosts(hostvars, sorted(hostvars), names, by_index))
    assert rung["bad_hosts"] == ["lab-node3"], rung
    assert (
        "lab-leaf1 Ethernet1/2 (lab-node3): 5 dropped" in rung["reason"]
        and "lab-spine1 Ethernet1/2:" not in rung["reason"]
    )


# rdma_qos's fact on a lab node (roles/rdma_qos/tasks/fact.yml), dcqcn profile.
QOS_FACT = {"nccl_env": {"NCCL_IB_TC": "106", "NCCL_IB_QPS_PER_CONNECTION": "1"}, "roce_dscp": 26, "tcp_dscp": 10,
            "pfc_priority": 3, "tcp_priority": 1, "tcp_mark_dscp": 10, "mark_tcp": True}  # fmt: skip


@pytest.mark.parametrize(
    ("fact", "rdma", "expected"),
    [
        (QOS_FACT, True, {"qos_group": 3, "dscp": 26, "what": "perftest with ToS 106 (DSCP 26)"}),
        (QOS_FACT | {"nccl_env": {"NCCL_IB_TC": "104"}}, True, {"qos_group": 3, "dscp": 26,
                                                                "what": "perftest with ToS 104 (DSCP 26)"}),
        (QOS_FACT, False, {"qos_group": 1, "dscp": 10, "what": "iperf3 (DSCP 10)"}),
        # cluster_tcp_lossless: TCP marked with the RoCE DSCP rides the no-drop class.
        (QOS_FACT | {"tcp_mark_dscp": 26}, False, {"qos_group": 3, "dscp": 26, "what": "iperf3 (DSCP 26)"}),
        (QOS_FACT | {"mark_tcp": False}, False, {"qos_group": 0, "dscp": 0, "what": "iperf3, TCP unmarked (DSCP 0)"}),
        ({}, True, {"qos_group": 0, "dscp": 0, "what": "perftest, no ToS (DSCP 0)"}),  # rdma_qos never ran
        ({"nccl_env": {"NCCL_IB_SL": "3"}, "pfc_priority": 3}, True, {"qos_group": 3, "dscp": None,
                                                                       "what": "perftest on SL 3"}),
    ],
)  # fmt: skip
def test_stress_class_of_the_pair_tests(fact, rdma, expected) -> None:
    """The class the pair tests' traffic rode, from a node's QoS fact: what the switch rung names."""
    assert vr.stress_class(fact, rdma) == expected


def test_switch_rung_names_the_class_the_stress_rode() -> None:
    before = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), fixture("nxos_queuing.txt"))}
    rdma = vr.evaluate_switch(before, before, 3, {}, stress=vr.stress_class(QOS_FACT, True))
    assert rdma["status"] == "pass" and rdma["stress"]["qos_group"] == 3
    assert rdma["reason"].endswith("; the pair tests' traffic (perftest with ToS 106 (DSCP 26)) rode it")
    # iperf3 in fabric TCP's lossy class: its drops are said, the no-drop class is still judged.
    grown = fixture("nxos_queuing.txt").replace("|               3|", "|              10|")
    after = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), grown)}
    tcp = vr.evaluate_switch(before, before, 3, {}, stress=vr.stress_class(QOS_FACT, False))
    assert tcp["status"] == "pass"
    assert tcp["reason"].endswith(
        "; the pair tests' traffic (iperf3 (DSCP 10)) rode lossy qos-group 1, not the no-drop one: 0 dropped there "
        "(reported, not judged)"
    )
    assert vr.evaluate_switch(before, after, 3, {}, stress=vr.stress_class(QOS_FACT, False))["status"] == "fail"


def _pairs(values):
    return [
        {"pair": list(p), "gbps": v, "error": None if v is not None else "iperf3: connection refused"}
        for p, v in values
    ]


def links(speeds):
    """node_health's rail_speeds for hosts of one fabric link each ({host: Gb/s | None})."""
    return {host: {"ens1": rate} for host, rate in speeds.items()}


def test_pairs_against_line_rate() -> None:
    speeds = {"a": 25.0, "b": 25.0, "c": 25.0, "d": 25.0}
    good = vr.evaluate_pairs(_pairs([(("a", "b"), 23.1), (("c", "d"), 23.0)]), links(speeds), 0.9)
    assert good["status"] == "pass" and good["threshold"] == 22.5 and good["value"] == 23.0 and good["unit"] == "Gb/s"
    # The field's 1098 MiB/s on 25 GbE.
    bad = vr.evaluate_pairs(_pairs([(("a", "b"), units.mib_per_s_to_gbps(1098))]), links(speeds), 0.9)
    assert bad["status"] == "fail" and bad["bad_pairs"] == [["a", "b"]] and bad["bad_hosts"] == ["a", "b"]


def test_pairs_unknown_speed_says_so_and_still_finds_the_slow_host() -> None:
    speeds = {"n1": None, "n2": None, "n3": None}
    ok = vr.evaluate_pairs(_pairs([(("n1", "n2"), 12.0), (("n1", "n3"), 11.0), (("n2", "n3"), 10.5)]), links(speeds))
    assert ok["status"] == "pass" and ok["threshold"] is None and units.NO_SPEED in ok["reason"]
    slow = vr.evaluate_pairs(_pairs([(("n1", "n2"), 12.0), (("n1", "n3"), 0.09), (("n2", "n3"), 0.1)]), links(speeds))
    assert slow["status"] == "fail" and slow["bad_hosts"] == ["n3"]
    assert slow["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]] and "n3" in slow["reason"]
    broken = vr.evaluate_pairs(_pairs([(("n1", "n2"), None)]), links(speeds))
    assert broken["status"] == "fail" and "connection refused" in broken["reason"]


def test_latency_ceiling() -> None:
    lat = parsers.parse_perftest_lat(fixture("ib_write_lat.txt"))["t_typical"]
    assert vr.evaluate_latency([{"pair": ["a", "b"], "usec": lat}], 10.0)["status"] == "pass"
    rung = vr.evaluate_latency([{"pair": ["a", "b"], "usec": lat}], 5.0)
    assert rung["status"] == "fail" and rung["value"] == 6.13 and rung["unit"] == "usec"


def test_allreduce_rung() -> None:
    results = [
        {"bytes": 1 << 20, "algbw_gbps": 2.0, "busbw_gbps": 2.67, "correct": True},
        {"bytes": 1 << 24, "algbw_gbps": 6.0, "busbw_gbps": 8.0, "correct": True},
    ]
    out = {
        "n1": {"ok": True, "rank": 0, "world": 3, "backend": "gloo", "collectives": {"all_reduce": results}},
        "n2": {"ok": True, "rank": 1},
    }
    unknown = vr.evaluate_allreduce(out, {"n1": None, "n2": None})
    assert unknown["status"] == "pass" and unknown["threshold"] is None and units.NO_SPEED in unknown["reason"]
    slow = vr.evaluate_allreduce(out, {"n1": 25.0, "n2": 25.0}, 0.7)
    assert slow["status"] == "fail" and slow["threshold"] == 17.5 and slow["value"] == 8.0
    dead = vr.evaluate_allreduce({"n1": {"error": "n2 did not join"}, "n2": {}}, {})
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
    rung = vr.evaluate_allreduce(out, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["reason"] == "wrong all-reduce result at 16777216 bytes on n2"
    assert rung["bad_hosts"] == ["n2"] and rung["checks"][-1]["check"] == "allreduce result"
    # Rank 0's own result wrong (its sweep says so).
    out["n2"]["wrong"] = {}
    results[0]["correct"] = False
    rung = vr.evaluate_allreduce(out, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["reason"] == "wrong all-reduce result at 1048576 bytes"


# Run the probe's all-reduce as the ladder does, two ranks over gloo on loopback; `corrupt` makes one rank's
# all-reduce return a wrong sum (the reduction ran, then one element set per call goes off by one).
RANK = """
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
                str(ROLE / "files" / "probe.py"),
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


def _two_ranks(corrupt_rank: int | None) -> dict:
    modes = ["corrupt" if rank == corrupt_rank else "-" for rank in (0, 1)]
    return run_probe_ranks(RANK, modes, "--sizes", "4096,65536", "--iters", "2", "--timeout", "60")


def test_allreduce_probe_checks_the_result_on_every_rank() -> None:
    pytest.importorskip("torch")
    good = _two_ranks(None)
    assert good["n1"]["ok"] and good["n1"]["wrong"] == {} and good["n2"]["wrong"] == {}, good
    assert [r["correct"] for r in good["n1"]["collectives"]["all_reduce"]] == [True, True]
    assert vr.evaluate_allreduce(good, {"n1": None, "n2": None})["status"] == "pass"
    # Rank 1 gets a wrong sum: rank 0's result is right, so only rank 1's own check can see it.
    bad = _two_ranks(1)
    assert [r["correct"] for r in bad["n1"]["collectives"]["all_reduce"]] == [True, True], bad
    assert bad["n2"]["wrong"] == {"all_reduce": [4096, 65536]}, bad
    rung = vr.evaluate_allreduce(bad, {"n1": None, "n2": None})
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"], rung
    assert rung["reason"] == "wrong all-reduce result at 4096, 65536 bytes on n2"
    assert load_script(ROLE / "files" / "probe.py").allreduce_expected(3) == 6  # 1 + 2 + 3


def _train_report(tps, device="cpu", mfu=0.004, outcome="completed"):
    """report.json as train_launch's train_report.py writes it (keys used by the rung), results per host."""
    result = {"status": "completed", "device": device, "world_size": 2, "mfu": mfu, "tokens_per_s": tps}
    return {"run_id": "validate-x", "outcome": outcome, "message": "", "model": "tiny", "final_step": 20,
            "tokens_per_s_median": tps, "results": {"n1": result, "n2": {**result, "mfu": None}}}  # fmt: skip


def test_train_rung() -> None:
    assert vr.evaluate_train({}, 100, skip_reason="no corpus")["status"] == "skip"
    ok = vr.evaluate_train(_train_report(900.0), 500)
    assert ok["status"] == "pass" and ok["value"] == 900.0 and ok["threshold"] == 500 and ok["unit"] == "tokens/s"
    # On CPUs MFU is the payload's estimate: reported, never judged, even under a floor.
    assert "MFU 0.4% (estimated CPU peak, not judged)" in ok["reason"] and ok["mfu"] == 0.004
    assert vr.evaluate_train(_train_report(900.0, mfu=0.001), 500, min_mfu=0.3)["status"] == "pass"
    slow = vr.evaluate_train(_train_report(90.0), 500)
    assert slow["status"] == "fail" and slow["reason"].startswith("90 tokens/s below the floor 500")
    # On GPUs the MFU floor applies.
    gpu = vr.evaluate_train(_train_report(40000.0, device="cuda", mfu=0.12), 500, min_mfu=0.3)
    assert gpu["status"] == "fail" and "MFU 12.0% below 30%" in gpu["reason"]
    assert vr.evaluate_train(_train_report(40000.0, device="cuda", mfu=0.41), 500, min_mfu=0.3)["status"] == "pass"
    failed = vr.evaluate_train(_train_report(None, outcome="failed") | {"message": "lab-node2 lost"}, 500)
    assert failed["status"] == "fail" and "training failed: lab-node2 lost" in failed["reason"]
    gone = vr.evaluate_train({"error": "rendezvous port 29500 busy on lab-node1"}, 500)
    assert gone["status"] == "fail" and "29500 busy" in gone["reason"]


# ------------------------------------------------------------------------------------ node health

# The rung gathers each node's rdma-node-check result (module rdma_llm.cluster.node_check, whose checks and their
# verdicts are tested in test_node_check.py): here, how a node's checks become the rung's.
NODE = {"interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}], "modules": ["ib_core"]}


def _node_result(nic=None, **facts) -> dict:
    veth = {"exists": True, "operstate": "up", "carrier": 1, "mtu": 9000, "speed_mbps": 10000, "virtual": True}
    j = nc.evaluate({"time": 0, "groups": ["fabric"], "nic": {"rdma0": veth | (nic or {})}, "rdma": [],
                     "modules": None} | facts, nc.resolve(NODE))  # fmt: skip
    status, reason = nc.summary(j.checks)
    return {"status": status, "reason": reason, "checks": j.checks, "notes": j.notes, "rail_speeds": j.rates}


def test_node_health_rung_names_each_hosts_checks() -> None:
    results = {"n1": _node_result(), "n2": _node_result({"mtu": 1500}), "n3": None}
    rung = vr.evaluate_node_health(results, ["n1", "n2", "n3"])
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2", "n3"]
    assert (rung["value"], rung["threshold"]) == (1, 3)
    assert "n2: rdma0: MTU 1500 (configured 9000)" in rung["reason"]
    assert "n3: no node check result (host failed or unreachable)" in rung["reason"]
    assert {c["host"] for c in rung["checks"]} == {"n1", "n2", "n3"} and rung["speeds"] == {"n1": None, "n2": None}
    # The lab's node: veth, no RDMA, no /proc/modules: passes, and says what it skipped.
    lab = vr.evaluate_node_health({"n1": _node_result()}, ["n1"])
    assert lab["status"] == "pass" and lab["unit"] == "hosts"
    assert "no RDMA device found" in lab["reason"] and "kernel without loadable modules" in lab["reason"]
    assert "nominal 10000 Mb/s ignored" in lab["reason"]


def test_node_health_rung_passes_a_warning_and_notes_it() -> None:
    res = _node_result()
    res["checks"].append(nc.check("gpu persistence", "warn", "GPU 0: persistence mode disabled"))
    res["notes"].append("rdma0 is an SR-IOV virtual function")
    rung = vr.evaluate_node_health({"n1": res}, ["n1"])
    assert rung["status"] == "pass" and rung["bad_hosts"] == []
    assert rung["notes"] == ["n1: warning: GPU 0: persistence mode disabled", "n1: rdma0 is an SR-IOV virtual function"]
    assert {"host": "n1", "check": "gpu persistence", "status": "warn"}.items() <= rung["checks"][-1].items()


def test_node_health_rung_keeps_each_rail_speed_for_the_pair_tests() -> None:
    res = _node_result() | {"rail_speeds": {"rdma0": 25.0, "rdma1": 100.0}}
    rung = vr.evaluate_node_health({"n1": res}, ["n1"])
    assert rung["rail_speeds"] == {"n1": {"rdma0": 25.0, "rdma1": 100.0}} and rung["speeds"] == {"n1": 25.0}


def _with_stack(res: dict, **versions) -> dict:
    stack = {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002", "torch": "2.9.1"} | versions
    return res | {"groups": ["fabric", "stack"], "stack": {k: v for k, v in stack.items() if v}}


def test_node_health_rung_names_the_node_whose_stack_differs_from_the_fleet() -> None:
    results = {h: _with_stack(_node_result()) for h in ("n1", "n2", "n4")} | {
        "n3": _with_stack(_node_result(), **{"nic firmware": "28.40.1000"})
    }
    rung = vr.evaluate_node_health(results, ["n1", "n2", "n3", "n4"])
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n3"], rung["reason"]
    assert "n3: nic firmware 28.40.1000, 3 of 4 hosts run 28.39.1002" in rung["reason"]
    assert rung["stack"] == {"kernel": "6.8.0-90-generic", "nic firmware": "28.39.1002", "torch": "2.9.1"}
    assert [c["check"] for c in rung["checks"] if c["host"] == "n1"][-1] == "stack consistency"
    # warn passes the rung and says it; report only records the versions.
    warned = vr.evaluate_node_health(results, ["n1", "n2", "n3", "n4"], stack_mismatch="warn")
    assert warned["status"] == "pass" and warned["notes"] == [
        "n3: warning: nic firmware 28.40.1000, 3 of 4 hosts run 28.39.1002"
    ]
    assert vr.evaluate_node_health(results, ["n1", "n2", "n3", "n4"], stack_mismatch="report")["status"] == "pass"
    with pytest.raises(RuleError, match="cluster_validate_stack_mismatch must be fail, warn or report"):
        vr.evaluate_node_health(results, ["n1"], stack_mismatch="maybe")


def test_a_key_one_node_lacks_or_a_tie_names_the_nodes() -> None:
    # A node without the venv's torch differs like a node with another one.
    results = {"n1": _with_stack(_node_result()), "n2": _with_stack(_node_result()),
               "n3": _with_stack(_node_result(), torch=None)}  # fmt: skip
    rung = vr.evaluate_node_health(results, ["n1", "n2", "n3"])
    assert rung["bad_hosts"] == ["n3"] and "n3: torch none, 2 of 3 hosts run 2.9.1" in rung["reason"]
    # Two nodes, two kernels: no majority, both named.
    two = {"n1": _with_stack(_node_result()), "n2": _with_stack(_node_result(), kernel="6.8.0-91-generic")}
    rung = vr.evaluate_node_health(two, ["n1", "n2"])
    assert rung["bad_hosts"] == ["n1", "n2"] and "kernel" not in rung["stack"]
    assert "n1: kernel: no majority (n1 6.8.0-90-generic, n2 6.8.0-91-generic)" in rung["reason"]
    # One node, or nodes whose check ran without the stack group: nothing compared.
    assert vr.evaluate_node_health({"n1": _with_stack(_node_result())}, ["n1"])["status"] == "pass"
    assert vr.evaluate_node_health({"n1": _node_result(), "n2": _node_result()}, ["n1", "n2"])["stack"] == {}


def test_pairs_hold_each_rail_to_its_own_line_rate() -> None:
    speeds = {"n1": 25.0, "n2": 25.0}
    rails = {"n1": {"rdma0": 25.0, "rdma1": 100.0}, "n2": {"rdma0": 25.0, "rdma1": 100.0}}
    values = [(("n1", "n2"), "rdma0", 23.5), (("n1", "n2"), "rdma1", 50.0)]
    # Against the node's slowest link alone, the 100 Gb/s rail at 50 would pass (50 >= 22.5) ...
    assert vr.evaluate_pairs(_rail_pairs(values), links(speeds), 0.9, consistency=0.1)["status"] == "pass"
    # ... against its own line rate it fails, and rdma0 is still held to 25.
    rung = vr.evaluate_pairs(_rail_pairs(values), rails, 0.9, consistency=0.1)
    assert rung["status"] == "fail" and [p["threshold"] for p in rung["pairs"]] == [22.5, 90.0]
    assert "n1-n2 rdma1: 50 Gb/s < 90 (90% of 100 Gb/s line rate)" in rung["reason"], rung["reason"]
    # A rail node_health does not know (an InfiniBand port's name, say) falls back to the node's slowest link.
    assert vr.evaluate_pairs(_rail_pairs([(("n1", "n2"), "mlx5_2:1", 23.0)]), rails)["threshold"] == 22.5


def test_nic_counters_rung_names_host_device_port_and_counter() -> None:
    def result(*checks, deltas=None, pause=None):
        return {"checks": list(checks), "counters": {"deltas": deltas or {}, "pause": pause or {}}}

    quiet = nc.check("port counters", "pass", "no error counter grew on 2 port(s) since 2025-11-17T08:00:00Z")
    grew = nc.check("port counters", "fail", "mlx5_0 port 1: symbol_error +3 (since 2025-11-17T08:00:00Z)")
    pause = {"rdma0": {"rx_prio3_pause": 41927}}
    rung = vr.evaluate_nic_counters(
        {"n1": result(quiet, deltas={"mlx5_0:1": {"np_cnp_sent": 12}}, pause=pause), "n2": result(grew)}, ["n1", "n2"]
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["n2"] and rung["value"] == 1
    assert rung["reason"] == "n2: mlx5_0 port 1: symbol_error +3 (since 2025-11-17T08:00:00Z)"
    assert rung["deltas"] == {"n1": {"mlx5_0:1": {"np_cnp_sent": 12}}} and rung["pause"] == {"n1": pause}
    ok = vr.evaluate_nic_counters({"n1": result(quiet)}, ["n1"])
    assert ok["status"] == "pass" and ok["reason"] == "no NIC error counter grew across the stress rungs"
    # The lab: no RDMA device, no pause counters: the rung skips and says why.
    none = nc.check("port counters", "skip", "no RDMA port counters (no RDMA device)")
    lab = vr.evaluate_nic_counters({"n1": result(none)}, ["n1"])
    assert lab["status"] == "skip" and lab["reason"] == "no RDMA port counters (no RDMA device)"
    assert vr.evaluate_nic_counters({"n1": None}, ["n1"])["bad_hosts"] == ["n1"]


def test_the_node_parsers_are_the_node_checks() -> None:
    """One implementation: the ladder's parsers of the node's tools are rdma-node-check's."""
    assert units.link_rate_gbps is nc.link_rate_gbps and nccl.roce_gid_of is nc.roce_gid_of
    modules = (units, parsers, pairing, vr, ladder)
    assert not any(hasattr(m, name) for m in modules for name in ("_rdma_checks", "_ib_sm_checks", "parse_ibv_devinfo"))


# ------------------------------------------------------------------------------------ unreachable hosts

# Ansible's messages for a host that does not answer: the first three recorded here with ansible-core 2.19.14 and
# OpenSSH 9.2p1 (`ansible.builtin.ping` with ignore_unreachable against a closed port, an unresolvable name and
# a stopped lab container); the last three are the forms ansible-core's ssh connection plugin builds (its
# "Data could not be sent" wrapper, and the SSH chatter and `\r\n` endings it passes through) around OpenSSH's
# own messages.
UNREACHABLE = [
    (
        "Task failed: Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused",
        "ssh: connect to host 127.0.0.1 port 1: Connection refused",
    ),
    (
        "Task failed: Failed to connect to the host via ssh: ssh: Could not resolve hostname no-such-host.invalid: "
        "Name or service not known",
        "ssh: Could not resolve hostname no-such-host.invalid: Name or service not known",
    ),
    (
        "Task failed: Failed to connect to the host via ssh: ssh: connect to host 10.77.0.13 port 22: "
        "Connection timed out",
        "ssh: connect to host 10.77.0.13 port 22: Connection timed out",
    ),
    (
        "Failed to connect to the host via ssh: ssh: connect to host 10.77.0.13 port 22: No route to host",
        "ssh: connect to host 10.77.0.13 port 22: No route to host",
    ),
    (
        'Data could not be sent to remote host "10.0.0.7". Make sure this host can be reached over ssh: '
        "ssh: connect to host 10.0.0.7 port 22: Connection timed out\r\n",
        "ssh: connect to host 10.0.0.7 port 22: Connection timed out",
    ),
    (
        "Failed to connect to the host via ssh: Warning: Permanently added '10.0.0.7' (ED25519) to the list of known "
        "hosts.\r\nroot@10.0.0.7: Permission denied (publickey,password).",
        "root@10.0.0.7: Permission denied (publickey,password).",
    ),
    ("", "no answer"),
    (None, "no answer"),
]


@pytest.mark.parametrize(("msg", "why"), UNREACHABLE)
def test_unreachable_reason_is_the_cause_in_one_line(msg, why) -> None:
    assert parsers.unreachable_reason(msg) == why


def test_unreachable_reason_is_short_and_keeps_no_secret() -> None:
    why = parsers.unreachable_reason("Failed to connect to the host via ssh: sshpass password=hunter2 " + "x" * 400)
    assert "hunter2" not in why and "password=***" in why
    assert len(why) == 160 and why.endswith("…")


@pytest.mark.parametrize(
    ("results", "named"),
    [
        # answered: `pong`
        ({"n1": {"ping": "pong", "changed": False}}, {}),
        # ignore_unreachable keeps the host in the play with the message
        ({"n1": {"ping": "pong"}, "n2": {"unreachable": True, "msg": UNREACHABLE[2][0]}}, {"n2": UNREACHABLE[2][1]}),
        # a failed ping (no python on the host, a task timeout) is no answer either
        ({"n1": {"failed": True, "msg": "Task failed: timed out"}}, {"n1": "timed out"}),
        # no result at all: the host left the play before the ping; named, never silently dropped
        ({"n1": {}, "n2": None}, {"n1": "no result (host left the play)", "n2": "no result (host left the play)"}),
        ({"n1": {"changed": False}}, {"n1": "no answer"}),
    ],
)
def test_unreachable_hosts(results, named) -> None:
    assert parsers.unreachable_hosts(results) == named


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
    rung = vr.evaluate_host_errors("inventory", errors, ["n1", "n2", "n3"], "preflight checks passed", unreachable)
    assert rung["status"] == status and rung["bad_hosts"] == bad, rung
    assert in_reason in rung["reason"]
    assert rung["value"] == 3 - len(bad) and rung["threshold"] == 3 and rung["unit"] == "hosts"
    ssh = [c for c in rung["checks"] if c["check"] == "ssh"]
    assert sorted(c["host"] for c in ssh) == sorted(unreachable) and all(c["status"] == "fail" for c in ssh)


def _unreachable_ladder(keep_going):
    """The rungs validate.yml records when n3 does not answer: inventory fails, then either the rest is not run
    or (keep going) each runs on n1 and n2 and says it left n3 out."""
    left_out = {"n3": "ssh: connect to host 10.77.0.13 port 22: No route to host"}
    rungs = [vr.evaluate_host_errors("inventory", {}, ["n1", "n2", "n3"], "preflight checks passed", left_out)]
    if keep_going:
        later = [
            vr.make_rung("reachability", "pass", value=2, threshold=2, unit="checks"),
            vr.make_rung("rdma_bw", "skip", reason="no RDMA device on n1, n2"),
            vr.evaluate_pairs(_pairs([(("n1", "n2"), 12.0)]), links({"n1": None, "n2": None}), name="tcp_bw"),
        ]
        rungs += [ladder.note_left_out(r, left_out) for r in later]
    else:
        names = ["reachability", "node_health", "path_mtu", "rdma_bw", "rdma_lat", "tcp_bw", "allreduce", "switch"]
        rungs += ladder.skipped_after(names, "inventory")
    return ladder.verdict(rungs, ["n1", "n2", "n3"], keep_going=keep_going, left_out=left_out)


def test_unreachable_host_stops_the_ladder_at_inventory() -> None:
    v = _unreachable_ladder(keep_going=False)
    assert v["status"] == "fail" and v["first_failure"] == "inventory" and v["stopped_early"]
    assert v["bad_hosts"] == ["n3"] and v["bad_pairs"] == [] and v["hosts"] == ["n1", "n2", "n3"]
    assert v["left_out"] == {"n3": "ssh: connect to host 10.77.0.13 port 22: No route to host"}
    assert v["matrix"] is None
    first, *later = v["rungs"]
    assert first["status"] == "fail" and "n3: unreachable over SSH" in first["reason"]
    assert later and all(r["status"] == "skip" for r in later)
    assert {r["reason"] for r in later} == {"not run: the ladder stopped at the failing rung inventory"}
    assert vr.console_line(first).startswith("[FAIL] inventory      2 hosts (threshold 3) bad hosts: n3 — n3: ")


def test_unreachable_host_keep_going_rungs_say_what_they_left_out() -> None:
    v = _unreachable_ladder(keep_going=True)
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


GONE = (
    'Task failed: Data could not be sent to remote host "10.77.0.13". Make sure this host can be reached over ssh: '
    "ssh: connect to host 10.77.0.13 port 22: No route to host"
)


@pytest.mark.parametrize(
    ("results", "want"),
    [
        ([], {}),
        # record.yml's delegated ping, one item per node that left the play during the rung
        ([{"item": "n3", "unreachable": True, "msg": GONE}],
         {"n3": "unreachable over SSH: ssh: connect to host 10.77.0.13 port 22: No route to host"}),
        # it answers now: it left on a failed task, and is named all the same
        ([{"item": "n2", "ping": "pong"}, {"item": "n3", "failed": True}],
         {"n2": "a task failed on it; it answers over SSH", "n3": "unreachable over SSH: no answer"}),
    ],
)  # fmt: skip
def test_lost_hosts_says_why_each_node_left(results: list[dict], want: dict) -> None:
    assert parsers.lost_hosts(results) == want


def test_a_node_lost_mid_rung_fails_the_rung_and_is_left_out_after() -> None:
    """n3 answered at `inventory` and stopped answering in `tcp_bw`: that rung fails naming it first (whatever it
    measured on n1 and n2), and the rungs after it say they left it out since then."""
    why = {"n3": "unreachable over SSH: ssh: connect to host 10.77.0.13 port 22: No route to host"}
    measured = vr.evaluate_pairs(_pairs([(("n1", "n2"), 12.0)]), links({"n1": None, "n2": None}), name="tcp_bw")
    rung = ladder.mark_lost(measured, why)
    assert measured["status"] == "pass" and rung["status"] == "fail", (measured, rung)
    assert rung["lost"] == ["n3"] and rung["bad_hosts"] == ["n3"], rung
    assert rung["reason"].startswith(f"n3: left the play during this rung ({why['n3']})"), rung
    assert ladder.mark_lost(measured, {}) is measured
    after = ladder.note_left_out(vr.make_rung("allreduce", "pass"), {"n4": "refused", **why}, {"n3": "tcp_bw"})
    assert after["left_out"] == ["n3", "n4"], after
    assert (
        after["reason"]
        == "left out n4 (unreachable over SSH, see inventory); left out n3 (left the play during tcp_bw)"
    )
    v = ladder.verdict([rung, after], ["n1", "n2", "n3", "n4"], left_out={"n4": "refused", **why})
    assert v["first_failure"] == "tcp_bw" and v["bad_hosts"] == ["n3"] and v["left_out"]["n3"] == why["n3"], v


def test_report_names_the_left_out_host(tmp_path: Path) -> None:
    (tmp_path / "verdict.json").write_text(json.dumps(_unreachable_ladder(keep_going=False)))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "First failing rung: **inventory** (the ladder stopped there)" in md
    assert "Bad host(s): n3;" in md
    assert "(unreachable over SSH): n3 (ssh: connect to host 10.77.0.13 port 22: No route to host)" in md
    assert "| reachability | skip |" in md and "- FAIL n3 ssh: unreachable over SSH" in md


# ------------------------------------------------------------------------------------ verdict and report


def _ladder(fail=False):
    speeds = {"n1": None, "n2": None, "n3": None}
    values = [(("n1", "n2"), 12.0), (("n1", "n3"), 0.09 if fail else 11.0), (("n2", "n3"), 0.1 if fail else 11.5)]
    return [
        vr.make_rung("inventory", "pass"),
        vr.make_rung("rdma_bw", "skip", reason="no RDMA device"),
        vr.evaluate_pairs(_pairs(values), links(speeds), name="tcp_bw"),
    ]


def test_verdict_names_bad_host_and_pairs() -> None:
    hosts = ["n1", "n2", "n3"]
    v = ladder.verdict(_ladder(fail=True), hosts, cluster="lab")
    assert v["schema"] == ladder.SCHEMA and v["status"] == "fail" and v["first_failure"] == "tcp_bw"
    assert v["bad_hosts"] == ["n3"] and v["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]]
    assert v["matrix"]["values"][0][1] == 12.0 and v["matrix"]["values"][1][0] == 12.0
    assert v["matrix"]["failed"] == [["n1", "n3"], ["n2", "n3"]]
    assert ladder.verdict(_ladder(), hosts)["status"] == "pass"


def test_console_line() -> None:
    line = vr.console_line(_ladder(fail=True)[2])
    assert line.startswith("[FAIL] tcp_bw") and "n3" in line and "Gb/s" in line
    assert vr.console_line(vr.make_rung("rdma_bw", "skip", reason="no RDMA device")) == (
        "[SKIP] rdma_bw        — no RDMA device"
    )
    with pytest.raises(ValueError):
        vr.make_rung("x", "ok")


def test_report_writes_markdown_and_heatmap(tmp_path: Path) -> None:
    v = ladder.verdict(_ladder(fail=True), ["n1", "n2", "n3"], cluster="lab")
    (tmp_path / "verdict.json").write_text(json.dumps(v))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| tcp_bw | fail |" in md and "n3" in md
    png = tmp_path / "bandwidth.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_heatmap_keeps_every_label_on_the_canvas(n: int) -> None:
    """The title, the host names and the colour bar fit the figure whatever the host count (at 2 hosts the title
    was cut off at both sides)."""
    import matplotlib.pyplot as plt

    hosts = [f"lab-node{i}" for i in range(1, n + 1)]
    values = [[None if i == j else 10.0 + i + j for j in range(n)] for i in range(n)]
    matrix = {
        "hosts": hosts,
        "values": values,
        "unit": "Gb/s",
        "failed": [hosts[:2]],
        "rails": [f"rdma{r}" for r in range(8)],
    }
    fig = report.heatmap_figure(matrix)
    try:
        fig.canvas.draw()
        renderer, canvas = fig.canvas.get_renderer(), fig.bbox
        # The title, the host names and the colour bar's label (its numbers are drawn only inside its range).
        wanted = {*hosts, "Gb/s"}
        texts = [
            t
            for t in fig.findobj(plt.Text)
            if t.get_visible() and (t.get_text() in wanted or "Pairwise" in t.get_text())
        ]
        assert {t.get_text() for t in texts} >= wanted and any("Pairwise" in t.get_text() for t in texts), texts
        outside = []
        for text in texts:
            box = text.get_window_extent(renderer)
            if box.x0 < canvas.x0 - 1 or box.x1 > canvas.x1 + 1 or box.y0 < canvas.y0 - 1 or box.y1 > canvas.y1 + 1:
                outside.append(text.get_text())
        assert outside == [], f"{n} hosts: cut off: {outside}"
    finally:
        plt.close(fig)


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
    import socket

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


def test_reachability_and_path_mtu_name_the_rail_and_blame_the_node() -> None:
    ok = {"peer": "n2", "address": "10.0.0.2", "ok": True, "detail": "3/3 replies"}
    lost = {"peer": "n2/rdma1", "address": "10.0.1.2", "ok": False, "detail": "0/3 replies"}
    reach = vr.evaluate_reachability({"n1": {"pings": [ok, lost]}, "n2": {"pings": []}}, ["n1", "n2"])
    assert reach["status"] == "fail" and reach["bad_pairs"] == [["n1", "n2"]]
    assert "fabric ping to n2/rdma1 (10.0.1.2): 0/3 replies" in reach["reason"]
    big = {"peer": "n2/rdma1", "address": "10.0.1.2", "ok": False, "mtu": 9000, "detail": "0/3 (message too long)"}
    pmtu = vr.evaluate_path_mtu({"n1": {"pings": [ok | {"mtu": 4200}, big]}}, ["n1", "n2"])
    assert pmtu["status"] == "fail" and pmtu["bad_pairs"] == [["n1", "n2"]] and pmtu["value"] == 4200
    assert "9000-byte don't-fragment ping to n2/rdma1" in pmtu["reason"]


def _rail_pairs(values):
    return [{"pair": list(p), "rail": r, "gbps": v, "error": None if v else "no result"} for p, r, v in values]


def test_pairs_judge_every_rail_and_name_the_slow_rail() -> None:
    speeds = {"n1": 100.0, "n2": 100.0, "n3": 100.0}
    good = [((a, b), r, 95.0) for a, b in (("n1", "n2"), ("n1", "n3"), ("n2", "n3")) for r in ("rdma0", "rdma1")]
    ok = vr.evaluate_pairs(_rail_pairs(good), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    assert ok["status"] == "pass" and ok["rails"] == ["rdma0", "rdma1"] and len(ok["checks"]) == 6
    # n3's second NIC is slow: its rdma1 pairs fail, n3 is named with that rail (not n1 and n2 as well).
    slow = [(p, r, 40.0 if r == "rdma1" and "n3" in p else v) for p, r, v in good]
    bad = vr.evaluate_pairs(_rail_pairs(slow), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    assert bad["status"] == "fail" and bad["bad_hosts"] == ["n3"] and bad["bad_rails"] == {"n3": ["rdma1"]}
    assert bad["bad_pairs"] == [["n1", "n3"], ["n2", "n3"]]
    assert bad["reason"].startswith("2 of 6 rail(s) of the pairs failed; suspect host(s): n3 (rdma1); n1-n3 rdma1:")
    # The matrix shows each pair's slowest rail.
    m = ladder.bandwidth_matrix(["n1", "n2", "n3"], bad["pairs"])
    assert m["values"][0][2] == 40.0 and m["values"][0][1] == 95.0 and m["failed"] == [["n1", "n3"], ["n2", "n3"]]
    assert m["rails"] == ["rdma0", "rdma1"]
    # Two slow rails on two nodes: each named with its own rail.
    two = [(p, r, 40.0 if (r == "rdma1" and "n3" in p) or (r == "rdma0" and "n1" in p) else v) for p, r, v in good]
    both = vr.evaluate_pairs(_rail_pairs(two), links(speeds), 0.9)
    assert both["bad_rails"] == {"n1": ["rdma0"], "n3": ["rdma1"]}
    lat = vr.evaluate_latency(
        [{"pair": ["n1", "n2"], "rail": "rdma0", "usec": 2.0}, {"pair": ["n1", "n2"], "rail": "rdma1", "usec": 9.0}],
        5.0,
    )
    assert lat["status"] == "fail" and lat["checks"][1]["host"] == "n1-n2 rdma1" and lat["bad_rails"]["n1"] == ["rdma1"]


def test_report_lists_every_rail(tmp_path: Path) -> None:
    speeds = {"n1": 100.0, "n2": 100.0}
    values = [(("n1", "n2"), "rdma0", 95.0), (("n1", "n2"), "rdma1", 20.0)]
    rung = vr.evaluate_pairs(_rail_pairs(values), links(speeds), 0.9, name="rdma_bw", tool="ib_write_bw")
    v = ladder.verdict([vr.make_rung("inventory", "pass"), rung], ["n1", "n2"], cluster="lab")
    (tmp_path / "verdict.json").write_text(json.dumps(v))
    report.write(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| n1-n2 | rdma0 | 95 | 90 | pass |" in md and "| n1-n2 | rdma1 | 20 | 90 | fail |" in md, md
    assert (tmp_path / "bandwidth.png").stat().st_size > 2000


def test_a_rail_one_end_lacks_fails_the_pair_saying_so() -> None:
    two = [{"name": "rdma0", "address": "10.0.0.1"}, {"name": "rdma1", "address": "10.0.1.1"}]
    rails = {"n1": two, "n2": two[:1], "n3": two}
    rounds = pairing.round_robin(["n1", "n2", "n3"])
    gaps = pairing.rail_gaps(rounds, rails, ["iperf3"])
    assert sorted((tuple(g["pair"]), g["rail"]) for g in gaps) == [(("n1", "n2"), "rdma1"), (("n2", "n3"), "rdma1")]
    assert {g["error"] for g in gaps} == {"n2 has no rail 2 (rdma1): 2 rail(s) on n1, 1 on n2",
                                          "n2 has no rail 2 (rdma1): 1 rail(s) on n2, 2 on n3"}  # fmt: skip
    measured = [{"pair": p, "rail": r["name"], "gbps": 10.0} for ps in rounds for p in ps for r in two[:1]]
    rung = vr.evaluate_pairs(measured + gaps, links({h: None for h in rails}))
    assert rung["status"] == "fail" and rung["bad_rails"] == {"n2": ["rdma1"]}, rung
    assert pairing.rail_gaps(rounds, {h: two for h in rails}, ["iperf3"]) == []


def test_measurements_per_rail_with_the_servers_word() -> None:
    iperf, refused = fixture("iperf3_client.json"), fixture("iperf3_refused.json")
    client = {"tool": "iperf3", "rails": [{"rail": "rdma0", "rc": 0, "output": iperf},
                                          {"rail": "rdma1", "rc": 1, "output": refused}]}  # fmt: skip
    server = {"rails": [{"rail": "rdma1", "rc": 1, "output": "iperf3: error - unable to bind: Cannot assign"}]}
    got = parsers.measurements([{"pair": ["a", "b"], "tool": "iperf3", "out": client}], {"iperf3 a b": server})
    assert got[0]["rail"] == "rdma0" and got[0]["gbps"] > 0 and got[0]["error"] is None
    assert got[1]["rail"] == "rdma1" and got[1]["gbps"] is None
    assert got[1]["error"].endswith("; server b: iperf3: error - unable to bind: Cannot assign")
    # A client that printed nothing (the probe failed): one entry that says so.
    none = parsers.measurements([{"pair": ["a", "b"], "tool": "ib_write_bw", "out": {}}])
    assert none == [{"pair": ["a", "b"], "rail": None, "tool": "ib_write_bw", "gbps": None, "usec": None,
                     "error": "ib_write_bw rc None: no output"}]  # fmt: skip


# ------------------------------------------------------------------------------------ NCCL's transport


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
    good = vr.evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_gdr.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE})  # fmt: skip
    assert good["status"] == "pass", good["reason"]
    assert good["reason"].endswith("NCCL 2.27.5+cuda12.9 over IB (mlx5_0:1/RoCE), GPUDirect RDMA on every node"), good[
        "reason"
    ]
    assert good["transport"]["n1"]["gdr_channels"] == 4
    # One node without a peer-memory module: staged through host memory, named, even above the threshold.
    staged = vr.evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_no_gdr.txt"), speeds, 0.7,
                                   expect={"n1": GPU_NODE, "n2": GPU_NODE})  # fmt: skip
    assert staged["status"] == "fail" and staged["bad_hosts"] == ["n2"]
    assert staged["reason"] == (
        "n2: 4 of 4 network channel(s) staged through host memory (no GDRDMA); "
        "GPU Direct RDMA disabled for HCA mlx5_0 (no peer-memory module: nvidia_peermem)"
    )
    # ... reported only with cluster_validate_gpudirect false.
    told = vr.evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_roce_no_gdr.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE}, require_gdr=False)  # fmt: skip
    assert told["status"] == "pass" and told["reason"].endswith("without GPUDirect RDMA on n2")
    # The silent fall-back to TCP fails whatever the bandwidth.
    sock = vr.evaluate_allreduce(_nccl_outputs("nccl_roce_gdr.txt", "nccl_socket.txt"), speeds, 0.7,
                                 expect={"n1": GPU_NODE, "n2": GPU_NODE}, require_gdr=False)  # fmt: skip
    assert sock["status"] == "fail" and sock["bad_hosts"] == ["n2"]
    assert "n2: NCCL fell back to TCP sockets, not RDMA (NET/IB found no device)" in sock["reason"]


def test_allreduce_transport_where_no_rdma_is_expected_or_nothing_was_logged() -> None:
    no_rdma = {"devices": [], "gpus": 0}
    out = _nccl_outputs("nccl_socket.txt", "nccl_socket.txt")
    rung = vr.evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": no_rdma, "n2": no_rdma})
    assert rung["status"] == "pass" and "over Socket" in rung["reason"]
    assert {c["status"] for c in rung["checks"]} == {"skip"}
    # cluster_rdma_devices left empty, but NCCL was given an HCA (the endpoint node_health found): sockets fail.
    out["n2"]["nccl_ib_hca"] = "=mlx5_0:1"
    given = vr.evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": no_rdma, "n2": no_rdma})
    assert given["status"] == "fail" and given["bad_hosts"] == ["n2"] and "fell back to TCP" in given["reason"]
    for o in out.values():
        o["nccl_log"] = []
    quiet = vr.evaluate_allreduce(out, {"n1": None, "n2": None}, expect={"n1": GPU_NODE, "n2": GPU_NODE})
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
    dead = vr.evaluate_allreduce(out, {}, expect={"n1": GPU_NODE, "n2": GPU_NODE})
    assert dead["status"] == "fail" and dead["bad_hosts"] == ["n1", "n2"] and "fell back to TCP" in dead["reason"]


def test_allreduce_probe_env_and_log(tmp_path: Path) -> None:
    """The probe's NCCL settings (rdma_stack_nccl_env's, given by the controller) and the log lines it hands back."""
    probe = load_script(ROLE / "files" / "probe.py")
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
    probe = load_script(ROLE / "files" / "probe.py")
    (tmp_path / "nccl.host.1").write_text(fixture(name))
    assert nccl.parse_nccl_log(probe.nccl_log(tmp_path)) == nccl.parse_nccl_log(_nccl(name))


# ------------------------------------------------------------------------------------------- the slurm rung

SLURM_FIX = ROOT / "tests" / "fixtures" / "slurm"
SLURM_HOSTS = ["mol-slurm-1", "mol-slurm-2"]
SLURM_ALIASES = {h: [h] for h in SLURM_HOSTS}


def _scontrol(*names: str) -> dict:
    return {"rc": 0, "stdout": "".join((SLURM_FIX / n).read_text() for n in names), "stderr": ""}


def _srun(*nodes: str, rc: int = 0, stderr: str = "") -> dict:
    return {"rc": rc, "stdout": "".join(f"{n}\n" for n in nodes), "stderr": stderr}


LEAF_SPINE = [
    "SwitchName=lab-leaf1 Nodes=mol-slurm-1",
    "SwitchName=lab-leaf2 Nodes=mol-slurm-2",
    "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
]


def test_slurm_rung_passes_idle_nodes_that_answer_srun_with_the_inventorys_topology() -> None:
    rung = vr.evaluate_slurm(
        _scontrol("scontrol_show_nodes_idle.txt"),
        (SLURM_FIX / "scontrol_show_topology_leaf_spine.txt").read_text(),
        _srun(*SLURM_HOSTS),
        SLURM_HOSTS,
        SLURM_ALIASES,
        LEAF_SPINE,
    )
    assert rung["status"] == "pass" and (rung["value"], rung["threshold"]) == (2, 2), rung
    assert rung["reason"] == "topology as the inventory" and rung["nodes"] == {h: h for h in SLURM_HOSTS}
    no_topo = vr.evaluate_slurm(_scontrol("scontrol_show_nodes_idle.txt"), "", _srun(*SLURM_HOSTS), SLURM_HOSTS,
                                SLURM_ALIASES)  # fmt: skip
    assert no_topo["status"] == "pass" and no_topo["reason"] == "topology not configured (no topology.conf)"


def test_slurm_rung_names_the_drained_node_with_the_checks_reason_and_the_node_srun_missed() -> None:
    nodes = (SLURM_FIX / "scontrol_show_nodes_idle.txt").read_text().splitlines()[0] + "\n"
    nodes += (SLURM_FIX / "scontrol_show_node_drained_by_check.txt").read_text()
    busy = "srun: error: Unable to allocate resources: Requested nodes are busy"
    rung = vr.evaluate_slurm(
        {"rc": 0, "stdout": nodes}, "", _srun("mol-slurm-1", rc=1, stderr=busy), SLURM_HOSTS, SLURM_ALIASES
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["mol-slurm-2"] and rung["value"] == 1, rung
    assert rung["reason"] == (
        "mol-slurm-2: Slurm node mol-slurm-2 is IDLE+DRAIN: rdma-node-check: test failure "
        "[root@2026-11-26T13:06:53]; mol-slurm-2: srun step did not run on mol-slurm-2: " + busy
    )


def test_slurm_rung_fails_a_busy_node_an_unknown_host_and_a_topology_that_differs() -> None:
    busy = (SLURM_FIX / "scontrol_show_nodes_idle.txt").read_text().replace("State=IDLE", "State=ALLOCATED", 1)
    hosts = [*SLURM_HOSTS, "lab-node9"]
    rung = vr.evaluate_slurm(
        {"rc": 0, "stdout": busy},
        (SLURM_FIX / "scontrol_show_topology_none.txt").read_text(),
        _srun(*SLURM_HOSTS),
        hosts,
        {**SLURM_ALIASES, "lab-node9": ["lab-node9", "10.0.0.9"]},
        LEAF_SPINE,
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["lab-node9", "mol-slurm-1"], rung
    reason = rung["reason"]
    assert "mol-slurm-1: Slurm node mol-slurm-1 is ALLOCATED, not idle: a job runs" in reason
    assert "lab-node9: not a Slurm node (none is named lab-node9, 10.0.0.9)" in reason
    assert "switch lab-leaf1 is missing in Slurm's topology" in reason  # a cluster-wide check: no host before it


def test_slurm_rung_when_slurm_cannot_be_asked_or_is_not_there() -> None:
    down = {
        "rc": 1,
        "stdout": "",
        "stderr": "slurm_load_node error: Unable to contact slurm controller (connect failure)",
    }
    rung = vr.evaluate_slurm(down, "", {}, SLURM_HOSTS, SLURM_ALIASES)
    assert rung["status"] == "fail"
    assert rung["reason"] == (
        "scontrol show nodes failed: slurm_load_node error: Unable to contact slurm controller (connect failure)"
    )
    skipped = vr.evaluate_slurm({}, "", {}, SLURM_HOSTS, {}, None, "no Slurm in the inventory")
    assert skipped["status"] == "skip" and skipped["reason"] == "no Slurm in the inventory"


def test_slurm_rung_expects_the_topology_the_slurm_role_writes() -> None:
    """The inventory's topology (the slurm role's rule) under the NodeNames Slurm reports."""
    ports = {
        "lab-leaf1": [{"name": "Ethernet1/1", "description": "lab-node1 rdma0"}, {"description": "lab-spine1 up"}],
        "lab-leaf2": [{"name": "Ethernet1/1", "description": "lab-node2 rdma0"}, {"description": "lab-spine1 up"}],
        "lab-spine1": [],
    }
    hostvars = {sw: {"nxos_roce_qos_host_interfaces": p} for sw, p in ports.items()}
    groups = {"rdma_nodes": ["lab-node1", "lab-node2"], "switches": sorted(ports)}
    found = {"lab-node1": {"NodeName": "mol-slurm-1"}, "lab-node2": {"NodeName": "mol-slurm-2"}}
    assert vr.slurm_topology(hostvars, groups, found) == LEAF_SPINE
    assert vr.slurm_topology(hostvars, groups, found, "none") is None
    assert vr.slurm_topology(hostvars, {"rdma_nodes": ["lab-node1"]}, found) is None
