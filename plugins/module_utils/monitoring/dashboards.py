"""The dashboards: one table (DASHBOARDS) of what an operator looks at (the cluster, a node, the fabric and its switch
ports, the GPUs, Slurm, a training run), each panel a PromQL query over the metrics this package writes (catalogue.py)
and node_exporter's, and `dashboard(uid, params)`, a Grafana dashboard's JSON model (schemaVersion 37, Grafana 9 and
later) the monitoring role provisions where the inventory names a Grafana (`monitoring_grafana_dashboards_dir`).

Grafana is not packaged for Debian: in the lab the same queries run in Prometheus's own UI, and the lab test runs every
panel's query against the lab's Prometheus (`lab_query`): each must return series, but for a panel whose series need
what the lab has not (`needs`: a GPU, an RDMA NIC's counters, a pending job), which must still be a query Prometheus
accepts, and is reported as not shown.
"""

from __future__ import annotations

from typing import NamedTuple

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.rules import interface_regex

# What a panel's series need beyond a running cluster (the lab test reports these panels, it cannot show them).
NEEDS = {
    "gpu": "a GPU (NVML through nvidia-smi)",
    "rdma": "an RDMA NIC's counters (hw_counters, ethtool -S priority pauses, infiniband ports)",
    "pending": "a job pending in Slurm",
    "drain": "a Slurm node drained",
    "training": "a training run (the lab test launches one)",
}
# The window of every rate(): Grafana's own, at least four scrapes (Grafana docs, "$__rate_interval").
RATE = "$__rate_interval"


class Panel(NamedTuple):
    title: str
    expr: str
    unit: str  # Grafana's unit id
    legend: str
    needs: str | None = None
    kind: str = "timeseries"  # or "stat"


class Dashboard(NamedTuple):
    title: str
    variables: tuple  # (name, label_values query) each
    panels: tuple


NODE = 'job="node"'
HOST = f'{NODE}, instance=~"$instance"'
FABRIC = 'device=~"%fabric"'
RUN = 'run_id=~"$run_id"'
# A switch port counter's rate with the node behind the port, kept to the nodes of the selected runs: the switch ports
# of a run on its own timeline (rdma_llm_switch_port_node_info is written by every monitoring host: max by drops the
# copies; a run's nodes are the instances its ranks' series come from).
RUN_NODES = f'label_replace(max by (instance) (rdma_llm_train_rank_alive{{{RUN}}}), "node", "$1", "instance", "(.*)")'


def run_ports(counter: str) -> str:
    return (
        f"(rate({counter}[{RATE}]) * on (switch, port) group_left (node) max by (switch, port, node) "
        f"(rdma_llm_switch_port_node_info)) and on (node) {RUN_NODES}"
    )


