"""Slurm as metrics, read on the controller: whether slurmctld answers, each node's state (`scontrol show nodes
--oneliner`, the launch's own reading) and who drained it (the reason's prefix: the node check, a rollout or a
repair, lifecycle/rolling.py drain_owner), the jobs by state and the pending ones by reason (`squeue` in the launch's
format), and a few of slurmctld's scheduler statistics (`sdiag`).

When slurmctld does not answer (launch/slurm_state.py controller_error: the client tools' own messages) the file
says `rdma_llm_slurm_up 0` and nothing else: no node or job count is made up from an unanswered query.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_nodes import (
    DRAIN_WORDS,
    is_drained,
    node_words,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import (
    ACTIVE,
    QUEUE_FORMAT,
    controller_error,
    parse_fields,
    parse_queue,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle.rolling import DRAIN_OWNERS, drain_owner
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table

NODES = "scontrol show nodes --oneliner"
SQUEUE = f"squeue --noheader --format='{QUEUE_FORMAT}'"
SDIAG = "sdiag"
# One state per node, the first that applies (sinfo(1) "NODE STATE CODES"; scontrol prints base state + flags,
# `IDLE+DRAIN`): a node that is down or not heard from is that whatever it was doing; a drain is `drained` once
# the node is idle, `draining` while jobs still run; then maintenance and reboots; else the base state.
STATES = ("down", "fail", "not_responding", "drained", "draining", "maint", "reboot", "allocated", "mixed",
          "completing", "idle", "planned", "future", "unknown")  # fmt: skip
_BASE = {"ALLOCATED": "allocated", "ALLOC": "allocated", "MIXED": "mixed", "COMPLETING": "completing",
         "IDLE": "idle", "PLANNED": "planned", "FUTURE": "future", "DOWN": "down", "UNKNOWN": "unknown"}  # fmt: skip
# Job states counted: squeue(1)'s active ones (launch/slurm_state.py ACTIVE), lower case.
JOB_STATES = tuple(s.lower() for s in ACTIVE)
# sdiag lines read (Slurm 22.05 sdiag.c): (section, label) -> (metric, scale to the metric's unit).
SDIAG_LINES = {
    ("", "Server thread count"): ("rdma_llm_slurm_server_threads", 1),
    ("", "Agent queue size"): ("rdma_llm_slurm_agent_queue_size", 1),
    ("", "DBD Agent queue size"): ("rdma_llm_slurm_dbd_agent_queue_size", 1),
    ("", "Jobs submitted"): ("rdma_llm_slurm_scheduler_jobs_submitted_total", 1),
    ("", "Jobs started"): ("rdma_llm_slurm_scheduler_jobs_started_total", 1),
    ("", "Jobs completed"): ("rdma_llm_slurm_scheduler_jobs_completed_total", 1),
    ("", "Jobs canceled"): ("rdma_llm_slurm_scheduler_jobs_canceled_total", 1),
    ("", "Jobs failed"): ("rdma_llm_slurm_scheduler_jobs_failed_total", 1),
    ("main", "Last cycle"): ("rdma_llm_slurm_scheduler_last_cycle_seconds", 1e-6),
    ("main", "Mean cycle"): ("rdma_llm_slurm_scheduler_mean_cycle_seconds", 1e-6),
    ("main", "Last queue length"): ("rdma_llm_slurm_scheduler_queue_length", 1),
    ("backfill", "Last cycle"): ("rdma_llm_slurm_backfill_last_cycle_seconds", 1e-6),
    ("backfill", "Total backfilled jobs (since last slurm start)"): ("rdma_llm_slurm_backfilled_jobs_total", 1),
}
_SDIAG_HELP = {
    "rdma_llm_slurm_server_threads": "slurmctld's active server threads",
    "rdma_llm_slurm_agent_queue_size": "Outgoing RPCs queued in slurmctld's retry list",
    "rdma_llm_slurm_dbd_agent_queue_size": "Messages for slurmdbd queued in slurmctld (grows when slurmdbd is away)",
    "rdma_llm_slurm_scheduler_jobs_submitted_total": "Jobs submitted since sdiag's last reset (midnight UTC)",
    "rdma_llm_slurm_scheduler_jobs_started_total": "Jobs started since sdiag's last reset",
    "rdma_llm_slurm_scheduler_jobs_completed_total": "Jobs completed since sdiag's last reset",
    "rdma_llm_slurm_scheduler_jobs_canceled_total": "Jobs canceled since sdiag's last reset",
    "rdma_llm_slurm_scheduler_jobs_failed_total": "Jobs failed since sdiag's last reset",
    "rdma_llm_slurm_scheduler_last_cycle_seconds": "The main scheduler's last cycle",
    "rdma_llm_slurm_scheduler_mean_cycle_seconds": "The main scheduler's mean cycle since the reset",
    "rdma_llm_slurm_scheduler_queue_length": "Jobs in the main scheduler's last queue",
    "rdma_llm_slurm_backfill_last_cycle_seconds": "The backfill scheduler's last cycle",
    "rdma_llm_slurm_backfilled_jobs_total": "Jobs the backfill scheduler started since slurmctld started",
}
METRICS = table(
    Metric("rdma_llm_slurm_up", "gauge", "", (), "1 when slurmctld answered, 0 when not",
           f"{NODES} exit status and messages"),
    Metric("rdma_llm_slurm_nodes", "gauge", "", ("state",), "Nodes in each state (one state per node)", NODES),
    Metric("rdma_llm_slurm_node_state", "gauge", "", ("node", "state"),
           "1 for the node's state, 0 for every other state", NODES),
    Metric("rdma_llm_slurm_node_drained_by", "gauge", "", ("node", "by"),
           "1 for who drained the node (its reason's prefix), 0 for the others; all 0 for a node not drained", NODES),
    Metric("rdma_llm_slurm_jobs", "gauge", "", ("state",), "Jobs in each active state", SQUEUE),
    Metric("rdma_llm_slurm_pending_jobs", "gauge", "", ("reason",), "Pending jobs by the reason Slurm gives",
           SQUEUE),
    *(Metric(name, "counter" if name.endswith("_total") else "gauge", "seconds" if scale != 1 else "", (),
             _SDIAG_HELP[name], SDIAG) for name, scale in SDIAG_LINES.values()),
)  # fmt: skip


def node_state(fields: dict) -> str:
    """The one state (STATES) of a node's `scontrol show node` fields."""
    words = set(node_words(fields))
    base = next(iter(node_words(fields)), "")
    if base == "DOWN" or "DOWN" in words:
        return "down"
    if words & {"FAIL", "FAILING"}:
        return "fail"
    if "NOT_RESPONDING" in words:
        return "not_responding"
    if words & set(DRAIN_WORDS):
        return "drained" if base == "IDLE" and "COMPLETING" not in words else "draining"
    if words & {"MAINT", "MAINTENANCE"}:
        return "maint"
    if words & {"REBOOT_REQUESTED", "REBOOT_ISSUED"}:
        return "reboot"
    if "COMPLETING" in words:
        return "completing"
    return _BASE.get(base, "unknown")


