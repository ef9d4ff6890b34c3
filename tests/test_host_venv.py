"""train_venv: bad inputs fail in validation before any change; the lab's venv imports the payload stack.

The lab test needs a running lab (`python -m lab up` writes inventory/lab/hosts.yml) and a converged
`playbooks/venv.yml`; it skips with the reason otherwise.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run, tail

LAB_HOSTS = ROOT / "inventory" / "lab" / "hosts.yml"
IMPORTS = ("torch", "transformers", "datasets", "deepspeed", "accelerate")


def _ghost_inventory(tmp_path: Path) -> Path:
    """One host at an unroutable TEST-NET address: any connection attempt fails as UNREACHABLE."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(textwrap.dedent("""\
        all:
          children:
            rdma_nodes:
              hosts:
                ghost:
                  ansible_host: 192.0.2.1
                  ansible_connection: ssh
                  ansible_ssh_common_args: -o ConnectTimeout=3
            subnet_managers:
              hosts: {}
        """))
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
    proc = run(["ansible-playbook", "-i", str(_ghost_inventory(tmp_path)), "playbooks/venv.yml", "-e", extra],
               timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, tail(proc)
    assert variable in out and why in out, tail(proc)
    # Validation ran on the controller: the host was never contacted.
    assert "UNREACHABLE" not in out, tail(proc)


@pytest.mark.skipif(not LAB_HOSTS.exists(),
                    reason="no running lab: inventory/lab/hosts.yml is written by `python -m lab up`")
def test_lab_venv_imports_the_training_stack() -> None:
    code = ("import json, sys, torch, transformers, datasets, deepspeed, accelerate; "
            "print(json.dumps({'prefix': sys.prefix, 'torch': torch.__version__, "
            "'transformers': transformers.__version__, 'datasets': datasets.__version__, "
            "'deepspeed': deepspeed.__version__, 'accelerate': accelerate.__version__}))")
    proc = run(["ansible", "-i", "inventory/lab", "rdma_nodes", "-o", "-m", "ansible.builtin.command",
                "-a", json.dumps({"argv": ["{{ cluster_train_venv }}/bin/python", "-c", code]}),
                "-e", "ansible_python_interpreter=/usr/bin/python3"], timeout=600)
    assert proc.returncode == 0, tail(proc)
    lines = [line for line in proc.stdout.splitlines() if "(stdout)" in line]
    assert len(lines) >= 2, tail(proc)
    for line in lines:
        host, _, payload = line.partition(" | ")
        got = json.loads(payload.split("(stdout) ", 1)[1].replace("\\n", "\n").splitlines()[-1])
        assert got["prefix"].endswith("/venv"), (host, got)
        # The CPU build on the CPU-only lab (pinned torch from the offline wheelhouse).
        assert got["torch"].endswith("+cpu"), (host, got)
        assert set(IMPORTS) <= set(got), (host, got)
