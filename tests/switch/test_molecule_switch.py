"""The role's Molecule scenario: a fresh emulator (delegated driver), check, converge, idempotence, verify."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run, tail, tool_env

pytestmark = pytest.mark.switch


def test_molecule_nxos_roce_qos() -> None:
    proc = run(["molecule", "test", "-s", "nxos_roce_qos"], timeout=600,
               env=tool_env(ANSIBLE_DEPRECATION_WARNINGS="False"))
    assert proc.returncode == 0, f"molecule test -s nxos_roce_qos failed:\n{tail(proc)}"
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    for step in ("create", "check", "converge", "idempotence", "verify", "destroy"):
        assert re.search(rf"{step}: Executed: Successful", out), f"step {step} did not pass:\n{out[-3000:]}"
