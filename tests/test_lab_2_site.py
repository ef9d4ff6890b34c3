"""site.yml end to end on a fresh lab: check mode first, then converge, then a second run that changes nothing."""

from __future__ import annotations

import pytest

from tests.conftest import play_recap, playbook, tail

pytestmark = pytest.mark.lab


def test_site_check_diff_on_fresh_lab(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml", "--check", "--diff")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    assert set(lab_cluster["hosts"]) <= set(recap), recap
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap


def test_site_converges(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    assert set(lab_cluster["hosts"]) <= set(recap), recap
    assert all(r["failed"] == 0 for r in recap.values()), recap


def test_site_second_run_changes_nothing(lab_cluster) -> None:
    proc = playbook("playbooks/site.yml")
    assert proc.returncode == 0, tail(proc)
    recap = play_recap(proc.stdout)
    changed = {h: r["changed"] for h, r in recap.items() if r["changed"]}
    assert recap and not changed, f"second run changed something: {changed}\n{tail(proc)}"
