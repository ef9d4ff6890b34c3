"""The playbooks' short extra-vars (`-e deadline=600`) turned into a role variable's value.

A playbook maps each short name to a role variable and sets that variable only when the short name was given,
so every default stays in the role's defaults/main.yml. Values typed on the command line arrive as text; this
converts them to the variable's type and refuses what is not one (`| int` would turn "ten" into 0 silently).
Tested in tests/unit/plugins/module_utils/contract/test_shortcuts.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

TRUE = {"true", "yes", "on", "1"}
FALSE = {"false", "no", "off", "0"}


def shortcut_value(value: Any, name: str, kind: str) -> Any:
    """`value` given as `-e <name>=...`, as a `kind` (int, bool or str)."""
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if (number := as_int(value.strip() if isinstance(value, str) else value)) is not None:
            return number
        raise RuleError(f"-e {name}={value!r}: not an integer")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in TRUE:
            return True
        if text in FALSE:
            return False
        raise RuleError(f"-e {name}={value!r}: not a boolean (true/false, yes/no, on/off, 1/0)")
    if kind == "str":
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
        raise RuleError(f"-e {name}={value!r}: not a string")
    raise RuleError(f"shortcut {name}: unknown type {kind!r} (int, bool or str)")


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"shortcut_value": shortcut_value}
