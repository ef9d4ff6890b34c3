"""The host's RDMA devices as sysfs shows them (read-only): devices, ports, states, link layers, rates, GIDs.

The one sysfs reader: rdma_stack records the devices with it and the ladder's node health reads them with it.
Every path starts at `root`, so tests run it on fake sysfs trees.
"""

from __future__ import annotations

import os

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


def devices(root: str = "/sys/class/infiniband") -> list[dict]:
    """One entry per device under `root`: name, node type and GUID, firmware, ports (state, rate, GIDs ...)."""
    found = []
    for name in _entries(root):
        dev_dir = os.path.join(root, name)
        ports_dir = os.path.join(dev_dir, "ports")
        found.append(
            {
                "name": name,
                "node_type": _read(os.path.join(dev_dir, "node_type")),
                "node_guid": _read(os.path.join(dev_dir, "node_guid")),
                "fw_ver": _read(os.path.join(dev_dir, "fw_ver")),
                "ports": [_port(os.path.join(ports_dir, n), n) for n in _entries(ports_dir) if n.isdigit()],
            }
        )
    return found
