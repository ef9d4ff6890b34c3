#!/usr/bin/python
"""Module rdma_llm.cluster.train_venv_version: the training venv's versions on a node
(module_utils/host/venv_versions.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: train_venv_version
short_description: Read the training venv's versions, or point the venv path at one
description:
  - With I(state=read), returns the content of each of I(files) that exists, what I(path) is (a link and its
    target, a directory and its pins stamp, or absent) and the version directories under I(versions_dir).
    Read-only.
  - With I(state=switched), makes I(path) a symlink to I(versions_dir)/I(version) (a directory at I(path), the layout
    before versions, is moved to the version its stamp names first, unless a process runs from it), then removes the
    oldest versions beyond I(keep), never one in use. Supports check mode and diff.
options:
  state:
    description: C(read) or C(switched).
    type: str
    choices: [read, switched]
    default: read
  path:
    description: The venv path the playbooks and tools use.
    type: path
    required: true
  versions_dir:
    description: Where each version's directory lives.
    type: path
    required: true
  version:
    description: The version to point I(path) at (state=switched).
    type: str
  keep:
    description: Versions kept, the one in use included (state=switched).
    type: int
    default: 2
  files:
    description: Files to read (state=read).
    type: list
    elements: path
    default: []
  root:
    description: Root of the node's tree (tests point it at a fake one).
    type: path
    default: /
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Point the venv at the new pins' directory
  rdma_llm.cluster.train_venv_version:
    state: switched
    path: /opt/rdma-llm/venv
    versions_dir: /opt/rdma-llm/venvs
    version: 3f9a0c1d2e4b
"""

RETURN = r"""
files:
  description: (read) path -> content, stripped, for each file that exists.
  type: dict
  returned: state=read
path:
  description: (read) kind (link, dir, absent), target (a link's), stamp (the pins stamp at the path).
  type: dict
  returned: state=read
versions:
  description: (read) version name -> its pins stamp (null without one).
  type: dict
  returned: state=read
changes:
  description: (switched) what changed, in words.
  type: list
  returned: state=switched
notes:
  description: (switched) versions kept because in use, a move, or why the switch waits.
  type: list
  returned: state=switched
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.venv_versions import (
    STAMP,
    apply,
    in_use,
    plan,
    read,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["read", "switched"], "default": "read"},
            "path": {"type": "path", "required": True},
            "versions_dir": {"type": "path", "required": True},
            "version": {"type": "str"},
            "keep": {"type": "int", "default": 2},
            "files": {"type": "list", "elements": "path", "default": []},
            "root": {"type": "path", "default": "/"},
        },
        required_if=[("state", "switched", ["version"])],
        supports_check_mode=True,
    )
    p = module.params
    root, path, vdir = p["root"], p["path"], p["versions_dir"].rstrip("/")
    state = read(root, path, vdir, p["files"])
    if p["state"] == "read":
        module.exit_json(changed=False, **state)
    want, keep = p["version"], max(int(p["keep"]), 1)
    dirs = [path] + [f"{vdir}/{n}" for n in state["versions"]]
    busy = in_use(root, dirs)
    ages = {}
    for n in state["versions"]:
        try:
            ages[n] = os.stat(os.path.join(root, vdir.lstrip("/"), n, STAMP)).st_mtime
        except OSError:
            ages[n] = 0.0
    try:
        steps = plan(state, path, vdir, want, keep, busy, ages)
    except ValueError as err:
        module.fail_json(msg=str(err))
    migrated = steps["migrate"] and steps["migrate"][1] == f"{vdir}/{want}"
    built = want in state["versions"] or migrated
    if not steps["blocked"] and not built and not module.check_mode:
        module.fail_json(msg=f"{vdir}/{want} is not built: the install step makes it before the switch")
    if steps["blocked"]:
        module.warn(steps["blocked"])
    before = state["path"]["target"] or (path if state["path"]["kind"] == "dir" else "")
    diff = {"before": f"{path} -> {before}\n", "after": f"{path} -> {steps['link'] or before}\n"}
    changed = bool(steps["migrate"] or steps["link"] or steps["remove"])
    changes = [] if module.check_mode or steps["blocked"] else apply(root, path, steps)
    module.exit_json(
        changed=changed,
        changes=changes,
        notes=steps["notes"] + ([steps["blocked"]] if steps["blocked"] else []),
        blocked=steps["blocked"],
        diff=diff,
    )


if __name__ == "__main__":
    main()
