"""How the roles call the module reset_record (roles/*/tasks/*.yml). A role whose reset purges its packages on
request plans its dry run with the same request (rdma_netplan's check-mode plan once said the packages stay under
-e reset_packages=true, then the real run purged them); each `state: written` call runs only after a write that
changed something (a run that changes nothing runs no module for it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[4] / "roles"
MODULE = "rdma_llm.cluster.reset_record"


def tasks(path: Path) -> list[dict]:
    """Every task of a tasks file, those inside blocks too."""
    out, todo = [], list(yaml.safe_load(path.read_text()) or [])
    while todo:
        task = todo.pop(0)
        todo += task.get("block", []) + task.get("rescue", []) + task.get("always", [])
        out.append(task)
    return out


def restores_packages(task: dict) -> bool:
    args = task.get(MODULE) or {}
    return args.get("state") == "restored" and "packages" in (args.get("parts") or ["packages"])


def purging_roles() -> list[str]:
    """The roles with a <role>_reset_packages default: their reset purges what they installed on request."""
    return sorted(
        r.name
        for r in ROLES.iterdir()
        if f"{r.name}_reset_packages" in (yaml.safe_load((r / "defaults/main.yml").read_text()) or {})
    )


def test_the_roles_that_purge_are_found():
    assert {"rdma_netplan", "slurm", "rdma_stack"} <= set(purging_roles())


@pytest.mark.parametrize("role", purging_roles())
def test_every_package_restore_of_a_purging_role_passes_the_request(role):
    found = [t for f in sorted((ROLES / role / "tasks").glob("reset*.yml")) for t in tasks(f) if restores_packages(t)]
    assert found, f"{role}: no reset_record task restores the packages"
    for task in found:
        asked = str(task[MODULE].get("remove_packages", "")).replace(" ", "")
        assert asked == f"{{{{{role}_reset_packages|bool}}}}", f"{role}: {task['name']!r} plans without the request"


def test_every_written_call_follows_a_changed_write():
    calls = [
        (f, t)
        for f in sorted(ROLES.glob("*/tasks/*.yml"))
        for t in tasks(f)
        if (t.get(MODULE) or {}).get("state") == "written"
    ]
    assert len(calls) >= 4
    for path, task in calls:
        when = " ".join(task.get("when") if isinstance(task.get("when"), list) else [str(task.get("when", ""))])
        assert " is changed" in when, f"{path.parent.parent.name}: {task['name']!r} runs on every run"
