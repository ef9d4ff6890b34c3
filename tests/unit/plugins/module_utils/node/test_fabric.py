"""The fabric checks (plugins/module_utils/node/fabric.py): fabric NICs, RDMA ports (RoCE and InfiniBand), line
rates against the inventory and the baseline, on recorded ibv_devinfo and sminfo outputs."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import summary
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import roce_gid_of

from tests.unit.plugins.module_utils.node.helpers import (
    checks,
    config,
    fixture,
    judge,
    nic,
    one,
    roce_facts,
    status,
)

# ------------------------------------------------------------------------------------ fabric NICs and RDMA ports


def test_lab_node_without_rdma_or_gpu_passes_with_its_reasons() -> None:
    # veth reports a nominal 10000 Mb/s whatever the path does: not a line rate.
    j = judge({"nic": {"rdma0": nic(speed_mbps=10000)}, "rdma": [], "modules": None})
    assert status(j) == "pass", j.checks
    assert one(j, "rdma devices")["detail"] == "no RDMA device found"
    assert "kernel without loadable modules" in one(j, "kernel modules")["detail"]
    assert "nominal 10000 Mb/s ignored" in one(j, "nic speed")["detail"]
    assert j.rates == {"rdma0": None}


@pytest.mark.parametrize(
    ("seen", "detail"),
    [
        (nic(mtu=1500), "rdma0: MTU 1500 (configured 9000)"),
        (nic(operstate="down", carrier=0), "rdma0: link down (operstate down, carrier 0)"),
        ({"exists": False}, "rdma0: fabric interface rdma0 does not exist"),
    ],
)
def test_a_bad_fabric_nic_fails_saying_what(seen, detail) -> None:
    j = judge({"nic": {"rdma0": seen}, "rdma": [], "modules": ["ib_core"]})
    assert status(j) == "fail" and detail in summary(j.checks)[1], j.checks


def test_roce_host_passes() -> None:
    j = judge(roce_facts())
    assert status(j) == "pass", j.checks
    passed = {c["check"] for c in j.checks if c["status"] == "pass"}
    assert {"rdma binding", "port state", "link layer", "active mtu", "roce v2 gid", "kernel modules"} <= passed
    assert j.rates == {"rdma0": 25.0}
    # The GID in another notation (IPv4-mapped) is the same address, as the launch's endpoint reads it.
    facts = roce_facts()
    facts["rdma"][0]["ports"][0]["gids"][0]["gid"] = "::ffff:10.77.250.11"
    assert status(judge(facts)) == "pass"


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"gid_type": "IB/RoCE v1"}, "mlx5_0 port 1 carries 10.77.250.11 only as IB/RoCE v1, not RoCE v2"),
        ({"state": "1: DOWN"}, "mlx5_0 port 1: state 1: DOWN"),
        ({"state": "2: INIT"}, "mlx5_0 port 1: state 2: INIT"),
        # VMware's paravirtual device: active_mtu 1024 under a 9000-byte netdev.
        ({"devinfo": "ibv_devinfo_pvrdma.txt", "name": "rocep11s0"}, "active_mtu 1024 (needs 4096"),
    ],
)
def test_roce_port_faults(change, detail) -> None:
    j = judge(roce_facts(**change))
    assert status(j) == "fail" and detail in summary(j.checks)[1], j.checks


def test_pvrdma_and_sriov_are_noted() -> None:
    j = judge(roce_facts(devinfo="ibv_devinfo_pvrdma.txt", name="rocep11s0"))
    assert any("vmw_pvrdma" in n for n in j.notes)
    facts = roce_facts() | {"rdma_drivers": {"mlx5_0": {"driver": "mlx5_core", "sriov_vf": True}}}
    assert any("SR-IOV virtual function" in n for n in judge(facts).notes)


def two_rails(rail_rate="100", rail_mbps=100000) -> dict:
    """A RoCE node with rdma0 on mlx5_0 (25 Gb/s) and rdma1 on mlx5_1."""
    facts = roce_facts()
    gid = {"index": 3, "gid": roce_gid_of("10.77.251.11"), "type": "RoCE v2", "netdev": "rdma1"}
    rail = {"port": 1, "state": "4: ACTIVE", "link_layer": "Ethernet", "rate": f"{rail_rate} Gb/sec (2X HDR)",
            "gids": [gid]}  # fmt: skip
    facts["rdma"].append({"name": "mlx5_1", "ports": [rail]})
    facts["ibv_devinfo"]["out"] += fixture("ibv_devinfo_roce.txt").replace("mlx5_0", "mlx5_1")
    facts["nic"]["rdma1"] = nic(speed_mbps=rail_mbps, virtual=False)
    return facts


TWO = [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}, {"name": "rdma1", "address": "10.77.251.11"}]


def test_every_rail_is_checked_as_the_first() -> None:
    facts = two_rails()
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}])
    j = judge(facts, cfg)
    assert status(j) == "pass", j.checks
    assert [c["detail"] for c in checks(j, "roce v2 gid")] == [
        "mlx5_0 port 1 GID index 3 is RoCE v2 for 10.77.250.11",
        "mlx5_1 port 1 GID index 3 is RoCE v2 for 10.77.251.11",
    ]
    # A rail whose port carries its address only as RoCE v1, or bound to no port, or gone, fails the node.
    facts["rdma"][1]["ports"][0]["gids"][0]["type"] = "IB/RoCE v1"
    assert "mlx5_1 port 1 carries 10.77.251.11 only as IB/RoCE v1" in summary(judge(facts, cfg).checks)[1]
    facts["rdma"][1]["ports"][0]["gids"] = []
    assert "rdma1: no RDMA port is bound to rdma1" in summary(judge(facts, cfg).checks)[1]
    del facts["nic"]["rdma1"]
    assert "fabric interface rdma1 does not exist" in summary(judge(facts, cfg).checks)[1]


def test_line_rate_of_every_link_and_a_link_trained_down() -> None:
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}])
    # No rate expected: each rail's rate is kept for the pair tests, the difference noted, nothing failed.
    j = judge(two_rails(), cfg)
    assert status(j) == "pass" and j.rates == {"rdma0": 25.0, "rdma1": 100.0}
    assert any("fabric links at different line rates (rdma0 25 Gb/s, rdma1 100 Gb/s)" in n for n in j.notes)
    # 100 Gb/s expected: rdma0's 25 Gb/s NIC and port fail, named; rdma1 passes.
    slow = judge(two_rails(), cfg | {"line_rate_gbps": 100.0})
    assert sorted((c["check"], c["detail"]) for c in slow.checks if c["status"] == "fail") == [
        ("nic speed", "rdma0 25 Gb/s, below the expected 100 Gb/s (trained down?)"),
        ("port rate", "mlx5_0 port 1 25 Gb/s, below the expected 100 Gb/s (trained down?)"),
    ]
    assert not any("different line rates" in n for n in slow.notes)
    # A port that trained down under a NIC that says 100 Gb/s: the rail keeps the lower rate.
    assert judge(two_rails(rail_rate="50"), cfg).rates["rdma1"] == 50.0


def test_a_link_below_the_rate_it_passed_the_ladder_at_fails() -> None:
    """No line rate in the inventory: the baseline (the last passing verdict's rail speeds) holds each link."""
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}], baseline={"rail_gbps": {"rdma1": 100.0}})
    assert status(judge(two_rails(), cfg)) == "pass"
    down = judge(two_rails(rail_rate="50", rail_mbps=50000), cfg)
    assert [c["detail"] for c in down.checks if c["status"] == "fail"] == [
        "rdma1 50 Gb/s, below the rate it passed the ladder at, 100 Gb/s (trained down?)",
        "mlx5_1 port 1 50 Gb/s, below the rate it passed the ladder at, 100 Gb/s (trained down?)",
    ]


