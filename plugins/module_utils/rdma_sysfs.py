"""The host's RDMA devices as sysfs shows them (read-only): devices, ports, states, link layers, rates, GIDs.

The one sysfs reader: rdma_stack records the devices with it (module rdma_sysfs_devices) and the node checks
(rdma-node-check, the ladder's node health) read them with it. It lives in node_check.py, which a node also runs
as a standalone script; this name stays for the module that records the devices.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node_check import ZERO_GID, rdma_devices

__all__ = ["ZERO_GID", "devices"]


def devices(root: str = "/sys/class/infiniband") -> list[dict]:
    """One entry per device under `root`: name, node type and GUID, firmware, ports (state, rate, GIDs ...)."""
    return rdma_devices(root)
