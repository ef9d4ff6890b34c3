"""Recording: what a concern asks to keep (`Spec`, the module's options), kept the first time only; and, after each
write that changed a file, the checksum of what the project wrote there (`written`).

Each part is read and kept by its own module (files.py, units.py, kernel.py, accounts.py, undo.py, packages.py);
the record is saved in the store (store.py) unless in check mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.accounts import record_groups
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.edits import record_written
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.files import check_path, record_path
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.kernel import (
    record_links,
    record_modules,
    record_nft,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.packages import record_packages
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import (
    Host,
    ResetError,
    empty,
    load,
    save,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.undo import record_undo
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.units import record_units


@dataclass
class Spec:
    """What a concern asks to record (the module's options)."""

    paths: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    nft_tables: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    undo: list[dict] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    package_groups: list[str] = field(default_factory=list)
    package_users: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)


def record(host: Host, concern: str, spec: Spec) -> dict:
    """Record, the first time only, each item of `spec`; returns {changed, lines} (nothing is written in check
    mode, where `changed` says whether a real run would record something)."""
    manifest = load(host, concern) or empty(concern)
    lines: list[str] = []
    for path in spec.paths:
        record_path(host, manifest, check_path(path, "path"), "file", lines)
    for path in spec.trees:
        record_path(host, manifest, check_path(path, "tree"), "tree", lines)
    record_units(host, manifest, spec.services, lines)
    record_nft(host, manifest, spec.nft_tables, lines)
    record_groups(host, manifest, spec.groups, lines)
    record_links(host, manifest, spec.links, lines)
    record_modules(host, manifest, spec.modules, lines)
    record_undo(manifest, spec.undo, lines)
    record_packages(manifest, spec.packages, spec.package_groups, spec.package_users, lines)
    for key, value in (spec.values or {}).items():
        if key not in manifest["values"]:
            manifest["values"][key] = value
            lines.append(f"value {key}: {value!r}")
    if lines and not host.check_mode:
        save(host, manifest)
    return {"changed": bool(lines), "lines": lines}


def written(host: Host, concern: str, paths: list[str]) -> dict:
    """After a write that changed them: the sha256 of what the project wrote to `paths` (edits.py); returns {changed,
    lines}. Check mode wrote nothing, so there is nothing to checksum."""
    if host.check_mode:
        return {"changed": False, "lines": []}
    manifest = load(host, concern)
    if manifest is None:
        raise ResetError(f"{concern} has no record: the role records before it writes")
    lines: list[str] = []
    record_written(host, manifest, [check_path(p, "path") for p in paths], lines)
    if lines:
        save(host, manifest)
    return {"changed": bool(lines), "lines": lines}
