"""NX-OS SSH emulator: a paramiko SSH server with an NX-OS-like CLI and an in-memory config tree.

It stands in for a Cisco Nexus switch in the lab and in the tests of the `nxos_roce_qos` role.
It is not a Cisco product and knows only the commands that role and the cisco.nxos plugins use.

Modules:
    config   the hierarchical running-config tree and its NX-OS rendering
    grammar  the CLI command grammar per mode (fall-through, `no` forms, validation)
    device   one switch: running/startup config, checkpoints, show commands, lock, persistence
    server   the SSH server (password auth, pty + shell) and the interactive session
"""

from .device import Device, DeviceInfo
from .server import EmulatorServer

__all__ = ["Device", "DeviceInfo", "EmulatorServer"]
