"""The NIC counters rdma-node-check reads, as metrics: the RDMA ports' mlx5 `hw_counters` (congestion and
transport errors: sysfs `/sys/class/infiniband/<dev>/ports/<port>/hw_counters/`, read by node/sysfs.py) and the
fabric interfaces' per-priority PFC pause counters (`ethtool -S <if>`, parsed by node/parsers.py).

New here: the per-priority PFC pause frames and pause time with priority and direction as labels (node_exporter's
ethtool collector is off by default and names each driver counter on its own, `node_ethtool_rx_prio3_pause`), and
the chosen hw_counters under one name with the counter as a label (node_exporter's infiniband collector reads
`counters/`; only recent upstream versions read `hw_counters/` at all, each under its own name: which version a
node runs is not checked here). Not repeated: the standard port counters of `counters/` (symbol_error,
link_downed, port_rcv_errors, port_xmit_discards, data and packets ...), node_exporter's `node_infiniband_*_total`.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import DEFAULTS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_ethtool_stats

# The congestion counters the node check reports (its report_counters: out_of_buffer, CNPs sent and handled,
# ECN-marked RoCE packets), then the transport's retry and error counters (mlx5 hw_counters, NVIDIA's
# "Understanding mlx5 Linux Counters"): a lossy or congested fabric shows there before a job fails.
HW_COUNTERS = (
    *DEFAULTS["report_counters"],
    "rp_cnp_ignored",
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "duplicate_request",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "req_cqe_error",
    "resp_cqe_error",
)
# mlx5's per-priority PFC counters (en_stats.c pport_per_prio_pfc_stats_desc): frames, and the time paused in
# microseconds (`_duration`); node/config.py's PAUSE_COUNTER is the same name for the no-drop priority only.
PFC = re.compile(r"(rx|tx)_prio(\d)_pause(_duration)?")
DIRECTION = {"rx": "received", "tx": "sent"}
SYSFS = "/sys/class/infiniband/<dev>/ports/<port>/hw_counters/"
METRICS = table(
    Metric("rdma_llm_rdma_hw_counter_total", "counter", "", ("device", "port", "counter"),
           "An RDMA port's mlx5 hw_counter (congestion: CNPs, ECN marks, out_of_buffer; transport retries and "
           "errors), by its sysfs name", SYSFS),
    Metric("rdma_llm_nic_pfc_pause_frames_total", "counter", "frames", ("interface", "priority", "direction"),
           "PFC pause frames of one priority, received (the switch paused this NIC) or sent (this NIC paused the "
           "switch)", "ethtool -S <if>: rx_prioN_pause, tx_prioN_pause"),
    Metric("rdma_llm_nic_pfc_pause_seconds_total", "counter", "seconds", ("interface", "priority", "direction"),
           "Time one priority was paused by PFC, received or sent", "ethtool -S <if>: rx_prioN_pause_duration "
           "(microseconds)"),
)  # fmt: skip


def hw_samples(ports: dict) -> list:
    """node/sysfs.py port_counters() ({"mlx5_0:1": {"counters": ..., "hw_counters": {name: int}}}, also the node
    check's result `counters.ports`): the HW_COUNTERS a port has. A counter the driver does not list is absent."""
    out = []
    for key, groups in (ports or {}).items():
        device, _, port = str(key).rpartition(":")
        for name, value in ((groups or {}).get("hw_counters") or {}).items():
            if name in HW_COUNTERS and isinstance(value, int):
                out.append(("rdma_llm_rdma_hw_counter_total", {"device": device, "port": port, "counter": name}, value))
    return out


def pfc_samples(stats: dict) -> list:
    """{interface: {ethtool counter: int}} (parse_ethtool_stats of each fabric interface, or the node check's
    `counters.pause`): every priority's pause frames and pause time."""
    out = []
    for ifname, counters in (stats or {}).items():
        for name, value in (counters or {}).items():
            m = PFC.fullmatch(name)
            if not m or not isinstance(value, int):
                continue
            labels = {"interface": ifname, "priority": m.group(2), "direction": DIRECTION[m.group(1)]}
            if m.group(3):
                out.append(("rdma_llm_nic_pfc_pause_seconds_total", labels, value / 1e6))
            else:
                out.append(("rdma_llm_nic_pfc_pause_frames_total", labels, value))
    return out


def ethtool_stats(outputs: dict) -> dict:
    """{interface: `ethtool -S` text} -> {interface: {counter: int}} (node/parsers.py's reading)."""
    return {ifname: parse_ethtool_stats(text or "") for ifname, text in (outputs or {}).items()}


def samples(ports: dict, stats: dict) -> list:
    return hw_samples(ports) + pfc_samples(stats)


def textfile(ports: dict, stats: dict) -> str:
    return render(METRICS, samples(ports, stats))
