"""The NIC counters as metrics (monitoring/rdma.py): the chosen mlx5 hw_counters, per-priority PFC pause frames
and pause time. Samples: `node_check/sysfs_h100` (a real H100 node's /sys/class/infiniband, read by the node
check's own node/sysfs.py; np_cnp_sent, which that recording lacks, is added as the node tests add what a case
needs) and `node_check/ethtool_mlx5_pfc_prio3.txt` (`ethtool -S` of a ConnectX-4 with priority 3's pause counters
in the driver's names, values ours; `ethtool_mlx5_cx4.txt` is the same NIC with PFC off)."""

from __future__ import annotations

import shutil

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import rdma
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import port_counters

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import FIX, fixture, names, series, value


def h100_ports(tmp_path, cnp: int | None = None) -> dict:
    root = tmp_path / "root"
    shutil.copytree(FIX / "node_check" / "sysfs_h100", root / "sys/class/infiniband")
    if cnp is not None:
        (root / "sys/class/infiniband/mlx5_bond_0/ports/1/hw_counters/np_cnp_sent").write_text(f"{cnp}\n")
    return port_counters(root)


def test_the_chosen_hw_counters_of_each_port(tmp_path) -> None:
    text = rdma.textfile(h100_ports(tmp_path, cnp=4242), {})
    hw = series(text, "rdma_llm_rdma_hw_counter_total")
    # The recording's retransmissions (roce_adp_retrans 3) on both devices, the added CNPs on the bond.
    assert value(text, "rdma_llm_rdma_hw_counter_total", device="mlx5_0", port=1, counter="roce_adp_retrans") == 3
    assert value(text, "rdma_llm_rdma_hw_counter_total", device="mlx5_bond_0", port=1, counter="np_cnp_sent") == 4242
    assert value(text, "rdma_llm_rdma_hw_counter_total", device="mlx5_0", port=1, counter="out_of_sequence") == 0
    counters = {dict(k)["counter"] for k in hw}
    # Not chosen: traffic counters (rx_write_requests 3809045607 in the recording) and lifespan (not a count).
    assert not counters & {"rx_write_requests", "rx_read_requests", "rx_dct_connect", "lifespan"}
    assert counters <= set(rdma.HW_COUNTERS)
    assert {"out_of_buffer", "out_of_sequence", "local_ack_timeout_err", "packet_seq_err"} <= counters


def test_the_standard_port_counters_are_left_to_node_exporter(tmp_path) -> None:
    ports = h100_ports(tmp_path)
    assert ports["mlx5_0:1"]["counters"]["port_rcv_errors"] == 14  # read, and in node_infiniband_* already
    text = rdma.textfile(ports, {})
    assert not {dict(k)["counter"] for k in series(text, "rdma_llm_rdma_hw_counter_total")} & set(
        ports["mlx5_0:1"]["counters"]
    )


def test_pfc_pause_frames_and_time_per_priority_and_direction() -> None:
    stats = rdma.ethtool_stats({"rdma0": fixture("node_check/ethtool_mlx5_pfc_prio3.txt")})
    text = rdma.textfile({}, stats)
    frames = "rdma_llm_nic_pfc_pause_frames_total"
    assert value(text, frames, interface="rdma0", priority=3, direction="received") == 41927  # rx_prio3_pause
    assert value(text, frames, interface="rdma0", priority=3, direction="sent") == 1290418  # tx_prio3_pause
    assert len(series(text, frames)) == 2  # not the global pause counters, not rx_prio3_pause_transition
    seconds = "rdma_llm_nic_pfc_pause_seconds_total"
    assert value(text, seconds, interface="rdma0", priority=3, direction="received") == 0.008134  # 8134 us
    assert value(text, seconds, interface="rdma0", priority=3, direction="sent") == 2.914772


def test_no_pfc_series_where_the_driver_lists_no_pause_counters() -> None:
    stats = rdma.ethtool_stats({"rdma0": fixture("node_check/ethtool_mlx5_cx4.txt")})
    assert stats["rdma0"] and rdma.textfile({}, stats) == ""


def test_the_node_checks_own_reading_gives_the_same_samples(tmp_path) -> None:
    # rdma-node-check's result keeps the same two readings (`counters.ports`, `counters.pause`).
    ports = h100_ports(tmp_path, cnp=1)
    pause = {"rdma0": {"rx_prio3_pause": 5, "tx_prio3_pause": 6, "rx_prio3_pause_duration": 7}}
    result = {"counters": {"ports": ports, "deltas": {}, "pause": pause}}
    text = rdma.textfile(result["counters"]["ports"], result["counters"]["pause"])
    assert value(text, "rdma_llm_nic_pfc_pause_frames_total", interface="rdma0", priority=3, direction="sent") == 6
    assert names(text) == {
        "rdma_llm_rdma_hw_counter_total",
        "rdma_llm_nic_pfc_pause_frames_total",
        "rdma_llm_nic_pfc_pause_seconds_total",
    }
