"""A mistyped flag on the command line is refused before any host is contacted, naming the variable (issue #46).

`| bool` reads a word it does not know (`ture`) as false: a launch meant to detach would block, a reset meant to
keep runs would remove them. The rows are tested in pure Python (tests/unit/plugins/module_utils/contract/
test_variables.py, which also holds every boolean role default to a row); here the real plays run, on hosts behind
a closed loopback port (tests/test_preflight.py's inventory): a play that tried to contact one would fail otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import playbook
from tests.test_preflight import inventory, node, preflight

pytestmark = pytest.mark.lint


def nodes(tmp_path: Path) -> Path:
    return inventory(tmp_path, {"n1": node("192.168.250.201/24"), "n2": node("192.168.250.202/24")})


def test_a_mistyped_launch_flag_is_refused_by_the_contract(tmp_path: Path) -> None:
    """`-e train_launch_detach=ture` on site.yml's gate (playbooks/preflight.yml): one error, for every host."""
    proc = preflight(nodes(tmp_path), "-e", "train_launch_detach=ture")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert "all: train_launch_detach must be true or false (got 'ture')" in out, out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]


def test_a_mistyped_short_flag_is_refused_by_train_yml(tmp_path: Path) -> None:
    """`-e detach=ture` on playbooks/train.yml: the short extra-var's own check (contract/shortcuts.py) refuses it
    in the play's first task, before the launch contacts a node."""
    proc = playbook("playbooks/train.yml", "-e", "detach=ture", "-e", "data=/srv/corpus", inventory=nodes(tmp_path))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert "-e detach='ture': not a boolean" in out, out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]


def test_a_mistyped_launch_flag_is_refused_by_train_yml(tmp_path: Path) -> None:
    """`-e train_launch_detach=ture` on playbooks/train.yml, which runs no preflight play: the launch's own contract
    check (roles/train_launch/tasks/assert.yml) refuses it before any node is contacted."""
    proc = playbook(
        "playbooks/train.yml", "-e", "train_launch_detach=ture", "-e", "data=/srv/corpus", inventory=nodes(tmp_path)
    )
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-3000:]
    assert "all: train_launch_detach must be true or false (got 'ture')" in out, out[-3000:]
    assert "UNREACHABLE" not in out, out[-3000:]
