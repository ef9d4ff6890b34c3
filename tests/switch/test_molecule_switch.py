"""The role's Molecule scenario: a fresh emulator (delegated driver), check, converge, idempotence, verify.

Molecule is started in the background when collection ends (see conftest.py); this test waits for it.
"""

from __future__ import annotations

import re

import pytest

from tests.molecule_queue import step_passed

pytestmark = pytest.mark.switch


def test_molecule_nxos_roce_qos(molecule_result) -> None:
    returncode, output = molecule_result
    out = re.sub(r"\x1b\[[0-9;]*m", "", output)
    assert returncode == 0, f"molecule test -s nxos_roce_qos failed:\n{out[-6000:]}"
    for step in ("create", "check", "converge", "idempotence", "verify", "destroy"):
        assert step_passed(out, step), f"step {step} did not pass:\n{out[-3000:]}"
