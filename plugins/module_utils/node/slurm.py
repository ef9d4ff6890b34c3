"""Slurm's side of rdma-node-check: the node's state read from slurmctld, drained with the failing checks as the
reason or resumed once it passes (only a drain this command set), and the Prolog's exit status."""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import EXIT, REASON_MAX
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import Tools, last_line

# The prefix of the drain reasons this command sets: only a node drained with it is resumed by it (a node an
# operator drained keeps its reason and its state).
SLURM_REASON = "rdma-node-check: "


def parse_scontrol_node(text: str) -> dict:
    """`scontrol show node NAME --oneliner` -> {"state": "IDLE+DRAIN", "reason": "maintenance by hand",
    "reason_set": "root@2026-11-26T11:48:04"} (who set the reason and when, Slurm's `[user@time]` suffix; None
    without). The slurm role reads the same line (module_utils/slurm/daemons.py node_state)."""
    state = re.search(r"\bState=(\S+)", text or "")
    found = re.search(r"\bReason=(.*?)(?=\s+[A-Za-z]+=|$)", text or "")
    reason = found.group(1).strip() if found else ""
    by = re.fullmatch(r"(.*?)\s*\[([^\]\s]+@[^\]\s]+)\]", reason)
    return {
        "state": state.group(1) if state else "",
        "reason": by.group(1) if by else reason,
        "reason_set": by.group(2) if by else None,
    }


def slurm_action(result: dict, node: dict) -> tuple[str, str] | None:
    """What Slurm's health check does with this node's result: ("drain", reason), ("resume", why) or None.

    A failing node is drained with the failing checks as the reason (updated when the reason changed); a node this
    command drained is resumed once it passes (a warning passes); a node drained or down for another reason, a
    result that is an error (the check could not run), or a node already as it should be: nothing."""
    state, reason = (node.get("state") or "").upper(), node.get("reason") or ""
    ours = reason.startswith(SLURM_REASON)
    drained = "DRAIN" in state or "DOWN" in state or "FAIL" in state
    if result.get("status") == "fail":
        want = (SLURM_REASON + str(result.get("reason") or "failed"))[:REASON_MAX]
        if drained and not ours:
            return None
        return None if drained and reason == want else ("drain", want)
    if result.get("status") in ("pass", "warn") and ours and "DRAIN" in state:
        return ("resume", f"passes again ({result.get('status')}: {result.get('reason')})")
    return None


def prolog_exit(result: dict) -> int:
    """Slurm's Prolog exit status: non-zero keeps the job off this node (slurmd fails the launch, slurmctld requeues
    the job and drains the node, a no-op once slurm_apply drained it with the failing checks, so the health check
    resumes it later); only a failing node does that, not a warning nor a check that could not run."""
    return EXIT["fail"] if result.get("status") == "fail" else 0


def slurm_apply(tools: Tools, node_name: str, result: dict) -> str:
    """Read the node's state from slurmctld, drain or resume it (slurm_action); one line saying what was done."""
    shown = tools.run(["scontrol", "show", "node", "-o", node_name])
    if shown is None or shown["rc"] != 0:
        return f"slurm: node {node_name} not read ({last_line(shown) if shown else 'scontrol not installed'})"
    action = slurm_action(result, parse_scontrol_node(shown["out"]))
    if action is None:
        return f"slurm: {node_name} left as it is"
    verb, text = action
    argv = ["scontrol", "update", f"NodeName={node_name}"]
    argv += ["State=DRAIN", f"Reason={text}"] if verb == "drain" else ["State=RESUME"]
    done = tools.run(argv)
    if done is None or done["rc"] != 0:
        return f"slurm: {verb} {node_name} failed ({last_line(done) if done else 'scontrol not installed'})"
    return f"slurm: {'drained' if verb == 'drain' else 'resumed'} {node_name}: {text}"
