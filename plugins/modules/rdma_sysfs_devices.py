#!/usr/bin/python
"""Module rdma_llm.cluster.rdma_sysfs_devices: the host's RDMA devices from sysfs (module_utils/node/sysfs.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rdma_sysfs_devices
short_description: Report the RDMA devices, ports, states, link layers and GIDs found in sysfs
description:
  - Reads C(/sys/class/infiniband/<device>) and its C(ports/<n>) entries. Read-only; supports check mode.
  - Returns C(state=none) and an empty list when the kernel exposes no RDMA device.
options:
  sysfs_root:
    description: Directory listing the RDMA devices.
    type: path
    default: /sys/class/infiniband
  mad_abi_path:
    description: File that exists when the kernel offers InfiniBand MAD access (what OpenSM needs).
    type: path
    default: /sys/class/infiniband_mad/abi_version
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Read the RDMA devices, ports and GIDs
  rdma_llm.cluster.rdma_sysfs_devices:
  register: devices

- name: Read a fake tree (tests)
  rdma_llm.cluster.rdma_sysfs_devices:
    sysfs_root: /tmp/fake/sys/class/infiniband
"""

RETURN = r"""
state:
  description: C(present) when at least one device was found, else C(none).
  type: str
  returned: always
message:
  description: One-line summary.
  type: str
  returned: always
mad_abi:
  description: Whether the MAD ABI file exists.
  type: bool
  returned: always
devices:
  description: One entry per device with C(name), C(node_type), C(node_guid), C(fw_ver), C(hca_type) and C(ports).
  type: list
  elements: dict
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import rdma_devices


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys/class/infiniband"},
            "mad_abi_path": {"type": "path", "default": "/sys/class/infiniband_mad/abi_version"},
        },
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    found = rdma_devices(root)
    if found:
        message = f"{len(found)} RDMA device(s): " + ", ".join(d["name"] for d in found)
    else:
        message = f"no RDMA device found ({root} is empty or absent)"
    module.exit_json(
        changed=False,
        state="present" if found else "none",
        message=message,
        mad_abi=os.path.exists(module.params["mad_abi_path"]),
        devices=found,
    )


if __name__ == "__main__":
    main()
