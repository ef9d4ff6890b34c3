"""Static checks: ansible-lint (production profile, no skips), yamllint and ruff over the whole project."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, run, tail, tool_env

pytestmark = pytest.mark.lint


def test_ansible_lint_production_profile() -> None:
    # ANSIBLE_HOME: ansible-lint's cache is then .ansible, where `make collection` links this checkout as
    # rdma_llm.cluster, so it uses the link instead of building and installing a copy under ~/.ansible.
    proc = run(
        ["ansible-lint", "--profile", "production", "--offline"],
        timeout=900,
        env=tool_env(ANSIBLE_HOME=str(ROOT / ".ansible")),
    )
    assert proc.returncode == 0, tail(proc)
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr, tail(proc)


def test_no_lint_skips_without_reason() -> None:
    """A `# noqa` must name the rule and say why (`# noqa rule  # reason`)."""
    bad = []
    for path in ROOT.glob("**/*.yml"):
        if any(part in {".venv", ".ansible", ".lab", "artifacts"} for part in path.parts):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "# noqa" in line:
                after = line.split("# noqa", 1)[1]
                if "#" not in after or not after.split("#", 1)[1].strip():
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "noqa without a reason:\n" + "\n".join(bad)
    assert "skip_list" not in (ROOT / ".ansible-lint").read_text()


def test_yamllint() -> None:
    proc = run(["yamllint", "--strict", "."], timeout=300)
    assert proc.returncode == 0, tail(proc)


def test_ruff() -> None:
    proc = run(["ruff", "check", "."], timeout=300)
    assert proc.returncode == 0, tail(proc)


def test_ruff_format() -> None:
    """One formatting for the whole repo: `ruff format .` leaves every file as it is."""
    proc = run(["ruff", "format", "--check", "."], timeout=300)
    assert proc.returncode == 0, tail(proc)


def test_pytest_process_never_imports_ansible() -> None:
    """Ansible replaces sys.intern when imported, and torch's compiler (which transformers imports) then fails
    to import in the same process: tests load plugin logic from stdlib-only module_utils files instead, and
    run ansible in subprocesses. Checked after collection, when every test module has been imported."""
    import sys

    assert type(sys.intern).__name__ == "builtin_function_or_method", "a test module imported ansible"
    assert not [m for m in sys.modules if m == "ansible" or m.startswith("ansible.")]
