"""The alert rules: one table (RULES) of what Prometheus alerts on, built from the metrics this package writes
(docs/monitoring.md's table) and node_exporter 1.5's own (NODE_EXPORTER), and `rules(params)`, the rule file
document (`{"groups": [...]}`) the monitoring role writes into /etc/prometheus/rules/ (filter `monitoring_rules`).

Every threshold is a parameter (DEFAULTS, each with its source); the node checks' own thresholds come from
node/config.py, so an alert and the check that drains a node agree. Each rule's expression names its parameters as
`%name`; descriptions name the host (`{{ $labels.instance }}`, its inventory name: server.py targets) and the
device, port, switch or run the series carries. Alerts add one label, `severity` (critical: a job is failing or
will; warning: a node or link needs a look; info: reported, not judged); labels hold names only, no credential.

Tested in tests/unit/plugins/module_utils/monitoring/test_rules.py, with `promtool test rules` on the files of
its promtool/ folder (input series, and when each alert fires and when it must not).
"""

from __future__ import annotations

import math
import re
from string import Template
from typing import NamedTuple

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle.rolling import PLANNED_OWNERS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.node_health import VERDICTS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.rdma import HW_COUNTERS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import DEFAULTS as NODE_CHECK
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

# Prometheus's duration syntax (prometheus/common model.ParseDuration): units in this order, each once.
DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
UNITS = (("y", 365 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))


def duration_text(whole_seconds: int) -> str:
    """Whole seconds as a Prometheus duration (86400 -> 1d, 90 -> 1m30s, 0 -> 0s): node/config.py's seconds."""
    out, left = "", int(whole_seconds)
    for unit, size in UNITS[2:6]:  # days to seconds: a week or a year of seconds reads better in days
        if left >= size:
            out, left = out + f"{left // size}{unit}", left % size
    return out or "0s"


# A node a rollout or a repair holds drained, their batch (lifecycle/rolling.py PLANNED_OWNERS): planned, not a fault.
_HELD = f'rdma_llm_slurm_node_drained_by{{by=~"{"|".join(PLANNED_OWNERS)}"}} == 1'
TRANSPORT_COUNTERS = ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
                      "rnr_nak_retry_err")  # fmt: skip
