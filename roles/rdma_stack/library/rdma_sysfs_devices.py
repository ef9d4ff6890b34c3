#!/usr/bin/python
"""Read the host's RDMA devices from sysfs (read-only; never changes anything)."""

from __future__ import annotations

import os

from ansible.module_utils.basic import AnsibleModule

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
author: rdma-llm-cluster
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
  description: One entry per device with C(name), C(node_type), C(node_guid), C(fw_ver) and C(ports).
  type: list
  elements: dict
  returned: always
"""

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _entries(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path), key=lambda n: (len(n), n))
    except OSError:
        return []


def _port(port_dir: str, number: str) -> dict:
    gids = []
    for index in _entries(os.path.join(port_dir, "gids")):
        gid = _read(os.path.join(port_dir, "gids", index))
        if not gid or gid == ZERO_GID:
            continue
        gids.append(
            {
                "index": int(index),
                "gid": gid,
                "type": _read(os.path.join(port_dir, "gid_attrs", "types", index)),
                "netdev": _read(os.path.join(port_dir, "gid_attrs", "ndevs", index)),
            }
        )
    return {
        "port": int(number),
        "state": _read(os.path.join(port_dir, "state")),
        "phys_state": _read(os.path.join(port_dir, "phys_state")),
        "link_layer": _read(os.path.join(port_dir, "link_layer")),
        "rate": _read(os.path.join(port_dir, "rate")),
        "lid": _read(os.path.join(port_dir, "lid")),
        "sm_lid": _read(os.path.join(port_dir, "sm_lid")),
        "gids": gids,
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys/class/infiniband"},
            "mad_abi_path": {"type": "path", "default": "/sys/class/infiniband_mad/abi_version"},
        },
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    devices = []
    for name in _entries(root):
        dev_dir = os.path.join(root, name)
        ports_dir = os.path.join(dev_dir, "ports")
        devices.append(
            {
                "name": name,
                "node_type": _read(os.path.join(dev_dir, "node_type")),
                "node_guid": _read(os.path.join(dev_dir, "node_guid")),
                "fw_ver": _read(os.path.join(dev_dir, "fw_ver")),
                "ports": [_port(os.path.join(ports_dir, n), n) for n in _entries(ports_dir) if n.isdigit()],
            }
        )
    if devices:
        message = f"{len(devices)} RDMA device(s): " + ", ".join(d["name"] for d in devices)
    else:
        message = f"no RDMA device found ({root} is empty or absent)"
    module.exit_json(
        changed=False,
        state="present" if devices else "none",
        message=message,
        mad_abi=os.path.exists(module.params["mad_abi_path"]),
        devices=devices,
    )


if __name__ == "__main__":
    main()
