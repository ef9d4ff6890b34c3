"""A rolling change (playbooks/rolling.yml, roles/rolling): the nodes in batches, idle ones first; each batch drained
in Slurm with a reason naming the change, its jobs waited for up to a deadline, the change applied to it alone, the
batch re-proven against a node in service, then resumed. What the play reads of Slurm, how it orders the batches,
the node each batch is proven against, and the report."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_nodes import (
    UNUSABLE,
    expand_hostlist,
    is_drained,
    node_words,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import ACTIVE, parse_fields
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import REASON_MAX
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.slurm import SLURM_REASON

# A batch as Ansible's `serial` takes one: a count of nodes, or a percentage of them.
BATCH_RE = re.compile(r"^([1-9][0-9]*)(%?)$")
# The prefix of every drain reason the rollout sets: the rollout resumes only nodes it drained, and the node check
# (SLURM_REASON) and an operator's drains are never taken for its own.
ROLLING_REASON = "rolling: "
# The prefix of the drain reasons the repair loop sets (repair.yml): a node it holds while it reboots, re-converges
# and re-proves it, or one whose repair failed; the node check leaves both alone.
REPAIR_REASON = "repair: "
# What a change's name may hold: it becomes part of a Slurm drain reason (scontrol's command line) and of file names.
# No `: ` in it: in a drain reason that separates the change from why its batch failed (drain_owner).
CHANGE_RE = re.compile(r"^(?!.*: )[A-Za-z0-9][A-Za-z0-9 ._:=+/,-]{0,63}$")
# Who set a drain reason, by its prefix (drain_owner): the node check, a rollout or a repair holding the node (planned,
# the project's own), one of their failures (the node waits for a person), or anyone else.
DRAIN_OWNERS = ("node_check", "rolling", "rolling_failed", "repair", "repair_failed", "other")
PLANNED_OWNERS = ("rolling", "repair")
# Who drained a node, as a refusal says it (an owner not listed: "hand").
DRAINED_BY_WORDS = {"node_check": "the node check", "repair": "the repair loop", "repair_failed": "the repair loop"}
# A nested run's log in why it failed (run_outcome).
LOG_RE = re.compile(r" \(log [^()]*\)")
# Slurm's `[user@time]` after a reason it keeps.
STAMP_RE = re.compile(r"\s*\[[^\]\s]+@[^\]\s]+\]$")
# squeue's line for the rollout: job id, state, node list (`squeue --noheader --format=%i|%T|%N`).
SQUEUE_FORMAT = "%i|%T|%N"


def batch_size(value: Any, total: int) -> int:
    """The nodes in one batch: a count (at most every node) or a percentage of `total`, rounded down but at least
    one node, as Ansible's `serial` reads it."""
    found = BATCH_RE.match(str(value).strip()) if not isinstance(value, bool) else None
    if not found:
        raise RuleError(f"rolling_batch is {value!r}: a count of nodes (2) or a percentage of them (25%)")
    number, percent = int(found.group(1)), found.group(2) == "%"
    if percent and number > 100:
        raise RuleError(f"rolling_batch is {value!r}: a percentage is at most 100%")
    if total <= 0:
        return 0
    return max(1, total * number // 100) if percent else min(number, total)


def change_name(value: Any) -> str:
    """The change's name as the drain reason and the report carry it (checked: no quote, no control character)."""
    text = str(value if value is not None else "").strip()
    if not CHANGE_RE.match(text):
        raise RuleError(
            f"rolling_change is {value!r}: a short name of the change (1-64 characters: letters, digits, space and"
            " ._:=+/,-, no ': '), the drain reason names it"
        )
    return text


def drain_reason(change: str, why: str = "", prefix: str = ROLLING_REASON) -> str:
    """`rolling: <change>` (and why, e.g. its proof failed), within Slurm's reason length as the node check keeps it;
    quotes and control characters are left out (scontrol reads the reason as one argument). The repair loop's reasons
    start with `repair: ` (`prefix`). A nested run's log (run_outcome's `(log <path>)`) is the report's, not the
    reason's: Slurm's reason is short, and the node check's finding a repair keeps after it must fit."""
    why = LOG_RE.sub("", why or "")
    reason = prefix + change_name(change) + (f": {why}" if why else "")
    return re.sub(r"[\"'\x00-\x1f\x7f]", " ", reason)[:REASON_MAX]


def drain_owner(reason: str) -> str:
    """Who drained a node (DRAIN_OWNERS), from its reason with or without Slurm's `[user@time]`: the node check
    (`rdma-node-check: `), a rollout's batch (`rolling: <change>`; with `: <why>` after the change its change or
    proof failed), a repair holding the node (`repair: node-check: ...`) or one that failed (`repair: failed: ...`),
    else `other` (an operator, Slurm itself)."""
    text = STAMP_RE.sub("", str(reason or "").strip())
    if text.startswith(SLURM_REASON):
        return "node_check"
    if text.startswith(REPAIR_REASON):
        return "repair_failed" if text.startswith(REPAIR_REASON + "failed: ") else "repair"
    if text.startswith(ROLLING_REASON):
        return "rolling_failed" if ": " in text.removeprefix(ROLLING_REASON) else "rolling"
    return "other"


def jobs_by_node(squeue: str) -> dict[str, list[str]]:
    """{Slurm node: [job ids]} of the jobs that hold a node, from `squeue --noheader --format=%i|%T|%N`
    (a pending job holds none; its node list is what it asked for, or empty)."""
    out: dict[str, list[str]] = {}
    for line in (squeue or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        job, state, nodes = parts
        if state.strip() not in ACTIVE or state.strip() == "PENDING":
            continue
        for node in expand_hostlist(nodes.strip()):
            out.setdefault(node, []).append(job.strip())
    return out


def jobs_left(squeue: str, nodes: Sequence[str]) -> list[str]:
    """The jobs that still hold any of `nodes` (Slurm node names), each as `job <id> on <node>`."""
    by_node = jobs_by_node(squeue)
    return [f"job {job} on {node}" for node in nodes for job in by_node.get(node, [])]


def nodes_out_of_service(show_nodes: str, nodes: Sequence[str]) -> list[str]:
    """The nodes of `nodes` Slurm would not give a job now, each as `<node> <State>` (a node Slurm does not list:
    `<node> unknown to Slurm`), from `scontrol show nodes --oneliner`."""
    found = {f.get("NodeName"): f for f in (parse_fields(line) for line in (show_nodes or "").splitlines()) if f}
    out = []
    for node in nodes:
        fields = found.get(node)
        if fields is None:
            out.append(f"{node} unknown to Slurm")
        elif any(w in UNUSABLE for w in node_words(fields)):
            reason = fields.get("Reason", "")
            out.append(f"{node} {fields.get('State')}" + (f" ({reason})" if reason else ""))
    return out


def host_jobs(hosts: Sequence[str], found: Mapping[str, Mapping[str, str]], squeue: str) -> dict[str, list[str]]:
    """{host: [job ids]} for the hosts with a job, each host read as its Slurm node (`found`: node_map's)."""
    by_node = jobs_by_node(squeue)
    return {h: by_node[found[h]["NodeName"]] for h in hosts if h in found and found[h].get("NodeName") in by_node}


def plan(hosts: Sequence[str], busy: Mapping[str, Any], size: int) -> list[list[str]]:
    """The batches in the order they run: the idle hosts first (inventory order), then the busy ones, never the two
    in one batch (a busy node would hold its idle batch-mates back while its job runs)."""
    if size < 1:
        raise RuleError(f"a batch of {size} nodes: at least one")
    idle = [h for h in hosts if h not in busy]
    taken = [h for h in hosts if h in busy]
    return [group[i : i + size] for group in (idle, taken) for i in range(0, len(group), size)]


def in_service(hosts: Sequence[str], found: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The hosts Slurm would give a job now (none of their state words keeps jobs off)."""
    return [h for h in hosts if h in found and not any(w in UNUSABLE for w in node_words(found[h]))]


def drained_by(fields: Mapping[str, str], prefix: str) -> bool:
    """Whether the node is drained (or draining) with a reason that starts with `prefix`."""
    return is_drained(fields) and str(fields.get("Reason", "")).startswith(prefix)


def earlier_reason(fields: Mapping[str, str]) -> str:
    """A node's drain reason without Slurm's `[user@time]` suffix nor the repair loop's own prefixes: what the node
    check found, which a repair keeps in the reason it sets."""
    reason = STAMP_RE.sub("", str(fields.get("Reason", "")).strip())
    # A failed repair's reason ends with what the node check found: `repair: failed: <why> (node check: <was>)`;
    # a second failure keeps <was>, not the first failure's whole reason inside its own.
    failed, mark = REPAIR_REASON + "failed: ", " (node check: "
    if reason.startswith(failed) and mark in reason and reason.endswith(")"):
        reason = reason.split(mark, 1)[1][:-1]
    while reason.startswith(REPAIR_REASON):
        reason = reason.removeprefix(REPAIR_REASON).removeprefix("node-check: ").removeprefix("failed: ")
    return reason


def repair_plan(
    hosts: Sequence[str], found: Mapping[str, Mapping[str, str]], busy: Mapping[str, Any]
) -> dict[str, Any]:
    """The nodes the repair loop takes: drained by the node check (`rdma-node-check: `) or by an earlier repair
    (`repair: `), with no job on them; {"repair": [hosts], "was": {host: earlier reason}, "left": [why per host]}.
    A drained node that still runs a job is left for a later run and named; a node drained by hand is not the
    loop's to take, nor a node in service."""
    out: dict[str, Any] = {"repair": [], "was": {}, "left": []}
    for host in hosts:
        fields = found.get(host) or {}
        if not (drained_by(fields, SLURM_REASON) or drained_by(fields, REPAIR_REASON)):
            continue
        if host in busy:
            jobs = ", ".join(str(j) for j in busy[host])
            out["left"].append(f"{host}: drained by the node check but job(s) {jobs} still run there: left for later")
            continue
        out["repair"].append(host)
        out["was"][host] = earlier_reason(fields)
    return out


def reference(batch: Sequence[str], proven: Sequence[str], serving: Sequence[str]) -> str | None:
    """The node a batch is proven against: one the rollout already proved, else one in service outside the batch;
    None when there is none (the batch is proven alone, and the report says so)."""
    for host in [*proven, *serving]:
        if host not in batch:
            return host
    return None


def refusals(hosts: Sequence[str], found: Mapping[str, Mapping[str, str]], slurm: bool) -> list[str]:
    """Why the rollout must not start: a node Slurm does not know, or one drained by the node check or by hand (the
    rollout would resume it after its batch; repair it first or leave it out with --limit)."""
    if not slurm:
        return []
    out = []
    for host in hosts:
        fields = found.get(host)
        if not fields:
            out.append(f"{host}: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of its names)")
        elif is_drained(fields) and not drained_by(fields, ROLLING_REASON):
            reason = fields.get("Reason", "")
            who = DRAINED_BY_WORDS.get(drain_owner(reason), "hand")
            out.append(
                f"{host}: Slurm node {fields.get('NodeName')} is drained by {who} ({reason}): repair it first"
                " (playbooks/repair.yml) or leave it out (--limit)"
            )
    return out


def batch_record(
    index: int, batch: Sequence[str], status: str, *, ref: str | None = None, why: str = "", seconds: float = 0.0
) -> dict[str, Any]:
    """One batch's line of the report: done (changed and proven), skipped (its jobs outlived the deadline: nothing
    changed), failed (its change or its proof failed: left drained), or untouched (after a failed batch)."""
    if status not in ("done", "skipped", "failed", "untouched"):
        raise RuleError(f"batch status {status!r}")
    return {"batch": index, "hosts": list(batch), "status": status, "reference": ref, "why": why, "seconds": seconds}


def report(records: Sequence[Mapping[str, Any]], change: str) -> dict[str, Any]:
    """The rollout's verdict: passed when every batch was done, else the first failed batch and the skipped ones."""
    failed = [r for r in records if r["status"] == "failed"]
    skipped = [r for r in records if r["status"] == "skipped"]
    done = [h for r in records if r["status"] == "done" for h in r["hosts"]]
    if failed:
        verdict = f"stopped at batch {failed[0]['batch']} ({', '.join(failed[0]['hosts'])}): {failed[0]['why']}"
    elif skipped:
        names = "; ".join(f"{', '.join(r['hosts'])} ({r['why']})" for r in skipped)
        verdict = f"done but for the skipped batch(es): {names}"
    else:
        verdict = f"done on every node ({len(done)})"
    return {
        "change": change,
        "status": "failed" if failed else ("partial" if skipped else "passed"),
        "verdict": verdict,
        "done": done,
        "batches": list(records),
    }


def console_lines(result: Mapping[str, Any]) -> list[str]:
    """The report as the play prints it: one line a batch, then the verdict."""
    lines = []
    for r in result["batches"]:
        against = f" against {r['reference']}" if r.get("reference") else ""
        why = f": {r['why']}" if r.get("why") else ""
        lines.append(f"batch {r['batch']} {', '.join(r['hosts'])}: {r['status']}{against} ({r['seconds']:.0f} s){why}")
    return [*lines, f"rolling {result['change']}: {result['status'].upper()}: {result['verdict']}"]


def run_outcome(rc: Any, what: str, stdout: str, log: str, verdict: Mapping[str, Any] | None = None) -> str:
    """Why a nested run (the change, or its proof: validate.yml) failed, in one line naming its log; '' when it
    passed. The proof's own verdict (its verdict.json) when there is one, else the first fatal task's host and
    message (Ansible's default and YAML callbacks alike), else the exit status."""
    if str(rc) == "0":
        return ""
    if verdict and verdict.get("status") == "fail":
        cause = f"FAIL at {verdict.get('first_failure')}"
        if verdict.get("bad_hosts"):
            cause += f"; bad host(s): {', '.join(verdict['bad_hosts'])}"
    else:
        fatal = re.search(r"^fatal: \[([^\]]+)\]: FAILED! =>(.*)", stdout or "", re.MULTILINE)
        msg = re.search(r"""["']?msg["']?: ["']?([^"'\n]{1,200})""", stdout[fatal.start() :]) if fatal else None
        cause = f"{fatal.group(1)}: {msg.group(1).strip()}" if fatal and msg else f"exit status {rc}"
    return f"{what} failed: {cause} (log {log})"


FILTERS = {
    "rolling_batch_size": batch_size,
    "rolling_change_name": change_name,
    "rolling_run_outcome": run_outcome,
    "rolling_drain_reason": drain_reason,
    "rolling_host_jobs": host_jobs,
    "rolling_plan": plan,
    "rolling_in_service": in_service,
    "rolling_reference": reference,
    "rolling_repair_plan": repair_plan,
    "rolling_refusals": refusals,
    "rolling_batch_record": batch_record,
    "rolling_report": report,
    "rolling_console_lines": console_lines,
}
