"""The ladder's parsers (ladder/parsers.py) on recorded tool outputs (tests/fixtures/validate/, see its
README): perftest, iperf3, the switch's counters, Ansible's word for a host that does not answer."""

from __future__ import annotations

import json

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import (
    collectives,
    jobs,
    nodes,
    pairing,
    pairs,
    parsers,
    rung,
    switches,
    units,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import verdict as ladder
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.fabric import VMWARE_VENDOR_ID
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_ibv_devinfo, parse_sminfo
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import link_rate_gbps, roce_gid_of

from tests.unit.plugins.module_utils.ladder.ladder_helpers import fixture

# ------------------------------------------------------------------------------------ tool outputs


def test_parse_ibv_devinfo_roce() -> None:
    (dev,) = parse_ibv_devinfo(fixture("ibv_devinfo_roce.txt"))
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
    (ib,) = parse_ibv_devinfo(fixture("ibv_devinfo_ib.txt"))
    assert ib["ports"][0]["link_layer"] == "InfiniBand" and ib["ports"][0]["port_lid"] == 7
    (pv,) = parse_ibv_devinfo(fixture("ibv_devinfo_pvrdma.txt"))
    assert pv["vendor_id"] == VMWARE_VENDOR_ID and pv["ports"][0]["active_mtu"] == 1024


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
    sm = parse_sminfo(fixture("sminfo_master.txt"))
    assert sm["sm_lid"] == 1 and sm["priority"] == 15 and sm["state_name"] == "SMINFO_MASTER"
    assert parse_sminfo(fixture("sminfo_no_sm.txt")) is None


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


def test_the_node_parsers_are_the_node_checks() -> None:
    """One implementation: the ladder's parsers of the node's tools are rdma-node-check's."""
    assert units.link_rate_gbps is link_rate_gbps and nccl.roce_gid_of is roce_gid_of
    modules = (units, parsers, pairing, rung, nodes, pairs, collectives, switches, jobs, ladder)
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
