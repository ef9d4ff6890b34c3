"""Every role's Molecule scenario: create, prepare, check, converge, idempotence, verify, destroy."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, run, tail

# nxos_roce_qos runs from tests/switch (in the background, beside the role tests that share its emulator code).
ELSEWHERE = {"nxos_roce_qos"}
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml") if p.parent.name not in ELSEWHERE)

pytestmark = pytest.mark.molecule


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str, lab_image: str) -> None:
    proc = run(["molecule", "test", "-s", scenario], timeout=1200)
    assert proc.returncode == 0, f"molecule test -s {scenario} failed:\n{tail(proc)}"
    # The idempotence step must have run and passed, not been skipped.
    out = proc.stdout + proc.stderr
    assert "idempotence" in out, out[-3000:]
