"""The local lab: a whole RDMA training cluster on one machine.

Systemd podman containers stand in for the servers (a management NIC with NAT and an unaddressed
fabric NIC on an internal network, the stand-in for the RoCE port) and the NX-OS emulator stands in
for the switch. `python -m lab up|down|status|image|demo`.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE_ROOT = ROOT / ".lab"