def node_samples(show_nodes: str) -> list:
    nodes = [parse_fields(line) for line in (show_nodes or "").splitlines() if line.startswith("NodeName=")]
    counts = dict.fromkeys(STATES, 0)
    out = []
    for fields in nodes:
        state = node_state(fields)
        counts[state] += 1
        node = fields["NodeName"]
        out += [("rdma_llm_slurm_node_state", {"node": node, "state": s}, int(s == state)) for s in STATES]
        by = drain_owner(fields.get("Reason", "")) if is_drained(fields) else None
        out += [("rdma_llm_slurm_node_drained_by", {"node": node, "by": b}, int(b == by)) for b in DRAIN_OWNERS]
    return out + [("rdma_llm_slurm_nodes", {"state": s}, n) for s, n in counts.items()]


def job_samples(squeue: str) -> list:
    jobs = parse_queue(squeue)
    counts = dict.fromkeys(JOB_STATES, 0)
    reasons: dict = {}
    for job in jobs:
        state = job["state"].lower()
        if state in counts:
            counts[state] += 1
        if state == "pending":
            reasons[job["reason"]] = reasons.get(job["reason"], 0) + 1
    return [("rdma_llm_slurm_jobs", {"state": s}, n) for s, n in counts.items()] + [
        ("rdma_llm_slurm_pending_jobs", {"reason": r}, n) for r, n in reasons.items()
    ]


# sdiag's headings at column 0 whose indented lines are read; any other heading's lines are not.
SDIAG_SECTIONS = {"Main schedule statistics": "main", "Backfilling stats": "backfill"}


def parse_sdiag(text: str) -> dict:
    """`sdiag` -> {metric: value} for SDIAG_LINES. A line at column 0 is the top block's (`Jobs started:   6`) or
    a heading; an indented line belongs to the heading above it (both sections have a `Last cycle`)."""
    section, out = "", {}
    for line in (text or "").splitlines():
        m = re.fullmatch(r"\s*([A-Za-z][^:]*?):\s+(\d+)\s*", line)
        if line and not line[0].isspace():
            heading = next((v for k, v in SDIAG_SECTIONS.items() if line.startswith(k)), "other")
            section = "" if m else heading
        if m and (section, m.group(1)) in SDIAG_LINES:
            name, scale = SDIAG_LINES[(section, m.group(1))]
            out[name] = int(m.group(2)) if scale == 1 else round(int(m.group(2)) * scale, 6)
    return out


def samples(rc: int, show_nodes: str, squeue: str = "", sdiag: str = "") -> list:
    """`rc` and `show_nodes`: `scontrol show nodes --oneliner`'s exit status and output (stdout and stderr);
    slurmctld unreachable (controller_error) -> up 0 alone."""
    if controller_error(rc, show_nodes):
        return [("rdma_llm_slurm_up", {}, 0)]
    out = [("rdma_llm_slurm_up", {}, 1), *node_samples(show_nodes), *job_samples(squeue)]
    return out + [(name, {}, value) for name, value in parse_sdiag(sdiag).items()]


def textfile(rc: int, show_nodes: str, squeue: str = "", sdiag: str = "") -> str:
    return render(METRICS, samples(rc, show_nodes, squeue, sdiag))
