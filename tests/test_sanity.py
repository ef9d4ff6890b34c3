"""ansible-test sanity on the collection, as Ansible's own CI checks a collection: module docs against their
argument specs (validate-modules), ansible-doc for every plugin, shebangs, compile, yamllint, ...

ansible-test runs from inside `ansible_collections/<namespace>/<name>`, so the checkout's files (what git tracks
or would add) are copied there first. Left out: pylint, pep8 and pslint (ruff checks the Python, and there is no
PowerShell), shellcheck (not installed here), import (it builds a virtualenv per Python with pip) and changelog (no
changelog fragments). Justified exceptions: tests/sanity/ignore-2.19.txt.

ansible-test bootstraps pip into each sanity virtualenv with a script from its own file server, which no fresh machine
has and none can reach here: it runs under a HOME of its own (`.cache/ansible-test-home/`, so nothing a person
cached in `~/.ansible` counts), where `tests/sanity/pip_bootstrap.py` stands at that script's cache path.
"""

from __future__ import annotations

import shutil
import subprocess
import types
from pathlib import Path

import pytest

from tests.conftest import ROOT, tail, tool_env

pytestmark = pytest.mark.lint

SKIPPED = ("pylint", "pep8", "pslint", "shellcheck", "import", "changelog")
HOME = ROOT / ".cache" / "ansible-test-home"


def sanity_home() -> Path:
    """A HOME whose ansible-test cache holds the project's pip bootstrap, at the path of the pip version it asks."""
    from ansible_test._internal.python_requirements import get_venv_packages

    version = get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"]
    cache = HOME / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "tests" / "sanity" / "pip_bootstrap.py", cache / f"get_pip_{version.replace('.', '_')}.py")
    return HOME


def test_ansible_test_sanity(tmp_path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tree = tmp_path / "ansible_collections" / "rdma_llm" / "cluster"
    for name in filter(None, (f.decode() for f in files)):
        source = ROOT / name
        if source.is_file() or source.is_symlink():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name, follow_symlinks=False)
    skip = [arg for name in SKIPPED for arg in ("--skip-test", name)]
    proc = subprocess.run(
        ["ansible-test", "sanity", "--python", "3.11", *skip],
        cwd=tree,
        # ansible-test sets its own collections path
        env={k: v for k, v in tool_env(HOME=str(sanity_home())).items() if k != "ANSIBLE_COLLECTIONS_PATH"},
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, tail(proc)
    assert 'Running sanity test "validate-modules"' in proc.stdout, tail(proc)
    # Nothing came from ansible-test's file server: the bootstrap it ran was the project's.
    out = proc.stdout + proc.stderr
    assert "bootstrap script: https:" not in out, tail(proc)
    if "bootstrap script" in out:  # a new virtualenv (every run of a fresh clone): bootstrapped by the project's file
        assert f"bootstrap script: {HOME}" in out, tail(proc)
