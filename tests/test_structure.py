"""The tree is the map (docs/design.md, "Layout"): the rules live in packages by concern under plugins/module_utils/,
their tests mirror them, and no Python file of the collection or the payload grows past the limit design.md sets."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.lint

MODULE_UTILS = ROOT / "plugins" / "module_utils"
UNIT = ROOT / "tests" / "unit" / "plugins" / "module_utils"
DESIGN = ROOT / "docs" / "design.md"


def design_rule(pattern: str) -> re.Match:
    found = re.search(pattern, DESIGN.read_text())
    assert found, f"docs/design.md no longer states {pattern!r}"
    return found


def test_module_utils_holds_packages_and_the_shared_modules_design_names() -> None:
    shared = set(re.findall(r"`([a-z_]+\.py)`", design_rule(r"Shared at the top: ([^\n]+)").group(1)))
    loose = {p.name for p in MODULE_UTILS.glob("*.py")}
    assert loose == shared, (
        f"outside a package: {sorted(loose - shared)}",
        f"named but gone: {sorted(shared - loose)}",
    )
    for package in (p for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (package / "__init__.py").is_file(), f"{package.name}/ is not a package"
        assert (package / "__init__.py").read_text() == "", f"{package.name}/__init__.py hands names on: import by name"


def test_unit_tests_mirror_the_packages() -> None:
    packages = sorted(p.name for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != "__pycache__")
    for package in packages:
        tests = UNIT / package
        assert tests.is_dir(), f"no tests/unit/plugins/module_utils/{package}/"
        modules = {p.stem for p in (MODULE_UTILS / package).glob("*.py")}
        for test in tests.glob("test_*.py"):
            assert test.stem.removeprefix("test_") in modules, f"{test.relative_to(ROOT)}: no such module in {package}/"
    strays = sorted(
        p.name
        for p in UNIT.glob("test_*.py")
        if p.stem.removeprefix("test_") + ".py" not in {m.name for m in MODULE_UTILS.glob("*.py")}
    )
    assert strays == [], f"tests of no top-level module (move them beside their package): {strays}"


def test_no_python_file_over_the_line_limit() -> None:
    limit = int(design_rule(r"No Python file in `plugins/` or `payload/` is over (\d+) lines").group(1))
    files = sorted([*(ROOT / "plugins").rglob("*.py"), *(ROOT / "payload").glob("*.py")])
    over = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > limit}
    assert over == {}, f"over {limit} lines: {over}"


def test_no_python_file_of_the_tree_over_its_limit() -> None:
    limit = int(
        design_rule(r"no Python file in the tree\n?\s*\(the lab, the tests, the benchmarks\) over (\d+) lines").group(1)
    )
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    over = {
        name: n
        for name in tracked.split()
        if (ROOT / name).is_file() and (n := len((ROOT / name).read_text().splitlines())) > limit
    }
    assert over == {}, f"over {limit} lines: {over}"
