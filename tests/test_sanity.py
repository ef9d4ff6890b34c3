"""ansible-test sanity on the collection, as Ansible's own CI checks a collection: module docs against their
argument specs (validate-modules), ansible-doc for every plugin, shebangs, compile, yamllint, ...

ansible-test runs from inside `ansible_collections/<namespace>/<name>`, so the checkout's files (what git tracks
or would add) are copied there first. Left out: pylint, pep8 and pslint (ruff checks the Python, and there is no
PowerShell), shellcheck (not installed here), import (it builds a virtualenv per Python with pip) and changelog (no
changelog fragments). Justified exceptions: tests/sanity/ignore-2.19.txt.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import ROOT, tail, tool_env

pytestmark = pytest.mark.lint

SKIPPED = ("pylint", "pep8", "pslint", "shellcheck", "import", "changelog")


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
        env={k: v for k, v in tool_env().items() if k != "ANSIBLE_COLLECTIONS_PATH"},  # ansible-test sets its own
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, tail(proc)
    assert 'Running sanity test "validate-modules"' in proc.stdout, tail(proc)