DEFAULTS = {
    # The scrape job of node_exporter: `node`, as the monitoring role's prometheus.yml.j2 names it.
    "node_exporter_job": "node",
    # A node, slurmctld or a switch that does not answer: 5 m, Prometheus's own example rule InstanceDown
    # (docs/configuration/alerting_rules.md, `up == 0` for 5m).
    "down_for": "5m",
    # The fabric interfaces the link rules watch (the inventory's cluster_fabric_interfaces, names or dicts with
    # `name`, of every node); none: the link rules are left out.
    "fabric_interfaces": [],
    # A fabric link (a node's interface or a switch port) down this long: the node check's outage_max_s, 30 s
    # (NVIDIA Health Validation rdma_linkflap_fatal: one outage of 30 s or more is fatal).
    "link_down_for": duration_text(NODE_CHECK["outage_max_s"]),
    # Link flaps: flap_max downs in flap_window_s, the node check's (Azure check_ib_link_flapping: 5 in 24 h).
    "flap_max": NODE_CHECK["flap_max"],
    "flap_window": duration_text(NODE_CHECK["flap_window_s"]),
    # The window every counter's rate or increase is taken over: 5 m, node_exporter's node-mixin rateInterval
    # (docs/node-mixin/config.libsonnet); ten of the collector's 30 s writes.
    "rate_window": "5m",
    # RDMA port error counters (node_exporter's infiniband ones, the node check's error_counters) must not grow:
    # the node check fails a port whose counter grew between two readings (GCM check-ib-counters).
    "port_errors_max": 0,
    # Transport retries and errors (mlx5 hw_counters): on a lossless fabric each one is a packet lost (NVIDIA,
    # "Understanding mlx5 Linux Counters"); the lossless class must drop nothing (cluster_validate's switch rung).
    "transport_counters": list(TRANSPORT_COUNTERS),
    "transport_errors_max": 0,
    # PFC storm: a priority paused more than 20 % of the time over the rate window. SONiC's PFC watchdog calls a
    # queue paused for 200 ms a storm (pfcwd DEFAULT_DETECTION_TIME 200, field-references.md 3a), read here as
    # 200 ms in each second on average.
    "pfc_pause_ratio_max": 0.2,
    # The same at a switch port, in pause frames: a frame at the full quanta (65535 x 512 bit times) pauses a
    # 100 Gb/s port 335.5 us, so 20 % of each second paused takes 0.2 / 335.5 us = ~600 frames/s.
    "switch_pfc_frames_per_second": 600,
    # ECN marks: any, for 10 m. The node check reports ECN marks and does not judge them (its report_counters):
    # severity info, a fabric that stays congested.
    "ecn_marks_per_second": 0,
    "ecn_for": "10m",
    # A switch's poll (a monitoring host's rdma_llm_switch_<switch>.prom, roles/monitoring tasks/switches.yml) older
    # than this: 10 m, ten polls of the controller's timer at the 1 m its README gives: the project's choice. Its
    # counters are frozen then, not quiet.
    "switch_read_stale_after": "10m",
    # The lossless qos-group, whose drops must stay zero: the node check's nodrop_priority (cluster_nodrop_cos, 3).
    "nodrop_qos_group": NODE_CHECK["nodrop_priority"],
    # GPU memory: the node check's thresholds (uncorrectable ECC since the driver loaded: GCM check-nvidia-smi 0;
    # more than 512 rows remapped for uncorrectable errors: Azure azure_gpu_ecc.nhc).
    "ecc_uncorrectable_volatile_max": NODE_CHECK["ecc_uncorrectable_volatile_max"],
    "row_remap_uncorrectable_max": NODE_CHECK["row_remap_uncorrectable_max"],
    # The collector (rdma-llm-metrics) failing a reading for 10 m, twenty of its 30 s runs: the project's choice, long
    # enough that a reading failing once (a tool's timeout) does not page, short enough that the alerts built on the
    # reading are not silent for long.
    "collector_failing_for": "10m",
    # Filesystems: less than 5 % available for 30 m, node_exporter's node-mixin NodeFilesystemAlmostOutOfSpace
    # (fsSpaceAvailableWarningThreshold 5, for 30m).
    "disk_free_min": 0.05,
    "disk_full_for": "30m",
    # A node a rollout's batch or a repair holds drained this long: its run stopped before resuming it (a controller
    # lost mid-run). 2 h: the rollout waits up to rolling_job_deadline (3600 s, roles/rolling/defaults) for a batch's
    # jobs, then changes and proves it in minutes; a repair's reboot may take rolling_repair_reboot_timeout (600 s).
    "drain_held_for": "2h",
    # A run whose newest step is older than this: the project's choice, over three times the payload's pg_timeout
    # (90 s, payload/config.py), after which a collective's wait fails the job: a stall no timeout ends.
    "train_stall_after": "5m",
    # A run's tokens/s below 0.7 of its own best in the last hour, for 10 m: 0.7 is the launch's straggler rule
    # (train_launch_straggler_threshold, nvidia-resiliency-ext's relative performance threshold); the hour and the
    # 10 m are the project's choice (longer than an evaluation pass or a checkpoint).
    "train_throughput_min_ratio": 0.7,
    "train_throughput_window": "1h",
    "train_throughput_for": "10m",
}
# node_exporter 1.5.0's names the rules read (collector/netclass_linux.go, filesystem_common.go,
# infiniband_linux.go at v1.5.0), each labelled device (and port, or mountpoint and fstype).
NODE_EXPORTER = {
    "up": "Prometheus: 1 when the scrape succeeded",
    "node_network_up": "netclass: operstate is up",
    "node_network_carrier_down_changes_total": "netclass: carrier_down_count, a link's downs",
    "node_filesystem_avail_bytes": "filesystem: space available to non-root users",
    "node_filesystem_size_bytes": "filesystem: size",
    "node_filesystem_readonly": "filesystem: 1 when mounted read-only",
    "node_textfile_mtime_seconds": "textfile: each file's modification time (label file)",
}
# The node check's error_counters (sysfs counters/ names) as node_exporter 1.5's infiniband collector names them.
PORT_ERRORS = {
    "symbol_error": "node_infiniband_symbol_error_total",
    "link_error_recovery": "node_infiniband_link_error_recovery_total",
    "link_downed": "node_infiniband_link_downed_total",
    "port_rcv_errors": "node_infiniband_port_errors_received_total",
    "port_rcv_remote_physical_errors": "node_infiniband_port_receive_remote_physical_errors_total",
    "port_rcv_switch_relay_errors": "node_infiniband_port_receive_switch_relay_errors_total",
    "port_xmit_discards": "node_infiniband_port_discards_transmitted_total",
    "port_xmit_constraint_errors": "node_infiniband_port_constraint_errors_transmitted_total",
    "port_rcv_constraint_errors": "node_infiniband_port_constraint_errors_received_total",
    "local_link_integrity_errors": "node_infiniband_local_link_integrity_errors_total",
    "excessive_buffer_overrun_errors": "node_infiniband_excessive_buffer_overrun_errors_total",
    "VL15_dropped": "node_infiniband_vl15_dropped_total",
}
NODE_EXPORTER.update({name: f"infiniband: counters/{counter}" for counter, name in PORT_ERRORS.items()})
# RAM-backed filesystems are memory, not disk: the disk rule leaves them out.
RAM_FSTYPES = "tmpfs|ramfs"
# Linux interface names as the project's inventories write them (IFNAMSIZ: 15 characters at most).
IFNAME = re.compile(r"[A-Za-z0-9_.-]{1,15}")
JOB = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
GROUPS = ("rdma_llm_nodes", "rdma_llm_fabric", "rdma_llm_switches", "rdma_llm_gpus", "rdma_llm_slurm",
          "rdma_llm_training")  # fmt: skip


