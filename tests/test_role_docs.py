"""Each role's documented variables agree with its code: meta/argument_specs.yml (the one description of the
inputs), defaults/main.yml (the one place of each default) and the README's variables table say the same
names, and where a README or an argument spec states a literal default, it is the role's default."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.lint

ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
# A table cell (`\|` inside a cell is a literal bar).
CELL = re.compile(r"((?:[^|\\]|\\.)*)\|")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in CELL.findall(line.strip()[1:])] if line.strip().startswith("|") else []


def _specs(role: str) -> dict[str, dict]:
    """Every option of every entry point of the role's argument specs."""
    data = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options: dict[str, dict] = {}
    for entry in data["argument_specs"].values():
        options.update(entry.get("options") or {})
    return options


def _defaults(role: str) -> dict:
    path = ROOT / "roles" / role / "defaults" / "main.yml"
    return {k: v for k, v in (yaml.safe_load(path.read_text()) or {}).items()} if path.exists() else {}


def _prefix(role: str) -> str:
    """The prefix of the variables a role owns: its name; cluster_defaults owns the shared cluster_* ones."""
    return "cluster_" if role == "cluster_defaults" else f"{role}_"


def _readme_rows(role: str) -> dict[str, str]:
    """Variable -> its default cell, from every table of the README whose first column names the role's
    variables (`| `name` | … | default | … |`, the default column found by its header)."""
    rows: dict[str, str] = {}
    default_at = None
    for line in (ROOT / "roles" / role / "README.md").read_text().splitlines():
        cells = _cells(line)
        if not cells:
            default_at = None
            continue
        heads = [c.lower() for c in cells]
        if any(h.startswith("default") for h in heads):  # `default`, `default (source)`
            default_at = next(i for i, h in enumerate(heads) if h.startswith("default"))
            continue
        name = re.fullmatch(r"`([a-z][a-z0-9_]*)`", cells[0])
        # Only variable tables (they have a default column): tag and fact tables name other things.
        if name and name[1].startswith(_prefix(role)) and default_at is not None:
            rows[name[1]] = cells[default_at] if default_at < len(cells) else ""
    return rows


@pytest.mark.parametrize("role", ROLES)
def test_every_public_default_is_specified_and_documented(role: str) -> None:
    defaults, specs, rows = _defaults(role), _specs(role), _readme_rows(role)
    public = {k for k in defaults if not k.startswith("_")}
    assert public - set(specs) == set(), f"{role}: defaults without an argument spec"
    assert public - set(rows) == set(), f"{role}: defaults missing from README.md's variables table"
    assert set(rows) - set(specs) == set(), f"{role}: README documents variables the role does not take"


@pytest.mark.parametrize("role", ROLES)
def test_stated_defaults_are_the_roles_defaults(role: str) -> None:
    """A literal default (a README cell that is one backticked value, an argument spec's `default`) equals
    defaults/main.yml's value; templated defaults (`{{ cluster_… }}`) are described in words and not compared."""
    defaults, specs, rows = _defaults(role), _specs(role), _readme_rows(role)
    wrong = []
    for name, cell in rows.items():
        value = defaults.get(name)
        literal = re.fullmatch(r"`([^`]*)`", cell)
        if name not in defaults or not literal or (isinstance(value, str) and "{{" in value):
            continue
        try:
            stated = yaml.safe_load(literal[1])
        except yaml.YAMLError:
            stated = literal[1]
        if literal[1] != str(value) and stated != value and str(stated) != str(value):
            wrong.append(f"{name}: README says {literal[1]!r}, defaults/main.yml has {value!r}")
    for name, spec in specs.items():
        if "default" in spec and name in defaults and spec["default"] != defaults[name]:
            wrong.append(f"{name}: argument_specs says {spec['default']!r}, defaults/main.yml has {defaults[name]!r}")
    assert wrong == [], f"{role}:\n" + "\n".join(wrong)