FABRIC_LINKS = Panel("Fabric links up", f"node_network_up{{{FABRIC}}}", "short", "{{instance}} {{device}}")
SWITCH_PANELS = (
    Panel("Switches answering", "rdma_llm_switch_up", "short", "{{switch}}"),
    Panel("Switch ports up", "rdma_llm_switch_port_up", "short", "{{switch}} {{port}}"),
    Panel("Switch PFC pause frames/s", f"rate(rdma_llm_switch_port_pfc_pause_frames_total[{RATE}])", "pps",
          "{{switch}} {{port}} {{direction}}"),
    Panel("Switch drops/s by qos-group", f"rate(rdma_llm_switch_port_drops_total[{RATE}])", "pps",
          "{{switch}} {{port}} q{{qos_group}}"),
    Panel("Switch ECN marks/s by qos-group", f"rate(rdma_llm_switch_port_ecn_marked_total[{RATE}])", "pps",
          "{{switch}} {{port}} q{{qos_group}}"),
    Panel("Switch ingress drops/s", f"rate(rdma_llm_switch_port_ingress_drops_total[{RATE}])", "pps",
          "{{switch}} {{port}}"),
)  # fmt: skip
DASHBOARDS = {
    "rdma-llm-cluster": Dashboard("rdma-llm-cluster: cluster", (), (
        Panel("Nodes scraped", f"sum(up{{{NODE}}})", "short", "up", kind="stat"),
        Panel("Node check verdict (0 pass, 1 warn, 2 fail)", "rdma_llm_node_check_verdict", "short", "{{instance}}"),
        FABRIC_LINKS,
        Panel("Slurm nodes by state", "rdma_llm_slurm_nodes", "short", "{{state}}"),
        Panel("Slurm jobs by state", "rdma_llm_slurm_jobs", "short", "{{state}}"),
        Panel("Training tokens/s by run", "sum by (run_id) (rdma_llm_train_tokens_per_second)", "short", "{{run_id}}",
              "training"),
        Panel("Collector readings succeeding", "rdma_llm_collector_success", "short", "{{instance}} {{collector}}"),
    )),
    "rdma-llm-node": Dashboard("rdma-llm-cluster: node", (("instance", f"label_values(up{{{NODE}}}, instance)"),), (
        Panel("Node check, each check (0 pass, 1 warn, 2 fail)", f"rdma_llm_node_check_status{{{HOST}}}", "short",
              "{{instance}} {{check}}"),
        Panel("CPU busy", f'1 - avg by (instance) (rate(node_cpu_seconds_total{{{HOST}, mode="idle"}}[{RATE}]))',
              "percentunit", "{{instance}}"),
        Panel("Memory available", f"node_memory_MemAvailable_bytes{{{HOST}}}", "bytes", "{{instance}}"),
        Panel("Filesystem space available",
              f'node_filesystem_avail_bytes{{{HOST}, fstype!~"tmpfs|ramfs"}} / node_filesystem_size_bytes{{{HOST}, '
              'fstype!~"tmpfs|ramfs"}', "percentunit", "{{instance}} {{mountpoint}}"),
        Panel("Fabric NIC received", f"rate(node_network_receive_bytes_total{{{HOST}, {FABRIC}}}[{RATE}])", "Bps",
              "{{instance}} {{device}}"),
        Panel("Fabric NIC sent", f"rate(node_network_transmit_bytes_total{{{HOST}, {FABRIC}}}[{RATE}])", "Bps",
              "{{instance}} {{device}}"),
        Panel("Collector reading time", f"rdma_llm_collector_duration_seconds{{{HOST}}}", "s",
              "{{instance}} {{collector}}"),
    )),
    "rdma-llm-fabric": Dashboard("rdma-llm-cluster: fabric and switch ports", (), (
        FABRIC_LINKS,
        Panel("Fabric link downs in the last hour",
              f"increase(node_network_carrier_down_changes_total{{{FABRIC}}}[1h])", "short", "{{instance}} {{device}}"),
        Panel("NIC PFC pause frames/s", f"rate(rdma_llm_nic_pfc_pause_frames_total[{RATE}])", "pps",
              "{{instance}} {{interface}} prio {{priority}} {{direction}}", "rdma"),
        Panel("NIC CNPs and ECN marks/s",
              f'rate(rdma_llm_rdma_hw_counter_total{{counter=~"np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets"}}'
              f"[{RATE}])", "pps", "{{instance}} {{device}} {{counter}}", "rdma"),
        Panel("RDMA port errors/s", f"rate(node_infiniband_port_errors_received_total[{RATE}])", "pps",
              "{{instance}} {{device}} {{port}}", "rdma"),
        *SWITCH_PANELS,
    )),
    "rdma-llm-gpu": Dashboard("rdma-llm-cluster: GPUs", (("instance", f"label_values(up{{{NODE}}}, instance)"),), (
        Panel("GPUs present", f"rdma_llm_gpu_present{{{HOST}}}", "short", "{{instance}}"),
        Panel("GPU utilisation", f"rdma_llm_gpu_utilization_ratio{{{HOST}}}", "percentunit", "{{instance}} {{gpu}}",
              "gpu"),
        Panel("GPU memory used", f"rdma_llm_gpu_memory_used_bytes{{{HOST}}}", "bytes", "{{instance}} {{gpu}}", "gpu"),
        Panel("GPU temperature", f"rdma_llm_gpu_temperature_celsius{{{HOST}}}", "celsius", "{{instance}} {{gpu}}",
              "gpu"),
        Panel("GPU power", f"rdma_llm_gpu_power_watts{{{HOST}}}", "watt", "{{instance}} {{gpu}}", "gpu"),
        Panel("GPU SM clock", f"rdma_llm_gpu_sm_clock_hertz{{{HOST}}}", "hertz", "{{instance}} {{gpu}}", "gpu"),
        Panel("GPU uncorrected ECC errors", f"rdma_llm_gpu_ecc_uncorrected_errors_total{{{HOST}}}", "short",
              "{{instance}} {{gpu}} {{scope}}", "gpu"),
        Panel("GPU rows remapped", f"rdma_llm_gpu_remapped_rows{{{HOST}}}", "short", "{{instance}} {{gpu}} {{cause}}",
              "gpu"),
    )),
    "rdma-llm-slurm": Dashboard("rdma-llm-cluster: Slurm", (), (
        Panel("slurmctld answering", "rdma_llm_slurm_up", "short", "{{instance}}", kind="stat"),
        Panel("Nodes by state", "rdma_llm_slurm_nodes", "short", "{{state}}"),
        Panel("Each node's state", "rdma_llm_slurm_node_state == 1", "short", "{{node}} {{state}}"),
        Panel("Who drained each node", "rdma_llm_slurm_node_drained_by == 1", "short", "{{node}} {{by}}",
              "drain"),
        Panel("Jobs by state", "rdma_llm_slurm_jobs", "short", "{{state}}"),
        Panel("Pending jobs by reason", "rdma_llm_slurm_pending_jobs", "short", "{{reason}}", "pending"),
        Panel("Jobs started/s", f"rate(rdma_llm_slurm_scheduler_jobs_started_total[{RATE}])", "short", "started"),
        Panel("Scheduler cycle", "rdma_llm_slurm_scheduler_last_cycle_seconds", "s", "last cycle"),
        Panel("slurmctld agent queue", "rdma_llm_slurm_agent_queue_size", "short", "agent queue"),
    )),
    "rdma-llm-training": Dashboard("rdma-llm-cluster: training run",
                                   (("run_id", "label_values(rdma_llm_train_step, run_id)"),), (
        Panel("Step", f"rdma_llm_train_step{{{RUN}}}", "short", "{{run_id}} rank {{rank}} {{host}}", "training"),
        Panel("Loss", f"rdma_llm_train_loss{{{RUN}}}", "short", "{{run_id}} rank {{rank}}", "training"),
        Panel("Tokens/s", f"rdma_llm_train_tokens_per_second{{{RUN}}}", "short", "{{run_id}} rank {{rank}} {{host}}",
              "training"),
        Panel("MFU", f"rdma_llm_train_mfu_ratio{{{RUN}}}", "percentunit", "{{run_id}} rank {{rank}}", "training"),
        Panel("Ranks alive", f"sum by (run_id) (rdma_llm_train_rank_alive{{{RUN}}})", "short", "{{run_id}}",
              "training"),
        Panel("Seconds since a rank's last step", f"time() - rdma_llm_train_last_step_timestamp_seconds{{{RUN}}}", "s",
              "{{run_id}} rank {{rank}}", "training"),
        Panel("Restarts", f"rdma_llm_train_restarts_total{{{RUN}}}", "short", "{{run_id}} rank {{rank}}", "training"),
        Panel("PFC pause frames/s on the run's switch ports", run_ports("rdma_llm_switch_port_pfc_pause_frames_total"),
              "pps", "{{node}} {{switch}} {{port}} {{direction}}", "training"),
        Panel("Drops/s on the run's switch ports", run_ports("rdma_llm_switch_port_drops_total"), "pps",
              "{{node}} {{switch}} {{port}} q{{qos_group}}", "training"),
        Panel("ECN marks/s on the run's switch ports", run_ports("rdma_llm_switch_port_ecn_marked_total"), "pps",
              "{{node}} {{switch}} {{port}} q{{qos_group}}", "training"),
    )),
}  # fmt: skip