class Rule(NamedTuple):
    """One alert: its name, group, PromQL (`%param` for a parameter's value), the parameter its `for:` is (None:
    fires at once), severity, summary and description (Prometheus templates), what it means in words (docs), the
    source of its threshold, and the parameter without which it is left out."""

    alert: str
    group: str
    expr: str
    for_: str | None
    severity: str
    summary: str
    description: str
    when: str
    source: str
    needs: str | None = None


def _port_errors_expr() -> str:
    # One increase per counter, each labelled with its sysfs name (rate drops __name__, so the name goes in `counter`).
    return " or ".join(
        f'label_replace(increase({metric}[%rate_window]) > %port_errors_max, "counter", "{counter}", "", "")'
        for counter, metric in PORT_ERRORS.items()
    )


FS = f'fstype!~"{RAM_FSTYPES}"'
RULES = (
    Rule("RdmaLlmNodeDown", "rdma_llm_nodes", 'up{job="%node_exporter_job"} == 0', "down_for", "critical",
         "{{ $labels.instance }} does not answer",
         "Prometheus has not scraped node_exporter on {{ $labels.instance }} for %down_for: the host, its network "
         "or node_exporter is down.",
         "node_exporter's scrape fails", "Prometheus docs, InstanceDown"),
    Rule("RdmaLlmNodeCheckFailed", "rdma_llm_nodes", f"rdma_llm_node_check_verdict == {VERDICTS['fail']}", None,
         "warning", "rdma-node-check fails {{ $labels.instance }}",
         "The node check's verdict on {{ $labels.instance }} is fail: a scheduler drains the node. Its failing "
         "checks: rdma_llm_node_check_status == 2 on that instance, the reasons in its JSON result.",
         "the node check's verdict is fail", "node/config.py: the node check's own thresholds"),
    Rule("RdmaLlmCollectorFailing", "rdma_llm_nodes", "rdma_llm_collector_success == 0", "collector_failing_for",
         "warning", "rdma-llm-metrics cannot read {{ $labels.collector }} on {{ $labels.instance }}",
         "The {{ $labels.collector }} reading of rdma-llm-metrics has failed on {{ $labels.instance }} for "
         "%collector_failing_for: the alerts built on it are silent there. The reason is in the host's journal "
         "(journalctl -u rdma-llm-metrics).",
         "the collector failed a reading", "project: twenty runs of the collector's 30 s timer"),
    Rule("RdmaLlmDiskNearlyFull", "rdma_llm_nodes",
         f"node_filesystem_avail_bytes{{{FS}}} / node_filesystem_size_bytes{{{FS}}} < %disk_free_min"
         f" and node_filesystem_readonly{{{FS}}} == 0", "disk_full_for", "warning",
         "{{ $labels.mountpoint }} on {{ $labels.instance }} is nearly full",
         "{{ $labels.mountpoint }} ({{ $labels.device }}) on {{ $labels.instance }} has {{ $value | "
         "humanizePercentage }} of its space left (under %disk_free_min).",
         "a writable filesystem's available share under disk_free_min", "node-mixin NodeFilesystemAlmostOutOfSpace"),
    Rule("RdmaLlmFabricLinkDown", "rdma_llm_fabric", 'node_network_up{device=~"%fabric_regex"} == 0',
         "link_down_for", "critical", "Fabric interface {{ $labels.device }} on {{ $labels.instance }} is down",
         "{{ $labels.device }} on {{ $labels.instance }} has been down for %link_down_for: its rail carries no "
         "RDMA traffic and a job using it fails.",
         "a fabric interface is not up", "node check outage_max_s (NVIDIA rdma_linkflap_fatal)", "fabric_interfaces"),
    Rule("RdmaLlmFabricLinkFlapping", "rdma_llm_fabric",
         'increase(node_network_carrier_down_changes_total{device=~"%fabric_regex"}[%flap_window]) >= %flap_max',
         None, "warning", "Fabric interface {{ $labels.device }} on {{ $labels.instance }} flaps",
         "{{ $labels.device }} on {{ $labels.instance }} lost its carrier {{ $value | humanize }} times in "
         "%flap_window (%flap_max or more fail the node check): a cable, a transceiver or a port.",
         "flap_max carrier losses in flap_window", "node check flap_max, flap_window_s (Azure check_ib_link_flapping)",
         "fabric_interfaces"),
    Rule("RdmaLlmRdmaPortErrors", "rdma_llm_fabric", _port_errors_expr(), None, "warning",
         "RDMA port {{ $labels.device }}/{{ $labels.port }} on {{ $labels.instance }} counts errors",
         "{{ $labels.counter }} of {{ $labels.device }} port {{ $labels.port }} on {{ $labels.instance }} grew by "
         "{{ $value | humanize }} in %rate_window: the node check fails a port whose error counters grow.",
         "an error counter of counters/ grew", "node check error_counters (GCM check-ib-counters)"),
    Rule("RdmaLlmRdmaTransportErrors", "rdma_llm_fabric",
         'increase(rdma_llm_rdma_hw_counter_total{counter=~"%transport_regex"}[%rate_window]) > %transport_errors_max',
         None, "warning",
         "RDMA transport retries on {{ $labels.device }}/{{ $labels.port }} of {{ $labels.instance }}",
         "{{ $labels.counter }} of {{ $labels.device }} port {{ $labels.port }} on {{ $labels.instance }} grew by "
         "{{ $value | humanize }} in %rate_window: packets are lost on a fabric that should drop none.",
         "a transport retry or error hw_counter grew", "mlx5 counters; lossless class drops nothing"),
    Rule("RdmaLlmNicPfcStorm", "rdma_llm_fabric",
         "rate(rdma_llm_nic_pfc_pause_seconds_total[%rate_window]) > %pfc_pause_ratio_max", None, "critical",
         "PFC storm on {{ $labels.interface }} of {{ $labels.instance }}",
         "Priority {{ $labels.priority }} of {{ $labels.interface }} on {{ $labels.instance }}: PFC pauses "
         "{{ $labels.direction }} {{ $value | humanizePercentage }} of the last %rate_window (over "
         "%pfc_pause_ratio_max): received, the fabric holds this NIC back; sent, this NIC cannot drain its queue.",
         "a priority paused over pfc_pause_ratio_max of the time", "SONiC PFC watchdog detection time 200 ms"),
    Rule("RdmaLlmNicEcnMarked", "rdma_llm_fabric",
         'rate(rdma_llm_rdma_hw_counter_total{counter="np_ecn_marked_roce_packets"}[%rate_window])'
         " > %ecn_marks_per_second", "ecn_for", "info",
         "ECN-marked RoCE packets reach {{ $labels.device }} on {{ $labels.instance }}",
         "{{ $labels.device }} port {{ $labels.port }} on {{ $labels.instance }} receives {{ $value | humanize }} "
         "ECN-marked RoCE packets a second, for %ecn_for: the fabric on its path stays congested.",
         "ECN-marked packets arrive for ecn_for", "node check report_counters (reported, not judged)"),
    Rule("RdmaLlmSwitchDown", "rdma_llm_switches", "rdma_llm_switch_up == 0", "down_for", "critical",
         "Switch {{ $labels.switch }} does not answer",
         "The poll written on {{ $labels.instance }} has not read switch {{ $labels.switch }} for %down_for: its "
         "management address, its login or the switch is down. Its ports are not watched meanwhile.",
         "the switch's CLI does not answer", "Prometheus docs, InstanceDown"),
    Rule("RdmaLlmSwitchReadStale", "rdma_llm_switches",
         'time() - node_textfile_mtime_seconds{file=~"(.*/)?rdma_llm_switch_.+[.]prom"} > %switch_read_stale_after_s',
         None, "warning", "The switches' poll on {{ $labels.instance }} is stale",
         "{{ $labels.file }} on {{ $labels.instance }} was written {{ $value | humanizeDuration }} ago (over "
         "%switch_read_stale_after): that switch's counters are frozen, not quiet; its poll "
         "(playbooks/monitoring_switches.yml) has stopped.",
         "a switch poll's file is older than switch_read_stale_after", "the project's choice: ten 1 m polls"),
    Rule("RdmaLlmSwitchPortDown", "rdma_llm_switches", "rdma_llm_switch_port_up == 0", "link_down_for", "critical",
         "Port {{ $labels.port }} of switch {{ $labels.switch }} is down",
         "{{ $labels.port }} of {{ $labels.switch }} has been down for %link_down_for: the host behind it lost "
         "that rail.",
         "a watched switch port's link is down", "node check outage_max_s (NVIDIA rdma_linkflap_fatal)"),
    Rule("RdmaLlmSwitchPfcStorm", "rdma_llm_switches",
         "rate(rdma_llm_switch_port_pfc_pause_frames_total[%rate_window]) > %switch_pfc_frames_per_second", None,
         "critical", "PFC storm on port {{ $labels.port }} of switch {{ $labels.switch }}",
         "{{ $labels.port }} of {{ $labels.switch }} {{ $labels.direction }} {{ $value | humanize }} PFC pause "
         "frames a second over %rate_window (over %switch_pfc_frames_per_second): received, the host behind it "
         "pauses the fabric; sent, the switch holds that host back.",
         "pause frames over switch_pfc_frames_per_second", "PFC watchdog 200 ms, at 100 Gb/s full quanta"),
    Rule("RdmaLlmSwitchEcnMarking", "rdma_llm_switches",
         "rate(rdma_llm_switch_port_ecn_marked_total[%rate_window]) > %ecn_marks_per_second", "ecn_for", "info",
         "Switch {{ $labels.switch }} ECN-marks on {{ $labels.port }}",
         "{{ $labels.port }} of {{ $labels.switch }} marks {{ $value | humanize }} packets a second in qos-group "
         "{{ $labels.qos_group }}, for %ecn_for: its egress queue stays congested.",
         "a port's queue ECN-marks for ecn_for", "node check report_counters (reported, not judged)"),
    Rule("RdmaLlmSwitchLosslessDrops", "rdma_llm_switches",
         'increase(rdma_llm_switch_port_drops_total{qos_group="%nodrop_qos_group"}[%rate_window]) > 0'
         " or increase(rdma_llm_switch_port_ingress_drops_total[%rate_window]) > 0", None, "critical",
         "Switch {{ $labels.switch }} drops lossless traffic on {{ $labels.port }}",
         "{{ $labels.port }} of {{ $labels.switch }} dropped {{ $value | humanize }} packet(s) in %rate_window in the "
         "lossless class (qos-group %nodrop_qos_group, or on ingress): PFC is not holding.",
         "the lossless qos-group or ingress drops a packet", "cluster_validate: the lossless class drops nothing"),
    Rule("RdmaLlmGpuEccUncorrected", "rdma_llm_gpus",
         'rdma_llm_gpu_ecc_uncorrected_errors_total{scope="volatile"} > %ecc_uncorrectable_volatile_max', None,
         "critical", "GPU {{ $labels.gpu }} of {{ $labels.instance }} has uncorrected ECC errors",
         "GPU {{ $labels.gpu }} on {{ $labels.instance }} counts {{ $value | humanize }} uncorrected ECC error(s) "
         "since the driver loaded: the node check fails it; the GPU needs a reset.",
         "uncorrected ECC errors since the driver loaded", "node check ecc_uncorrectable_volatile_max (GCM)"),
    Rule("RdmaLlmGpuRowRemapFailed", "rdma_llm_gpus",
         "rdma_llm_gpu_remapped_rows_failure == 1"
         ' or rdma_llm_gpu_remapped_rows{cause="uncorrectable"} > %row_remap_uncorrectable_max', None, "critical",
         "GPU {{ $labels.gpu }} of {{ $labels.instance }} needs service",
         "GPU {{ $labels.gpu }} on {{ $labels.instance }} failed a row remapping, or has more than "
         "%row_remap_uncorrectable_max rows remapped for uncorrectable errors.",
         "a row remapping failed, or too many rows remapped", "node check row_remap_uncorrectable_max (Azure)"),
    Rule("RdmaLlmGpuRowRemapPending", "rdma_llm_gpus", "rdma_llm_gpu_remapped_rows_pending == 1", None, "warning",
         "GPU {{ $labels.gpu }} of {{ $labels.instance }} waits for a reset",
         "A row remapping of GPU {{ $labels.gpu }} on {{ $labels.instance }} is pending: it applies at the next GPU "
         "reset; the node check fails the GPU until then.",
         "a row remapping waits for a GPU reset", "node check: pending fails (Azure azure_gpu_ecc.nhc)"),
    Rule("RdmaLlmGpuXid", "rdma_llm_gpus", f'rdma_llm_node_check_status{{check="gpu xid"}} == {VERDICTS["fail"]}',
         None, "critical",
         "A GPU of {{ $labels.instance }} reported a fatal XID",
         "The node check's gpu xid check fails on {{ $labels.instance }}: a GPU logged an XID of its list this "
         "boot; the reason, with the GPU and the XID, is in its JSON result.",
         "the node check's gpu xid check fails", "node check xids (Azure azure_gpu_xid.nhc)"),
    Rule("RdmaLlmSlurmDown", "rdma_llm_slurm", "rdma_llm_slurm_up == 0", "down_for", "critical",
         "slurmctld does not answer",
         "scontrol on {{ $labels.instance }} has not reached slurmctld for %down_for: no job starts or ends.",
         "slurmctld does not answer", "Prometheus docs, InstanceDown"),
    Rule("RdmaLlmSlurmNodeDrained", "rdma_llm_slurm",
         'rdma_llm_slurm_node_state{state=~"drained|draining"} == 1 unless on (instance, node) ' + _HELD,
         None, "warning", "Slurm node {{ $labels.node }} is {{ $labels.state }}",
         "Slurm keeps new jobs off {{ $labels.node }} ({{ $labels.state }}); a node the node check failed is drained "
         "with its reason (scontrol show node {{ $labels.node }}).",
         "a Slurm node is drained or draining, unless a rollout or a repair holds it (its batch, not a failure)",
         "the node check's drain (node/slurm.py); rolling.yml and repair.yml's reasons (lifecycle/rolling.py)"),
    Rule("RdmaLlmSlurmNodeHeld", "rdma_llm_slurm",
         _HELD, "drain_held_for", "warning",
         "Slurm node {{ $labels.node }} held by a {{ $labels.by }} for over %drain_held_for",
         "{{ $labels.node }} has been drained by rolling.yml or repair.yml ({{ $labels.by }}) for over %drain_held_for "
         "and was not resumed: that run may have stopped (its report under artifacts/rolling/). Run it again, or "
         "resume the node once its change is proven.",
         "a rollout or a repair holds a node drained for drain_held_for",
         "rolling_job_deadline 3600 s plus the change and its proof"),
    Rule("RdmaLlmSlurmNodeDown", "rdma_llm_slurm",
         'rdma_llm_slurm_node_state{state=~"down|fail|not_responding"} == 1', None, "warning",
         "Slurm node {{ $labels.node }} is {{ $labels.state }}",
         "Slurm reports {{ $labels.node }} {{ $labels.state }}: its slurmd does not answer or it was set down.",
         "a Slurm node is down, failed or not responding", "StackHPC appliance: Slurm nodes DOWN/FAIL"),
    Rule("RdmaLlmTrainingStalled", "rdma_llm_training",
         "time() - max by (run_id, job_id) (rdma_llm_train_last_step_timestamp_seconds) > %train_stall_after_s"
         " and on (run_id, job_id) max by (run_id, job_id) (rdma_llm_train_rank_alive) == 1",
         None, "critical", "Training run {{ $labels.run_id }} stalled",
         "No rank of run {{ $labels.run_id }} (job {{ $labels.job_id }}) logged a step for {{ $value | "
         "humanizeDuration }} (over %train_stall_after).",
         "a rank is alive and none logged a step for train_stall_after", "project: over 3 x the payload's pg_timeout"),
    Rule("RdmaLlmTrainingSlow", "rdma_llm_training",
         "max by (run_id, job_id) (rdma_llm_train_tokens_per_second) < %train_throughput_min_ratio"
         " * max by (run_id, job_id) (max_over_time(rdma_llm_train_tokens_per_second[%train_throughput_window]))",
         "train_throughput_for", "warning", "Training run {{ $labels.run_id }} runs slow",
         "Run {{ $labels.run_id }} (job {{ $labels.job_id }}) trains {{ $value | humanize }} tokens/s, under "
         "%train_throughput_min_ratio of its best in %train_throughput_window, for %train_throughput_for.",
         "tokens/s under a share of the run's own best", "train_launch_straggler_threshold 0.7"),
)  # fmt: skip


