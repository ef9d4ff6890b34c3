"""The role's Molecule scenario: a fresh emulator (delegated driver), check, converge, idempotence, verify."""

from __future__ import annotations

import pytest

from tests.conftest import run, tail, tool_env

pytestmark = pytest.mark.switch


def test_molecule_nxos_roce_qos() -> None:
    proc = run(["molecule", "test", "-s", "nxos_roce_qos"], timeout=600,
               env=tool_env(ANSIBLE_DEPRECATION_WARNINGS="False"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"molecule test -s nxos_roce_qos failed:\n{tail(proc)}"
    for step in ("check", "converge", "idempotence", "verify", "destroy"):
        assert f"{step}: Executed: Successful" in out or f"{step}\x1b" in out or step in out, step
    assert "failed=1" not in out
