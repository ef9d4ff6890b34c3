"""One node checked against its config: read (node/collect.py), judged by every check family asked, the counter
reading kept for the next run, and the result (schema rdma-llm-cluster/node-check/1) with its status, exit code and
one-line reason. The command (node/cli.py) and the ladder's module rdma_llm.cluster.node_check both call run().
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.collect import collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import (
    EXIT,
    GROUPS,
    REASON_MAX,
    SCHEMA,
    STATE_FILE,
    STATE_SCHEMA,
    ConfigError,
    resolve,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.counters import counter_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.fabric import fabric_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.flaps import flap_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.gpu import gpu_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.stack import stack_checks

DOCUMENTATION = """
name: node_check
short_description: The node checks (fabric NICs, RDMA ports, GPUs, NIC counters, link flaps) of rdma-node-check
description: See roles/node_health/README.md.
"""


def evaluate(facts: dict, config: dict, previous: dict | None = None) -> Judge:
    j = Judge(facts, config)
    groups = facts.get("groups") or GROUPS
    if "fabric" in groups:
        fabric_checks(j)
    if "gpu" in groups:
        gpu_checks(j)
    if "counters" in groups:
        counter_checks(j, previous)
    if "flaps" in groups:
        flap_checks(j)
    if "stack" in groups:
        stack_checks(j)
    return j


def summary(checks: list[dict]) -> tuple[str, str]:
    """(status, one-line reason): the failing checks' details, else the warnings', else a count."""
    for status in ("fail", "warn"):
        bad = [c["detail"] for c in checks if c["status"] == status]
        if bad:
            reason = "; ".join(bad)
            return status, reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 3] + "..."
    passed = sum(c["status"] == "pass" for c in checks)
    skipped = sum(c["status"] == "skip" for c in checks)
    return "pass", f"{passed} checks passed" + (f", {skipped} skipped" if skipped else "")


def load_state(state_dir) -> dict | None:
    if not state_dir:
        return None
    try:
        return json.loads((Path(state_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def save_state(state_dir, reading: dict) -> str | None:
    """Keep this reading for the next run (atomic rename). Returns why not, or None."""
    path = Path(state_dir) / STATE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"schema": STATE_SCHEMA, **reading}))
        os.replace(tmp, path)
    except OSError as exc:
        return f"state dir {state_dir} not writable: {exc.strerror or exc}"
    return None


def run(config: dict, root="/", state_dir=None, only=None, tools=None, now=None, write_state=True) -> dict:
    """Check this node against `config`; the result (SCHEMA) with its status, exit code and one-line reason."""
    config = resolve(config)
    groups = tuple(only or GROUPS)
    bad = sorted(set(groups) - set(GROUPS))
    if bad:
        raise ConfigError(f"unknown check group(s) {', '.join(bad)} (known: {', '.join(GROUPS)})")
    facts = collect(config, root, tools, now, groups)
    previous = load_state(state_dir) if "counters" in groups else None
    j = evaluate(facts, config, previous)
    if j.reading is not None and state_dir and write_state:
        why = save_state(state_dir, j.reading)
        if why:
            j.notes.append(why)
    status, reason = summary(j.checks)
    devices = facts.get("rdma") or []
    rates = dict(j.rates)
    return {
        "schema": SCHEMA,
        "host": config.get("host") or socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(facts["time"])),
        "status": status,
        "exit": EXIT[status],
        "reason": reason,
        "groups": list(groups),
        "checks": j.checks,
        "notes": j.notes,
        "rail_speeds": rates,
        "speed": min((r for r in rates.values() if r is not None), default=None),
        # The fabric NICs' MACs: lldpd's default LLDP port id, which the ladder's cabling rung matches.
        "macs": {n: f["address"] for n, f in (facts.get("nic") or {}).items() if f.get("address")},
        "rdma": {"state": "present" if devices else "none", "devices": devices},
        "stack": facts.get("stack") or {},
        "counters": {
            "ports": (j.reading or {}).get("ports") or {},
            "deltas": j.deltas,
            "pause": (j.reading or {}).get("pause") or {},
        },
    }