class _Text(Template):
    delimiter = "%"


def seconds(text) -> float | None:
    """A Prometheus duration (`30s`, `5m`, `1h30m`) in seconds; None if it is not one."""
    m = DURATION.fullmatch(text) if isinstance(text, str) and text else None
    if not m:
        return None
    return sum(int(v) * UNITS[i][1] for i, v in enumerate(m.groups()) if v)


def _duration(name, value, zero=False):
    s = seconds(value)
    if s is None or (s == 0 and not zero):
        what = "a duration" if zero else "a duration above 0"
        raise RuleError(f"rules parameter {name} must be {what} like 30s, 5m or 1h (got {value!r})")
    return value


def _number(name, value, lo, hi=None, integer=False, open_lo=False):
    n = as_int(value) if integer else value
    ok = isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n)
    ok = ok and (n > lo if open_lo else n >= lo) and (hi is None or n <= hi)
    if not ok:
        kind = "an integer" if integer else "a number"
        span = f"{'over' if open_lo else 'at least'} {lo}" + (f" and at most {hi}" if hi is not None else "")
        raise RuleError(f"rules parameter {name} must be {kind} {span} (got {value!r})")
    return n


def interface_names(value) -> list:
    """The fabric interfaces' names: a list of names or of cluster_fabric_interfaces' dicts, sorted, once each."""
    if not isinstance(value, (list, tuple)):
        raise RuleError(f"rules parameter fabric_interfaces must be a list of interface names (got {value!r})")
    names = set()
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not IFNAME.fullmatch(name) or name in (".", ".."):
            raise RuleError(
                "rules parameter fabric_interfaces: every interface needs a Linux interface name (1-15 of "
                f"A-Z a-z 0-9 _ . -), got {name!r}"
            )
        names.add(name)
    return sorted(names)


