"""The inventory contract's rolling rules: the rolling role's inputs (roles/rolling/README.md) on every node, checked
before a rollout drains anything, and with every site.yml run like any role's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import NODES, Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import (
    Check,
    boolean,
    integer,
    list_of,
    text,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import ABS_PATH, rows_on
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle import rolling


def _batch(value: Any) -> str | None:
    try:
        rolling.batch_size(value, 1)
    except RuleError as exc:
        return str(exc).removeprefix("rolling_batch ")
    return None


def _change(value: Any) -> str | None:
    if value in ("", None):  # required by rolling.yml itself (its first task), not by every run
        return None
    try:
        rolling.change_name(value)
    except RuleError as exc:
        return str(exc).removeprefix("rolling_change ")
    return None


ROLLING_ROWS: tuple[tuple[str, Check], ...] = (
    ("rolling_change", _change),
    ("rolling_batch", _batch),
    ("rolling_playbook", text(r"^(/[^\x00-\x1f\x7f]*|[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+)$",
                              "an absolute path or a collection's playbook (ns.collection.name)")),
    ("rolling_args", list_of(text())),
    ("rolling_job_deadline", integer(0)),
    ("rolling_poll_interval", integer(1, 3600)),
    ("rolling_proof", boolean()),
    ("rolling_proof_pair_seconds", integer(1, 600)),
    ("rolling_resume_deadline", integer(0)),
    ("rolling_report_dir", ABS_PATH),
    ("rolling_repair_reboot", boolean()),
    ("rolling_repair_power_cycle", list_of(text())),
    ("rolling_repair_reboot_timeout", integer(1)),
)  # fmt: skip
ROLLING_VARIABLES = tuple(name for name, _ in ROLLING_ROWS)


def rolling_rows(inv: Inventory) -> Iterator[Problem]:
    yield from rows_on(inv, inv.members(NODES), ROLLING_ROWS)