def _fabric(params) -> str:
    """The fabric interfaces' anchored regex (rules.py's, validated there), any device without them."""
    names = (params or {}).get("fabric_interfaces") or []
    return interface_regex(names) if names else ".+"


def panels(uid: str, params=None) -> list:
    """One dashboard's panels with the inventory's fabric interfaces in their queries (any device without them)."""
    if uid not in DASHBOARDS:
        raise RuleError(f"dashboards: no dashboard {uid!r} (known: {', '.join(DASHBOARDS)})")
    fabric = _fabric(params)
    return [p._replace(expr=p.expr.replace("%fabric", fabric)) for p in DASHBOARDS[uid].panels]


def lab_query(expr: str, values: dict) -> str:
    """A panel's query as Prometheus runs it outside Grafana: the dashboard's variables and $__rate_interval given."""
    for name, value in {"__rate_interval": "1m", **values}.items():
        expr = expr.replace(f"${name}", value)
    return expr


def _variable(name: str, query: str) -> dict:
    return {"name": name, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "definition": query, "refresh": 2, "includeAll": True, "allValue": ".+", "multi": True,
            "current": {"selected": True, "text": "All", "value": "$__all"}}  # fmt: skip


def dashboard(uid: str, params=None) -> dict:
    """Grafana's JSON model of one dashboard: its panels two to a row, a Prometheus data source chosen by the viewer."""
    board = DASHBOARDS.get(uid)
    out = []
    for index, p in enumerate(panels(uid, params)):
        out.append({
            "id": index + 1, "type": p.kind, "title": p.title,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "targets": [{"refId": "A", "expr": p.expr, "legendFormat": p.legend,
                         "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
            "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if p.kind == "timeseries" else {},
        })  # fmt: skip
    variables = [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
    return {
        "uid": uid, "title": board.title, "tags": ["rdma-llm-cluster"], "schemaVersion": 37, "version": 1,
        "editable": True, "timezone": "utc", "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables + [_variable(n, q) for n, q in board.variables]},
        "annotations": {"list": []}, "panels": out,
    }  # fmt: skip


def markdown() -> str:
    """docs/monitoring.md's table of the dashboards' panels (its test keeps the two equal)."""
    lines = ["| dashboard | panel | query | shown where |", "|---|---|---|---|"]
    for uid, board in DASHBOARDS.items():
        for p in board.panels:
            query = p.expr.replace("|", "\\|")
            lines.append(f"| `{uid}` | {p.title} | `{query}` | {NEEDS[p.needs] if p.needs else 'every cluster'} |")
    return "\n".join(lines) + "\n"


def dashboards(params=None) -> dict:
    """{uid: JSON model} of every dashboard (what the role writes into a Grafana's folder)."""
    return {uid: dashboard(uid, params) for uid in DASHBOARDS}


FILTERS = {"monitoring_dashboard": dashboard, "monitoring_dashboards": dashboards}
