"""Decisions of the rdma_modules role: what to persist and load on a host, and what the loading did.

GPUDirect RDMA (NCCL reading and writing GPU memory straight from the RDMA NIC) needs a peer-memory module
beside the NVIDIA driver: `nvidia_peermem` (NCCL looks for /sys/module/nvidia_peermem or the older
nv_peer_mem's /sys/kernel/mm/memory_peers/nv_mem). Without it, or DMA-BUF, every inter-node byte is staged
through host memory. It only loads where the NVIDIA driver is, and on some systems not even there (Grace
Hopper answers EINVAL: its GPU memory is host memory), so `auto` loads it where the driver is loaded and
reports a failure instead of failing the host.
"""

from __future__ import annotations

from typing import Any

DOCUMENTATION = """
name: rdma_modules
short_description: filters of the rdma_modules role (plan, state)
description: See roles/rdma_modules/README.md.
"""

MODES = ("auto", "true", "false")


def gpudirect_mode(value: Any) -> str:
    """`rdma_modules_gpudirect` as one of MODES (a bool or its string from -e, or 'auto')."""
    text = str(value).strip().lower()
    mode = {"yes": "true", "no": "false", "1": "true", "0": "false"}.get(text, text)
    if mode not in MODES:
        raise ValueError(f"rdma_modules_gpudirect must be auto, true or false (got {value!r})")
    return mode


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def plan(
    modules: list[str],
    gpudirect: Any = "auto",
    gpudirect_modules: list[str] | None = None,
    load: bool = True,
    has_proc_modules: bool = True,
    nvidia_driver: bool = False,
) -> dict[str, Any]:
    """What the role persists and loads on one host.

    Returns `load`, one {"name", "required"} per module to load now (a GPUDirect module in `auto` mode is not
    required: its failure is reported, not fatal), and `gpudirect`, why the GPUDirect modules are in or out.
    """
    mode = gpudirect_mode(gpudirect)
    extra = _unique(gpudirect_modules or [])
    if mode == "false":
        gdr_in, gdr_note = [], "off (rdma_modules_gpudirect is false)"
    elif mode == "auto" and not nvidia_driver:
        gdr_in, gdr_note = [], "not needed: no NVIDIA driver loaded"
    else:
        gdr_in, gdr_note = extra, ("required" if mode == "true" else "NVIDIA driver loaded")
    persisted = _unique(list(modules) + gdr_in)
    can_load = bool(load) and bool(has_proc_modules)
    required = set(modules) | (set(gdr_in) if mode == "true" else set())
    if can_load:
        reason = ""
    elif not has_proc_modules:
        reason = "loading skipped: kernel without loadable modules"
    else:
        reason = "loading skipped: rdma_modules_load is false"
    return {
        "persisted": persisted,
        "load": [{"name": m, "required": m in required} for m in persisted] if can_load else [],
        "skipped": [] if can_load else persisted,
        "reason": reason,
        "gpudirect": {"mode": mode, "modules": gdr_in, "note": gdr_note},
    }


def state(the_plan: dict[str, Any], file: str, results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The role's report (rdma_modules_state and the local fact) from the plan and the modprobe results.

    A module whose modprobe failed without failing the host (a GPUDirect module in `auto` mode) is listed
    in `failed` with the kernel's message."""
    failed = {}
    for result in results or []:
        if result.get("skipped"):
            continue
        if int(result.get("rc") or 0) != 0:
            name = (result.get("item") or {}).get("name") or result.get("name")
            failed[name] = (result.get("stderr") or result.get("msg") or f"modprobe rc {result['rc']}").strip()
    loaded = [m["name"] for m in the_plan["load"] if m["name"] not in failed]
    gdr = dict(the_plan["gpudirect"])
    mods = gdr["modules"]
    if mods:
        if any(m in failed for m in mods):
            gdr["status"] = "failed: " + "; ".join(f"{m}: {failed[m]}" for m in mods if m in failed)
        elif all(m in loaded for m in mods):
            gdr["status"] = "loaded"
        else:
            gdr["status"] = "persisted, not loaded (" + (the_plan["reason"] or "not loaded") + ")"
    else:
        gdr["status"] = gdr["note"]
    return {
        "file": file,
        "persisted": the_plan["persisted"],
        "loaded": loaded,
        "skipped": the_plan["skipped"],
        "failed": failed,
        "reason": the_plan["reason"],
        "gpudirect": gdr,
    }


def report(the_state: dict[str, Any]) -> str:
    """One line for the console where something was not loaded; empty when everything was."""
    parts = []
    if the_state["skipped"]:
        parts.append(f"{the_state['reason']} ({', '.join(the_state['skipped'])} persisted in {the_state['file']})")
    parts += [f"{name} not loaded: {why}" for name, why in the_state["failed"].items()]
    if parts and the_state["gpudirect"]["modules"]:
        parts.append(f"GPUDirect RDMA: {the_state['gpudirect']['status']}")
    return "; ".join(parts)


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"rdma_modules_plan": plan, "rdma_modules_state": state, "rdma_modules_report": report}
