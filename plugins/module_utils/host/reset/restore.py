"""Restoring: the host put back from a concern's record, part by part in PARTS order, then the record forgotten.

Each part is restored by the module that recorded it (units.py, kernel.py, undo.py, files.py, accounts.py,
packages.py); a failure is an error in the result, and the record stays for the next try.
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.accounts import remove_created_groups
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.files import hand_over, restore_paths
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.kernel import (
    restore_links,
    restore_nft,
    unload_modules,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.packages import restore_packages
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import (
    Host,
    Outcome,
    ResetError,
    forget,
    load,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.undo import run_undo
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.units import (
    bring_back,
    reload_after,
    take_down,
    unit_state,
)

# The restore steps, in the order they run (`parts` selects some of them).
PARTS = ("services", "nft", "undo", "modules", "files", "groups", "packages", "links")


def restore(
    host: Host,
    concern: str,
    parts: Iterable[str] | None = None,
    remove_packages: bool = False,
    keep: bool = False,
) -> dict:
    """Put back what the concern's record holds, in PARTS order (only `parts` when given), then forget the record
    unless `keep` (or something failed: the record stays for the next try). Check mode plans and says it all."""
    manifest = load(host, concern)
    if manifest is None:
        return {
            "changed": False,
            "recorded": False,
            "changes": [],
            "notes": [],
            "errors": [],
            "diff": [],
            "values": {},
            "kept": [],
            "warnings": [],
        }
    wanted = set(parts or PARTS)
    unknown = wanted - set(PARTS)
    if unknown:
        raise ResetError(f"unknown restore parts {sorted(unknown)} (known: {', '.join(PARTS)})")
    out = Outcome(own={e["path"] for e in manifest.get("paths", [])})
    services = manifest.get("services", {})
    now_units = {unit: unit_state(host, unit) for unit in services} if "services" in wanted else {}
    # 1. Units the project added, started or enabled go down before their files go.
    take_down(host, services, now_units, out)
    # 2. nftables tables.
    if "nft" in wanted:
        restore_nft(host, manifest.get("nft", {}), out)
    # 3. Values the project changed, last change first.
    if "undo" in wanted:
        run_undo(host, manifest.get("undo", []), out)
    # 4. Kernel modules it loaded.
    if "modules" in wanted:
        unload_modules(host, manifest.get("modules", {}), out)
    # 5. Files and directories, last recorded first (files before the directories that hold them).
    if "files" in wanted:
        reload_after(host, restore_paths(host, concern, manifest.get("paths", []), out), out)
    # 6. Units that were enabled or running before come back.
    bring_back(host, services, now_units, out)
    # 7. Groups it created.
    if "groups" in wanted:
        remove_created_groups(host, manifest.get("groups", {}), out)
    # 8. Packages it installed: removed on request only, never taking a package it did not install with them.
    if "packages" in wanted:
        restore_packages(host, concern, manifest, remove_packages, out)
    # 9. Links: addresses, routes and MTU (rdma_netplan asks for this after its netplan apply).
    if "links" in wanted:
        restore_links(host, manifest.get("links", {}), out)
    forgotten = False
    if not out.errors:
        hand_over(host, out)
    if not out.errors and not keep:
        out.changes += forget(host, concern)
        forgotten = True
    return {
        "changed": bool(out.changes),
        "recorded": True,
        "changes": out.changes,
        "notes": out.notes,
        "errors": out.errors,
        "diff": out.diff,
        "values": manifest.get("values", {}),
        "packages": manifest.get("packages", []),
        "kept": out.kept,
        "warnings": out.warnings,
        "forgotten": forgotten,
    }


def summary(result: dict) -> str:
    """One line for people: what restore did (or would do)."""
    if not result.get("recorded"):
        return "nothing recorded (the project never changed this, or it was reset already)"
    bits = [f"{len(result['changes'])} change(s)"]
    if result["errors"]:
        bits.append(f"{len(result['errors'])} error(s): " + "; ".join(result["errors"]))
    if result["notes"]:
        bits.append("; ".join(result["notes"]))
    return ", ".join(bits)
