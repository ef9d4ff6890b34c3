"""Numbers as the inventory hands them over: values from `-e name=9000` (and some vars files) arrive as
strings, so a string of digits counts as the integer it spells. One rule for the contract, the switch role's
value rules and the playbooks' short extra-vars."""

from __future__ import annotations

import re
from typing import Any

_INTEGER = re.compile(r"-?[0-9]+")


def as_int(value: Any) -> int | None:
    """An int, or a string of digits (optionally negative); None for anything else: bool (YAML's `yes` is not 1)
    and a string with blanks around it too (a value rendered into a device's configuration as written must not
    carry a newline)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None
