"""Strategy host_linear (playbooks/strategy_plugins): the node plays' linear strategy runs through Mitogen when
the package is installed, and is plain linear when it is turned off. A two-task play on the controller (local
connection) shows which path ran: under Mitogen both module runs happen in one persistent Python on the node (the
same parent PID for their shells), under plain linear each task starts its own.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, playbook, tail

pytestmark = pytest.mark.lint

PLAY = """\
- name: Two module runs, each reporting the Python that ran it
  hosts: here
  gather_facts: false
  strategy: host_linear
  tasks:
    - name: First module run
      ansible.builtin.shell: echo "python-pid $PPID"
      changed_when: false
    - name: Second module run
      ansible.builtin.shell: echo "python-pid $PPID"
      changed_when: false
"""


def run_play(tmp_path: Path, **env: str):
    (tmp_path / "play.yml").write_text(PLAY)
    here = f"here:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    " + here)
    return playbook(
        str(tmp_path / "play.yml"),
        "-vv",
        inventory=tmp_path / "hosts.yml",
        timeout=300,
        ANSIBLE_STRATEGY_PLUGINS=str(ROOT / "playbooks" / "strategy_plugins"),
        **env,
    )


@pytest.mark.parametrize("switch", ["1", "0"])
def test_host_linear_runs_through_mitogen_unless_turned_off(tmp_path: Path, switch: str) -> None:
    proc = run_play(tmp_path, RDMA_LLM_CLUSTER_MITOGEN=switch)
    assert proc.returncode == 0, tail(proc)
    assert re.search(r"^here\s+: ok=2\s+changed=0\s+unreachable=0\s+failed=0", proc.stdout, re.M), tail(proc)
    pids = re.findall(r"python-pid (\d+)", proc.stdout)
    assert len(set(pids)) in (1, 2) and len(pids) >= 2, tail(proc)
    if switch == "1":
        assert len(set(pids)) == 1, "two module runs, two Pythons: Mitogen did not run them\n" + tail(proc)
        assert "Mitogen not available" not in proc.stdout, tail(proc)
    else:
        assert len(set(pids)) == 2, tail(proc)
        assert "Mitogen turned off by RDMA_LLM_CLUSTER_MITOGEN" in proc.stdout, tail(proc)
