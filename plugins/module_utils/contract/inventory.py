"""What the inventory contract sees and reports: the contract's groups, each host's variables, one problem.

Each problem names the host (or `all` for a value every host shares) and the variable:
``<host>: <variable> <what is wrong>``. The rules are the contract's sections (contract/*.py); contract/check.py
runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NODES = "rdma_nodes"
SUBNET_MANAGERS = "subnet_managers"
SWITCHES = "switches"
UNGROUPED = "ungrouped"
ALL = "all"  # a row that applies to nodes and switches alike


@dataclass(frozen=True, order=True)
class Problem:
    host: str
    variable: str
    message: str
    # Role variables whose value repeats this one's (their default is this cluster_* value): reported once, here, and
    # still seen by a role that checks its own variables alone (check()).
    covers: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.host}: {self.variable} {self.message}"


@dataclass
class Inventory:
    """What the validator sees: group members and each host's effective, templated variables."""

    groups: dict[str, list[str]]
    hostvars: dict[str, dict[str, Any]]
    # host -> {variable: why it could not be read} (an undefined name, a vault without its password).
    unreadable: dict[str, dict[str, str]] = field(default_factory=dict)
    # Groups that must have hosts: the nodes for a cluster run; the switches for the switch role alone.
    required_groups: tuple[str, ...] = (NODES,)

    def members(self, group: str) -> list[str]:
        if group == ALL:
            return list(dict.fromkeys(self.members(NODES) + self.members(SWITCHES)))
        return list(self.groups.get(group) or [])

    def get(self, host: str, name: str, default: Any = None) -> Any:
        return self.hostvars.get(host, {}).get(name, default)
