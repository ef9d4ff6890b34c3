"""rdma-node-check's result (schema rdma-llm-cluster/node-check/1, the JSON it prints) as metrics: the node's
verdict, each check's status, the numbers a check measured and its threshold, and when it ran. The same rules that
drain a node in Slurm (module_utils/node/) then show in Prometheus, check by check.

Codes, one scale for the verdict and the checks: 0 pass, 1 warn, 2 fail, 3 not checked (the verdict: the command
could not check, exit 3 or output that is no result; a check: skipped, with its reason in the JSON). A check the
command makes once per fabric interface (`fabric nic`, `mtu`, `nic speed` ...) has one series per run of it,
numbered by `index` in the command's order.
"""

from __future__ import annotations

import calendar
import json
import time

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import SCHEMA

SOURCE = "rdma-node-check (its JSON result)"
NOT_CHECKED = 3
VERDICTS = {"pass": 0, "warn": 1, "fail": 2}  # the statuses a result has (node/run.py summary)
CODES = {**VERDICTS, "skip": NOT_CHECKED}  # a check's status: a skipped check is not checked
METRICS = table(
    Metric("rdma_llm_node_check_verdict", "gauge", "", (),
           "The node's verdict: 0 pass, 1 warn, 2 fail, 3 could not check", SOURCE),
    Metric("rdma_llm_node_check_status", "gauge", "", ("check", "index"),
           "Each check's status: 0 pass, 1 warn, 2 fail, 3 skipped (not checked)", SOURCE),
    Metric("rdma_llm_node_check_value", "gauge", "", ("check", "index", "unit"),
           "What a check measured, in the check's unit (label unit)", SOURCE),
    Metric("rdma_llm_node_check_threshold", "gauge", "", ("check", "index", "unit"),
           "The threshold a check held the value to, in the check's unit", SOURCE),
    Metric("rdma_llm_node_check_timestamp_seconds", "gauge", "seconds", (),
           "When the node check read the node (Unix time)", SOURCE),
)  # fmt: skip


def parse_result(stdout: str) -> dict | None:
    """The command's JSON (the last line that parses as a result of its schema); None when there is none."""
    for line in reversed(str(stdout or "").strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            return doc
    return None


def verdict(result: dict | None) -> int:
    """0 pass, 1 warn, 2 fail; 3 for no result, the command's error result (status `error`, exit 3) or any
    status the command never prints."""
    return VERDICTS.get((result or {}).get("status"), NOT_CHECKED)


def _unit(unit) -> str:
    return str(unit or "")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def samples(result: dict | None, now: float | None = None) -> list:
    """The samples of one result; `now` (Unix time) stands for the reading's time where the result has none."""
    out = [("rdma_llm_node_check_verdict", {}, verdict(result))]
    stamp = (result or {}).get("time")
    try:
        when = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) if stamp else None
    except (TypeError, ValueError):
        when = None
    when = when if when is not None else (time.time() if now is None else now)
    out.append(("rdma_llm_node_check_timestamp_seconds", {}, when))
    if verdict(result) == NOT_CHECKED:
        return out
    seen: dict = {}
    for check in result.get("checks") or []:
        name = str(check.get("check") or "")
        index = seen[name] = seen.get(name, -1) + 1
        labels = {"check": name, "index": str(index)}
        out.append(("rdma_llm_node_check_status", labels, CODES.get(check.get("status"), NOT_CHECKED)))
        unit = {**labels, "unit": _unit(check.get("unit"))}
        if _number(check.get("value")):
            out.append(("rdma_llm_node_check_value", unit, check["value"]))
        if _number(check.get("threshold")):
            out.append(("rdma_llm_node_check_threshold", unit, check["threshold"]))
    return out


def textfile(result: dict | None, now: float | None = None) -> str:
    return render(METRICS, samples(result, now))
