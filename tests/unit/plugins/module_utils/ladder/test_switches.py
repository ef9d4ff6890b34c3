"""The switch rungs (ladder/switches.py): the no-drop class's counters, each port named by its host, the class
the pair tests rode. The cabling rung: test_cabling.py."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.switches import (
    evaluate_switch,
    stress_class,
    switch_port_hosts,
)

from lab import cluster as lab
from tests.unit.plugins.module_utils.ladder.ladder_helpers import fixture


def test_switch_rung_counts_nodrop_drops_between_reads() -> None:
    before = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), fixture("nxos_queuing.txt"))}
    assert before["sw"]["Ethernet1/1"]["drops_q3"] == 3 and before["sw"]["Ethernet1/1"]["ingress_drops"] == 2
    same = evaluate_switch(before, before, 3, {"sw:Ethernet1/1": "node1"})
    assert same["status"] == "pass" and same["value"] == 0
    assert same["reason"] == "no drops in qos-group 3 on 1 port(s); 0 PFC pauses, 0 ECN-marked"
    grown = fixture("nxos_queuing.txt").replace("|               3|", "|              10|")
    after = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt").replace("1234", "1300"), grown)}
    rung = evaluate_switch(before, after, 3, {"sw:Ethernet1/1": "node1"})
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["node1"] and rung["value"] == 7
    # Only the ports read with `show queuing` (the RoCE ports) are judged, not every port the PFC show lists.
    assert sorted(rung["deltas"]) == ["sw:Ethernet1/1"] and len(rung["checks"]) == 1
    assert "66 PFC pauses received" in rung["reason"]
    skipped = evaluate_switch({}, {}, 3, skip_reason="the switch does not serve `show queuing interface`")
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
    assert switch_port_hosts(hostvars, sorted(hostvars), names, by_index) == {
        "lab-leaf1:Ethernet1/1": "lab-node1",
        "lab-leaf1:Ethernet1/2": "lab-node3",
        "lab-leaf2:Ethernet1/1": "lab-node2",
    }
    # The lab's one switch describes no port: the by-index map names them; an explicit switch:port entry wins.
    single = {"lab-switch": {"nxos_roce_qos_host_interfaces": [{"name": f"Ethernet1/{i}"} for i in (1, 2, 3)]}}
    got = switch_port_hosts(single, ["lab-switch"], names, {**by_index, "lab-switch:Ethernet1/3": "lab-node1"})
    assert got == {"lab-switch:Ethernet1/1": "lab-node1", "lab-switch:Ethernet1/2": "lab-node2",
                   "lab-switch:Ethernet1/3": "lab-node1"}  # fmt: skip
    # Ports that name their far end with `peer` (the lab's one switch now does): that node, whatever the override.
    items = [{"name": f"Ethernet1/{i}", "peer": n, "peer_port": "rdma0"} for i, n in enumerate(reversed(names), 1)]
    keyed = {"lab-switch": {"nxos_roce_qos_host_interfaces": items}}
    assert switch_port_hosts(keyed, ["lab-switch"], names, by_index) == {
        "lab-switch:Ethernet1/1": "lab-node3",
        "lab-switch:Ethernet1/2": "lab-node2",
        "lab-switch:Ethernet1/3": "lab-node1",
    }
    # The rung names the node behind the port that dropped, on the switch that dropped.
    before = {sw: {"Ethernet1/2": {"drops_q3": 0}} for sw in ("lab-leaf1", "lab-spine1")}
    after = {"lab-leaf1": {"Ethernet1/2": {"drops_q3": 5}}, "lab-spine1": {"Ethernet1/2": {"drops_q3": 0}}}
    rung = evaluate_switch(before, after, 3, switch_port_hosts(hostvars, sorted(hostvars), names, by_index))
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
    assert stress_class(fact, rdma) == expected


def test_switch_rung_names_the_class_the_stress_rode() -> None:
    before = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), fixture("nxos_queuing.txt"))}
    rdma = evaluate_switch(before, before, 3, {}, stress=stress_class(QOS_FACT, True))
    assert rdma["status"] == "pass" and rdma["stress"]["qos_group"] == 3
    assert rdma["reason"].endswith("; the pair tests' traffic (perftest with ToS 106 (DSCP 26)) rode it")
    # iperf3 in fabric TCP's lossy class: its drops are said, the no-drop class is still judged.
    grown = fixture("nxos_queuing.txt").replace("|               3|", "|              10|")
    after = {"sw": parsers.switch_counters(fixture("nxos_pfc.txt"), grown)}
    tcp = evaluate_switch(before, before, 3, {}, stress=stress_class(QOS_FACT, False))
    assert tcp["status"] == "pass"
    assert tcp["reason"].endswith(
        "; the pair tests' traffic (iperf3 (DSCP 10)) rode lossy qos-group 1, not the no-drop one: 0 dropped there "
        "(reported, not judged)"
    )
    assert evaluate_switch(before, after, 3, {}, stress=stress_class(QOS_FACT, False))["status"] == "fail"
