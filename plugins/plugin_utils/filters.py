"""Filter plugins from the rules' tables: each plugins/filter/<name>.py returns `adapt(FILTERS)` of its
module_utils, so the logic lives (and is tested) in module_utils and the filter file only connects it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError


def _raising(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RuleError as e:  # the rule's own message, as Ansible's filter error
            raise AnsibleFilterError(str(e)) from e

    return run


def adapt(table: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Filter name -> function, each function's RuleError raised as AnsibleFilterError."""
    return {name: _raising(fn) for name, fn in table.items()}
