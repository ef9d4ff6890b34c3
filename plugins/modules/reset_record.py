#!/usr/bin/python
"""Module rdma_llm.cluster.reset_record: what a first run replaces, put back by reset (module_utils/host/reset/)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: reset_record
short_description: Record what a concern is about to replace on the host, or put it back (playbooks/reset.yml)
description:
  - With O(state=recorded) (a role calls it before it writes), records in C(/var/lib/rdma-llm/reset/<concern>/) what
    the host has now, the first time only (files as a copy or their absence, directories the project fills, systemd
    units' states, nftables tables, groups, network links (addresses, routes, MTU), loaded kernel modules, undo
    operations and packages installed by the project. Later runs never overwrite the first record.
  - With O(state=written) (a role calls it after a write that changed its files, when the write is changed),
    records the sha256 of what the project wrote to O(paths), each recorded before; a later write replaces it.
  - With O(state=restored) (the role's C(tasks/reset.yml)), puts it back in a fixed order (units down, nftables,
    undo operations, modules, files, units up, groups, packages on request, links), then removes the record unless
    O(keep) is set or something failed (the record then stays for the next try).
  - A file changed since the project last wrote it (its sha256 differs from O(state=written)'s) is copied to
    C(/var/lib/rdma-llm/kept/<path>.<UTC time>) with a warning naming both before it is put back or removed.
  - When it purges the packages the project installed (O(remove_packages)), also removes what they left in their
    data directories (MariaDB's C(/var/lib/mysql), C(/var/log/slurm) ...; module_utils/host/reset/data_dirs.py),
    unless a package that is still installed uses them.
  - Supports check mode (plans and says what it would record or restore) and diff mode (the files it restores).
options:
  concern:
    description: The record's name, a role (C(common), C(rdma_netplan) ...).
    type: str
    required: true
  state:
    description: C(recorded), C(written) or C(restored).
    type: str
    choices: [recorded, written, restored]
    default: recorded
  paths:
    description:
      - Files (or directories) the concern writes.
      - Absent ones are removed on reset with the directories created for them.
      - With O(state=written), the files the concern has just written (recorded before).
    type: list
    elements: str
    default: []
  trees:
    description:
      - Directories the concern fills entirely.
      - Removed with their content on reset when the project created them.
    type: list
    elements: str
    default: []
  services:
    description: systemd units whose load, enablement and activity are put back.
    type: list
    elements: str
    default: []
  nft_tables:
    description: nftables tables, as C(<family> <name>).
    type: list
    elements: str
    default: []
  groups:
    description: System groups the concern creates.
    type: list
    elements: str
    default: []
  links:
    description: Network interfaces whose addresses, routes and MTU are put back (restore part C(links)).
    type: list
    elements: str
    default: []
  modules:
    description: Kernel modules the concern loads.
    type: list
    elements: str
    default: []
  undo:
    description: Operations that each put one value back, C({key, argv}) or C({key, write, value}) or C({key, rmdir}).
    type: list
    elements: dict
    default: []
  packages:
    description: Packages the project installed (the action apt_missing records them).
    type: list
    elements: str
    default: []
  package_users:
    description:
      - System users those packages' installs created (the action apt_missing records them).
      - Removed after the packages, before their groups, on request only.
    type: list
    elements: str
    default: []
  package_groups:
    description:
      - System groups those packages' installs created (the action apt_missing records them).
      - Removed after the packages, on request only; a user's primary group stays.
    type: list
    elements: str
    default: []
  values:
    description: Other values a concern's reset needs, first value wins (returned by O(state=restored)).
    type: dict
    default: {}
  parts:
    description:
      - Restore only these parts (services, nft, undo, modules, files, groups, packages, links); all by default.
    type: list
    elements: str
    default: []
  remove_packages:
    description: Remove the packages the project installed (never one it did not install with them).
    type: bool
    default: false
  keep:
    description: Keep the record after restoring (a concern that restores in two steps).
    type: bool
    default: false
  root:
    description: Root the paths are under (tests point it at a temporary tree).
    type: path
    default: /
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Record what the first run replaces
  rdma_llm.cluster.reset_record:
    concern: common
    paths: [/etc/hosts, /etc/hostname]

- name: Record what the role wrote, after a write that changed it
  rdma_llm.cluster.reset_record:
    concern: common
    state: written
    paths: [/etc/hosts]

- name: Put it back
  rdma_llm.cluster.reset_record:
    concern: common
    state: restored
"""

RETURN = r"""
lines:
  description: What was recorded now (states recorded and written).
  type: list
  returned: always
recorded:
  description: Whether a record existed (state restored).
  type: bool
  returned: always
changes:
  description: What was (in check mode, would be) changed (state restored).
  type: list
  returned: always
notes:
  description: What was left as it is, and why.
  type: list
  returned: always
values:
  description: The record's values.
  type: dict
  returned: always
kept:
  description: The files changed since the project wrote them, each C({path, copy}) (state restored).
  type: list
  returned: always
"""

import dataclasses

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record, written
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore, summary
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, ResetError


def main() -> None:
    # What to record is Spec's fields, named once there: lists of names, but for undo and values.
    recorded = [f.name for f in dataclasses.fields(Spec)]
    spec = {name: {"type": "list", "elements": "str", "default": []} for name in [*recorded, "parts"]}
    spec.update(
        concern={"type": "str", "required": True},
        state={"type": "str", "choices": ["recorded", "written", "restored"], "default": "recorded"},
        undo={"type": "list", "elements": "dict", "default": []},
        values={"type": "dict", "default": {}},
        remove_packages={"type": "bool", "default": False},
        keep={"type": "bool", "default": False},
        root={"type": "path", "default": "/"},
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params

    def run(argv: list[str]) -> tuple[int, str, str]:
        """A command; one that is not installed (nft before nftables) answers 127 instead of failing the module."""
        try:
            return module.run_command(argv, handle_exceptions=False)
        except OSError as exc:
            return 127, "", f"{argv[0]}: {exc.strerror or exc}"

    host = Host(root=p["root"], run=run, check_mode=module.check_mode)
    try:
        if p["state"] == "recorded":
            done = record(host, p["concern"], Spec(**{name: p[name] for name in recorded}))
            module.exit_json(changed=done["changed"], lines=done["lines"], concern=p["concern"])
        if p["state"] == "written":
            done = written(host, p["concern"], p["paths"])
            module.exit_json(changed=done["changed"], lines=done["lines"], concern=p["concern"])
        result = restore(host, p["concern"], p["parts"] or None, p["remove_packages"], p["keep"])
    except ResetError as exc:
        module.fail_json(msg=f"reset record {p['concern']}: {exc}")
    diff = result.pop("diff")
    for text in result.pop("warnings"):  # a file changed since the project wrote it, and where its copy is
        module.warn(text)
    msg = f"{p['concern']}: {summary(result)}"
    if result["errors"]:
        module.fail_json(msg=msg, **result)
    module.exit_json(msg=msg, diff=diff or None, **result)


if __name__ == "__main__":
    main()
