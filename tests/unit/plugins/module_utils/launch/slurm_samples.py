"""The recorded Slurm outputs the Slurm engine's tests read (test_slurm_state.py, test_slurm_nodes.py,
test_slurm_script.py, test_slurm_job.py); where they come from: tests/fixtures/slurm/README.md."""

from __future__ import annotations

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()
