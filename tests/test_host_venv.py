"""train_venv: bad inputs fail in validation before any change.

The venv on real lab hosts (torch +cpu, transformers, datasets, deepspeed importing) is checked by
tests/test_lab_2_site.py after site.yml converged the lab.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import run, tail


def _ghost_inventory(tmp_path: Path) -> Path:
    """One host behind a closed loopback port: any connection attempt fails as UNREACHABLE at once."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        textwrap.dedent("""\
        all:
          children:
            rdma_nodes:
              hosts:
                ghost:
                  ansible_host: 127.0.0.1
                  ansible_port: 9
                  ansible_connection: ssh
                  ansible_ssh_common_args: -o ConnectTimeout=3
            subnet_managers:
              hosts: {}
        """)
    )
    return inv


@pytest.mark.parametrize(
    ("extra", "variable", "why"),
    [
        ("train_venv_path=relative/venv", "train_venv_path", "must be absolute"),
        ("train_venv_torch_variant=cu999", "train_venv_torch_variant", "must be one of"),
        ("train_venv_offline=maybe", "train_venv_offline", "bool"),
    ],
)
def test_bad_value_fails_in_validation(tmp_path: Path, extra: str, variable: str, why: str) -> None:
    proc = run(
        ["ansible-playbook", "-i", str(_ghost_inventory(tmp_path)), "playbooks/venv.yml", "-e", extra], timeout=120
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, tail(proc)
    assert variable in out and why in out, tail(proc)
    # Validation ran on the controller: the host was never contacted.
    assert "UNREACHABLE" not in out, tail(proc)
