"""Every role's Molecule scenario: create, prepare, check, converge, idempotence, verify, destroy.

The scenarios run one after another in the background from the end of collection (tests/molecule_queue.py),
beside the lab tests; each test here waits for its scenario's result."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.molecule_queue import step_passed

# nxos_roce_qos has its test in tests/switch, beside the role tests that share its emulator code (same queue).
ELSEWHERE = {"nxos_roce_qos"}
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml") if p.parent.name not in ELSEWHERE)

pytestmark = pytest.mark.molecule


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str, molecule_queue) -> None:
    result = molecule_queue.result(scenario)
    out = result.output
    assert result.returncode == 0, (
        f"molecule test -s {scenario} failed (rc {result.returncode}, log {molecule_queue.logs}):\n{out[-8000:]}"
    )
    # The idempotence step ran and passed (not skipped, not failed).
    assert step_passed(out, "idempotence"), f"molecule test -s {scenario}: no passed idempotence step\n{out[-3000:]}"
    print(f"molecule {scenario}: {result.seconds:.0f} s")
