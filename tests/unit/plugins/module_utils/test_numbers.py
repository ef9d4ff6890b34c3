"""module_utils/numbers.py: the one rule for a number the inventory hands over as text."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (9000, 9000),
        ("9000", 9000),
        ("-3", -3),
        (True, None),  # YAML's yes/true is not 1
        ("9216\n", None),  # rendered as written, it would carry a newline into a switch's config
        (" 9216", None),
        ("9k", None),
        (9000.0, None),
        (None, None),
    ],
)
def test_as_int(value, expected) -> None:
    assert as_int(value) == expected
