#!/usr/bin/python
"""Module rdma_llm.cluster.gpu_stack_plan: what the GPU stack needs on this node (module_utils/gpu/)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_stack_plan
short_description: Decide from the PCI bus and the pins what of the NVIDIA GPU stack the node needs
description:
  - Reads the PCI bus from sysfs (vendor, device and class need no driver), dpkg's status database, the running
    kernel and the loaded NVIDIA driver under O(root), and plans the driver's packages for that kernel, the fabric
    manager and NSCQ where NVSwitches are on the bus, DCGM where listed, the holds and the nouveau blacklist.
  - A node without an NVIDIA GPU plans nothing (C(needed=false), C(summary) says so).
  - Fails before any change, naming the GPU or package, on an unknown GPU, a driver branch that cannot drive it, an
    unknown kernel, or (O(check_candidates)) a package or pinned version the node's apt sources do not carry.
  - Read-only; supports check mode and diff mode (the packages before and after, one a line).
options:
  root:
    description: The node's C(/) (tests point it at a fake tree).
    type: path
    default: /
  driver_version:
    description: The driver version every NVIDIA package is pinned to (C(580.95.05)).
    type: str
    required: true
  driver_open:
    description: NVIDIA's open kernel modules (the C(-open) packages) rather than the proprietary ones.
    type: bool
    default: true
  kernel_flavour:
    description: The kernel flavour whose meta-packages are held with the driver (C(generic)).
    type: str
    default: generic
  fabric_manager:
    description: C(auto) (where NVSwitches are on the bus), C(true) or C(false).
    type: str
    default: auto
    choices: [auto, "true", "false"]
  dcgm_packages:
    description: DCGM's packages (from NVIDIA's repository), none when empty.
    type: list
    elements: str
    default: []
  gpus:
    description: "GPUs the catalog lacks, C({<device id>: {name, architecture}})."
    type: dict
    default: {}
  check_candidates:
    description: Ask C(apt-cache policy) whether what is to be installed can be, and fail naming what cannot.
    type: bool
    default: true
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Plan the GPU stack
  rdma_llm.cluster.gpu_stack_plan:
    driver_version: "580.95.05"
    dcgm_packages: [datacenter-gpu-manager-4-cuda12]
  register: plan
"""

RETURN = r"""
needed:
  description: Whether the node has an NVIDIA GPU (and so needs the stack).
  type: bool
  returned: always
summary:
  description: One line, C(no NVIDIA GPU on the PCI bus) on a CPU node.
  type: str
  returned: always
gpus:
  description: The GPUs, each with C(address), C(device), C(name), C(chip), C(architecture).
  type: list
  elements: dict
  returned: always
fabric_manager:
  description: C({needed, why}).
  type: dict
  returned: always
packages:
  description: Every package of the stack, C({name, version}) (version a glob, empty for the kernel's own).
  type: list
  elements: dict
  returned: always
install:
  description: What apt is asked for (C(name) or C(name=<version glob>)), none when all is installed at the pin.
  type: list
  elements: str
  returned: always
hold:
  description: Packages to hold that are not held yet (the stack's and the kernel's meta-packages).
  type: list
  elements: str
  returned: always
undo:
  description: One reset operation per package in RV(hold), C({key, argv}) that unholds it (module reset_record).
  type: list
  elements: dict
  returned: always
services:
  description: The systemd units the stack runs.
  type: list
  elements: str
  returned: always
blacklist:
  description: The nouveau blacklist's content when the file must be written, else null.
  type: str
  returned: always
reboot:
  description: Why the node must reboot for the planned driver to load, empty when it need not.
  type: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import apt, node, pci, plan


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "driver_version": {"type": "str", "required": True},
            "driver_open": {"type": "bool", "default": True},
            "kernel_flavour": {"type": "str", "default": "generic"},
            "fabric_manager": {"type": "str", "default": "auto", "choices": ["auto", "true", "false"]},
            "dcgm_packages": {"type": "list", "elements": "str", "default": []},
            "gpus": {"type": "dict", "default": {}},
            "check_candidates": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = ("driver_version", "kernel_flavour", "fabric_manager", "dcgm_packages", "gpus")
    settings = {"open": p["driver_open"], **{name: p[name] for name in names}}
    state = node.read(p["root"])
    try:
        result = plan.plan(pci.read(p["root"]), settings, state)
    except plan.PlanError as exc:
        module.fail_json(msg=f"gpu_stack: {exc}")
    if p["check_candidates"] and result["install"]:
        names = sorted({item.partition("=")[0] for item in result["install"]})
        rc, out, err = module.run_command(["apt-cache", "policy", *names], environ_update={"LANG": "C", "LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg=f"gpu_stack: apt-cache policy failed (rc {rc}): {err.strip()}")
        missing = apt.unavailable(result["install"], apt.policy(out))
        if missing:
            module.fail_json(msg=("gpu_stack: this node's apt sources cannot install the plan, nothing was changed: "
                                  + "; ".join(missing)), plan=result)  # fmt: skip
    extra = {"diff": plan.diff(result, state)} if module._diff and result["needed"] else {}
    module.exit_json(changed=False, root=os.path.abspath(p["root"]), **result, **extra)


if __name__ == "__main__":
    main()