def interface_regex(names) -> str:
    """An anchored regex that matches exactly these names: `.` as `[.]` (the names' only metacharacter, the other
    allowed characters are literal), so no backslash needs escaping in PromQL's string or YAML."""
    return "^(?:" + "|".join(n.replace(".", "[.]") for n in interface_names(names)) + ")$"


def _counters(name, value):
    if not isinstance(value, (list, tuple)) or not value or any(c not in HW_COUNTERS for c in value):
        raise RuleError(f"rules parameter {name} must be a non-empty list of {', '.join(HW_COUNTERS)} (got {value!r})")
    return sorted(set(value))


def _job(name, value):
    if not isinstance(value, str) or not JOB.fullmatch(value):
        raise RuleError(f"rules parameter {name} must be a scrape job name (A-Z a-z 0-9 _ . : -), got {value!r}")
    return value


CHECKS = {
    "node_exporter_job": _job,
    "down_for": _duration,
    "fabric_interfaces": lambda n, v: interface_names(v),
    "link_down_for": lambda n, v: _duration(n, v, zero=True),
    "flap_max": lambda n, v: _number(n, v, 1, integer=True),
    "flap_window": _duration,
    "rate_window": _duration,
    "port_errors_max": lambda n, v: _number(n, v, 0, integer=True),
    "transport_counters": _counters,
    "transport_errors_max": lambda n, v: _number(n, v, 0, integer=True),
    "pfc_pause_ratio_max": lambda n, v: _number(n, v, 0, 1, open_lo=True),
    "switch_pfc_frames_per_second": lambda n, v: _number(n, v, 0, open_lo=True),
    "ecn_marks_per_second": lambda n, v: _number(n, v, 0),
    "ecn_for": lambda n, v: _duration(n, v, zero=True),
    "nodrop_qos_group": lambda n, v: _number(n, v, 0, 7, integer=True),
    "ecc_uncorrectable_volatile_max": lambda n, v: _number(n, v, 0, integer=True),
    "row_remap_uncorrectable_max": lambda n, v: _number(n, v, 0, integer=True),
    "collector_failing_for": _duration,
    "disk_free_min": lambda n, v: _number(n, v, 0, 1, open_lo=True),
    "disk_full_for": lambda n, v: _duration(n, v, zero=True),
    "switch_read_stale_after": _duration,
    "drain_held_for": _duration,
    "train_stall_after": _duration,
    "train_throughput_min_ratio": lambda n, v: _number(n, v, 0, 1, open_lo=True),
    "train_throughput_window": _duration,
    "train_throughput_for": lambda n, v: _duration(n, v, zero=True),
}


