"""rdma_modules' decisions (module_utils/host/kernel_modules.py): what a host persists and loads, GPUDirect RDMA's
peer-memory module by mode and by what the host has, and the report from modprobe's results.

The lab kernel has neither loadable modules nor an NVIDIA driver, so these tables are where the GPU-node
branch is proven; the Molecule scenario proves the lab branch on real hosts."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import kernel_modules as mods

BASE = ["ib_umad", "ib_core", "rdma_cm"]
GDR = ["nvidia_peermem"]


def loads(plan):
    return [(m["name"], m["required"]) for m in plan["load"]]


@pytest.mark.parametrize(
    ("mode", "nvidia", "persisted", "load", "note"),
    [
        # auto: only where the driver is loaded, and a failure there is not fatal
        ("auto", True, BASE + GDR, [*((m, True) for m in BASE), ("nvidia_peermem", False)], "NVIDIA driver loaded"),
        ("auto", False, BASE, [(m, True) for m in BASE], "not needed: no NVIDIA driver loaded"),
        # true: everywhere, and required
        (True, False, BASE + GDR, [*((m, True) for m in BASE), ("nvidia_peermem", True)], "required"),
        ("yes", True, BASE + GDR, [*((m, True) for m in BASE), ("nvidia_peermem", True)], "required"),
        # false: never
        (False, True, BASE, [(m, True) for m in BASE], "off (rdma_modules_gpudirect is false)"),
        ("False", True, BASE, [(m, True) for m in BASE], "off (rdma_modules_gpudirect is false)"),
    ],
)
def test_plan_by_gpudirect_mode(mode, nvidia, persisted, load, note) -> None:
    plan = mods.plan(BASE, mode, GDR, load=True, has_proc_modules=True, nvidia_driver=nvidia)
    assert plan["persisted"] == persisted
    assert loads(plan) == load
    assert plan["skipped"] == [] and plan["reason"] == ""
    assert plan["gpudirect"]["note"] == note


def test_plan_without_loadable_modules_persists_and_skips() -> None:
    plan = mods.plan(BASE, "auto", GDR, load=True, has_proc_modules=False, nvidia_driver=False)
    assert plan["load"] == [] and plan["skipped"] == BASE == plan["persisted"]
    assert plan["reason"] == "loading skipped: kernel without loadable modules"
    off = mods.plan(BASE, "auto", GDR, load=False, has_proc_modules=True, nvidia_driver=True)
    assert off["skipped"] == BASE + GDR and off["reason"] == "loading skipped: rdma_modules_load is false"


def test_plan_lists_a_module_once() -> None:
    plan = mods.plan(["ib_core", "nvidia_peermem", "ib_core"], True, GDR)
    assert plan["persisted"] == ["ib_core", "nvidia_peermem"]


def test_bad_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="auto, true or false"):
        mods.plan(BASE, "always", GDR)


def modprobe_ok(name):
    return {"item": {"name": name}, "changed": False, "failed": False}


def modprobe_failed(name, stderr):
    # failed_when turned the failure off for a module that is not required; rc and stderr stay.
    return {"item": {"name": name}, "failed": False, "rc": 1, "stderr": stderr + "\n", "msg": stderr}


def test_state_reports_a_gpudirect_module_that_would_not_load() -> None:
    plan = mods.plan(BASE, "auto", GDR, nvidia_driver=True)
    err = "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument"
    results = [*(modprobe_ok(m) for m in BASE), modprobe_failed("nvidia_peermem", err)]
    state = mods.state(plan, "/etc/modules-load.d/rdma-llm.conf", results)
    assert state["loaded"] == BASE
    assert state["failed"] == {"nvidia_peermem": err}
    assert state["gpudirect"]["status"] == f"failed: nvidia_peermem: {err}"
    assert mods.report(state) == f"nvidia_peermem not loaded: {err}; GPUDirect RDMA: failed: nvidia_peermem: {err}"


def test_state_with_gpudirect_loaded() -> None:
    plan = mods.plan(BASE, "auto", GDR, nvidia_driver=True)
    state = mods.state(plan, "/f.conf", [modprobe_ok(m) for m in BASE + GDR])
    assert state["loaded"] == BASE + GDR and state["failed"] == {}
    assert state["gpudirect"]["status"] == "loaded"
    assert mods.report(state) == ""


def test_state_on_the_lab_kernel() -> None:
    """What the lab (and the Molecule scenario) records: the list persisted, nothing loaded, no GPU driver."""
    plan = mods.plan(BASE, "auto", GDR, has_proc_modules=False, nvidia_driver=False)
    state = mods.state(plan, "/etc/modules-load.d/rdma-llm.conf", [])
    assert state == {
        "file": "/etc/modules-load.d/rdma-llm.conf",
        "persisted": BASE,
        "loaded": [],
        "skipped": BASE,
        "failed": {},
        "reason": "loading skipped: kernel without loadable modules",
        "gpudirect": {
            "mode": "auto",
            "modules": [],
            "note": "not needed: no NVIDIA driver loaded",
            "status": "not needed: no NVIDIA driver loaded",
        },
    }
    assert mods.report(state) == (
        "loading skipped: kernel without loadable modules "
        "(ib_umad, ib_core, rdma_cm persisted in /etc/modules-load.d/rdma-llm.conf)"
    )


def test_state_of_gpudirect_persisted_on_a_kernel_that_cannot_load() -> None:
    plan = mods.plan(BASE, True, GDR, has_proc_modules=False)
    state = mods.state(plan, "/f.conf", [])
    assert state["gpudirect"]["status"] == "persisted, not loaded (loading skipped: kernel without loadable modules)"
    assert mods.report(state).endswith(
        "GPUDirect RDMA: persisted, not loaded (loading skipped: kernel without loadable modules)"
    )
