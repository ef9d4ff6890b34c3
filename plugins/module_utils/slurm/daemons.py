"""The Slurm daemons' answers: a node's state as `scontrol show node` gives it (node/slurm.py's parser) and
whether slurmctld answers `scontrol ping`. The module rdma_llm.cluster.slurm_daemons waits on them after a change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import slurm as node_check


def node_state(line: str) -> dict:
    """`scontrol show node NAME --oneliner`: {"state": "IDLE", "flags": ["DRAIN"], "responding": True,
    "reason": "..."}. scontrol spells the flags out (`IDLE+DRAIN+NOT_RESPONDING`); sinfo's short form marks a node
    slurmctld has not heard from with a `*`, read here too."""
    parsed = node_check.parse_scontrol_node(line)
    raw = parsed["state"]
    reason = parsed["reason"] + (f" [{parsed['reason_set']}]" if parsed["reason_set"] else "")
    words = raw.rstrip("*").split("+")
    silent = raw.endswith("*") or "NOT_RESPONDING" in words
    return {
        "state": words[0] if raw else "",
        "flags": words[1:],
        "responding": bool(raw) and not silent and words[0] not in ("UNKNOWN", "FUTURE"),
        "reason": reason,
    }


def node_ready(state: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether slurmd runs and slurmctld may schedule on the node: responding, and not DOWN or INVAL (a drain
    someone set is theirs, not a failure of the configuration)."""
    if not state.get("responding"):
        return False, "slurmctld has not heard from this node"
    if state.get("state") in ("DOWN", "INVAL") or "INVALID_REG" in state.get("flags", []):
        return False, f"slurmctld holds the node {state['state']}: {state.get('reason') or 'no reason given'}"
    return True, state["state"]


def ping_up(text: str) -> bool:
    """`scontrol ping`: `Slurmctld(primary) at lab-node1 is UP`."""
    return bool(re.search(r"\bis UP\b", text or ""))
