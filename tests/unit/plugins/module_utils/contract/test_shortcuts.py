"""The playbooks' short extra-vars: typed conversion (plugins/module_utils/contract/shortcuts.py), and no playbook
repeats a role default for them (each default lives in the role's defaults/main.yml)."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract import shortcuts as S
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ("600", "int", 600),
        (" 600 ", "int", 600),
        (600, "int", 600),
        ("0", "int", 0),
        ("ten", "int", "-e x='ten': not an integer"),
        ("6.5", "int", "not an integer"),
        ("", "int", "not an integer"),
        (True, "int", "not an integer"),
        ("true", "bool", True),
        ("Yes", "bool", True),
        ("1", "bool", True),
        (1, "bool", True),
        ("off", "bool", False),
        (False, "bool", False),
        ("maybe", "bool", "-e x='maybe': not a boolean"),
        ("/srv/corpus", "str", "/srv/corpus"),
        ("", "str", ""),
        (20261122, "str", "20261122"),
        (["a"], "str", "not a string"),
        ("1", "float", "unknown type 'float'"),
    ],
)
def test_shortcut_value(value, kind, expected) -> None:
    if isinstance(expected, str) and ("not " in expected or "unknown" in expected):
        with pytest.raises(RuleError, match=expected.replace("(", r"\(")):
            S.shortcut_value(value, "x", kind)
    else:
        got = S.shortcut_value(value, "x", kind)
        assert got == expected and type(got) is type(expected)


PLAYBOOKS = ["train.yml", "train_status.yml", "train_stop.yml", "train_collect.yml", "validate.yml"]


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_playbook_shortcuts_set_only_what_was_given(name) -> None:
    """A play var that reads a short extra-var with `| default(...)` would repeat the role's default; the
    playbooks set role variables from shortcuts in a pre-task, only for those given."""
    plays = yaml.safe_load((ROOT / "playbooks" / name).read_text())
    for play in plays:
        for var, value in (play.get("vars") or {}).items():
            assert not (isinstance(value, str) and "default(" in value and var.split("_")[0] in ("train", "cluster")), (
                f"{name}: play var {var}: {value!r} repeats a role default; set it from the shortcut in a pre-task"
            )