IB_PORT = {"port": 1, "state": "4: ACTIVE", "link_layer": "InfiniBand", "rate": "100 Gb/sec (4X EDR)", "lid": "0x7",
           "sm_lid": "0x1", "gids": []}  # fmt: skip


def ib_facts(port=None, sminfo=None) -> dict:
    return {
        "nic": {"rdma0": nic()},
        "rdma": [{"name": "mlx5_0", "ports": [IB_PORT | (port or {})]}],
        "ibv_devinfo": {"rc": 0, "out": fixture("ibv_devinfo_ib.txt"), "err": ""},
        "sminfo": {"rc": 0, "out": fixture("sminfo_master.txt") if sminfo is None else sminfo, "err": ""},
        "modules": ["ib_core"],
    }


STANDBY = fixture("sminfo_master.txt").replace("state 3 SMINFO_MASTER", "state 2 SMINFO_STANDBY")


@pytest.mark.parametrize(
    ("port", "sminfo", "check", "detail"),
    [
        # Each of these passed the whole suite as a one-line change of the rule before these cases existed.
        ({"lid": "0x0"}, None, "lid", "mlx5_0 port 1: LID 0x0"),
        ({"lid": None}, None, "lid", "mlx5_0 port 1: LID None"),
        ({"sm_lid": "0x0"}, None, "sm lid", "mlx5_0 port 1: SM LID 0x0"),
        ({}, STANDBY, "subnet manager", "SM at LID 1 (0x0c42a10300658e2a) is SMINFO_STANDBY"),
        ({}, fixture("sminfo_no_sm.txt"), "subnet manager", "sminfo found no subnet manager: ibwarn"),
        ({"link_layer": "Ethernet"}, None, "link layer", "mlx5_0 port 1: link layer Ethernet (configured InfiniBand)"),
    ],
)
def test_infiniband_port_needs_a_lid_a_master_sm_and_its_link_layer(port, sminfo, check, detail) -> None:
    cfg = config(link_layer="infiniband")
    assert status(judge(ib_facts(), cfg)) == "pass", judge(ib_facts(), cfg).checks
    j = judge(ib_facts(port, sminfo), cfg)
    failed = [c for c in j.checks if c["status"] == "fail"]
    assert [(c["check"], c["detail"][: len(detail)]) for c in failed] == [(check, detail)], j.checks
    assert j.rates["mlx5_0:1"] == 100.0


def test_roce_port_whose_link_layer_is_infiniband_fails() -> None:
    facts = roce_facts()
    facts["rdma"][0]["ports"][0]["link_layer"] = "InfiniBand"
    j = judge(facts)
    assert [c["detail"] for c in j.checks if c["status"] == "fail"] == [
        "mlx5_0 port 1: link layer InfiniBand (configured Ethernet)"
    ]
