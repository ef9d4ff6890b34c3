"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN is YAML that ansible-doc (and ansible-lint, which reads it)
can parse: a bare `C(<host>: ...)` in a description once broke RETURN, and only a warning said so."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

FILES = sorted(p for p in (ROOT / "plugins").glob("*/*.py") if p.name != "__init__.py")


def _blocks(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        and isinstance(node.value, ast.Constant)
    }


@pytest.mark.parametrize("path", [p for p in FILES if _blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_plugin_doc_blocks_are_yaml(path: Path) -> None:
    blocks = _blocks(path)
    for name, text in blocks.items():
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as e:
            pytest.fail(f"{path.relative_to(ROOT)} {name} is not YAML: {e}")
    if "DOCUMENTATION" in blocks:
        doc = yaml.safe_load(blocks["DOCUMENTATION"])
        assert doc.get("short_description"), f"{path.relative_to(ROOT)}: DOCUMENTATION has no short_description"


def test_every_module_is_documented() -> None:
    modules = [p for p in FILES if p.parent.name == "modules"]
    assert modules and all("DOCUMENTATION" in _blocks(p) for p in modules), "a module without DOCUMENTATION"