def resolve(params) -> dict:
    """DEFAULTS under the given parameters, each checked: RuleError naming the parameter if one is wrong."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RuleError(f"the rules parameters must be a mapping (got {type(params).__name__})")
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise RuleError(f"unknown rules parameters {', '.join(map(str, unknown))} (known: {', '.join(DEFAULTS)})")
    merged = {**DEFAULTS, **params}
    return {name: CHECKS[name](name, merged[name]) for name in DEFAULTS}


def _text(value) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


# The values derived from a parameter, by the parameter they come from.
DERIVED = {"fabric_regex": "fabric_interfaces", "transport_regex": "transport_counters",
           "train_stall_after_s": "train_stall_after",
           "switch_read_stale_after_s": "switch_read_stale_after"}  # fmt: skip


def _values(p: dict) -> dict:
    """What `%name` stands for: each parameter as written into PromQL, and the values derived from them."""
    out = {k: _text(v) for k, v in p.items() if not isinstance(v, list)}
    out["fabric_regex"] = interface_regex(p["fabric_interfaces"]) if p["fabric_interfaces"] else ""
    out["transport_regex"] = "|".join(p["transport_counters"])
    for name in ("train_stall_after", "switch_read_stale_after"):
        out[f"{name}_s"] = _text(seconds(p[name]))
    return out


def _rule(r: Rule, p: dict, values: dict) -> dict:
    out = {"alert": r.alert, "expr": _Text(r.expr).substitute(values)}
    if r.for_ and seconds(p[r.for_]):
        out["for"] = p[r.for_]
    out["labels"] = {"severity": r.severity}
    out["annotations"] = {
        "summary": _Text(r.summary).substitute(values),
        "description": _Text(r.description).substitute(values),
    }
    return out


def rules(params=None) -> dict:
    """The rule file document: a group per concern, in GROUPS order; a rule that needs a parameter left empty (the
    link rules without fabric_interfaces) is left out."""
    p = resolve(params)
    values = _values(p)
    groups = []
    for group in GROUPS:
        kept = [_rule(r, p, values) for r in RULES if r.group == group and (r.needs is None or p[r.needs])]
        if kept:
            groups.append({"name": group, "rules": kept})
    return {"groups": groups}


HEADER = ("alert", "severity", "fires when", "for", "parameters (default)", "threshold's source")


def _shown(value) -> str:
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return _text(value)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """docs/monitoring.md's table of the alert rules ("Alert rules"), which test_rules.py keeps equal to RULES."""
    params = re.compile(r"%([a-z_]+)")
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in RULES:
        used = {DERIVED.get(m, m) for m in params.findall(r.expr)} | ({r.needs} if r.needs else set())
        shown = ", ".join(f"`{k}` ({_shown(DEFAULTS[k])})" for k in sorted(used & set(DEFAULTS))) or "-"
        wait = f"`{DEFAULTS[r.for_]}` (`{r.for_}`)" if r.for_ else "at once"
        cells = (f"`{r.alert}`", r.severity, r.when, wait, shown, r.source)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


FILTERS = {"monitoring_rules": rules}
