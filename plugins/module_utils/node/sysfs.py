"""The node read from sysfs and /proc under `root` (a fake tree in tests): fabric NICs, RDMA devices and their port
counters, kernel modules, the NVIDIA driver's GPUs, GPU peer memory, the boot time.

The one reader of the RDMA devices: rdma_stack records them with it (module rdma_sysfs_devices) and the node checks
(rdma-node-check, the ladder's node health) read them with it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def driver_link(path: Path) -> str | None:
    """The driver a sysfs device is bound to (the name its `driver` link points at), None when unbound."""
    return os.path.basename(os.readlink(path)) if path.is_symlink() else None


def read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # veth: reading `speed` fails with EINVAL; absent files read as None
        return None


def nic(root: Path, ifname: str) -> dict:
    base = root / "sys/class/net" / ifname
    if not base.exists():
        return {"name": ifname, "exists": False}
    device = base / "device"
    speed = read(base / "speed")
    driver = driver_link(device / "driver")
    uevent = read(base / "uevent") or ""
    kind = next((line.split("=", 1)[1] for line in uevent.splitlines() if line.startswith("DEVTYPE=")), None)
    if kind is None and not device.exists():
        kind = "virtual"
    return {
        "name": ifname,
        "exists": True,
        "address": read(base / "address"),
        "operstate": read(base / "operstate"),
        "carrier": int(read(base / "carrier") or 0),
        "mtu": int(read(base / "mtu") or 0),
        "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() else None,
        "virtual": not device.exists(),
        "kind": kind,
        "driver": driver,
        "sriov_vf": (device / "physfn").exists(),
    }


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _entries(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path), key=lambda n: (len(n), n))
    except OSError:
        return []


def _port(port_dir: Path, number: str) -> dict:
    gids = []
    for index in _entries(port_dir / "gids"):
        gid = read(port_dir / "gids" / index)
        if not gid or gid == ZERO_GID:
            continue
        gids.append(
            {
                "index": int(index),
                "gid": gid,
                "type": read(port_dir / "gid_attrs" / "types" / index),
                "netdev": read(port_dir / "gid_attrs" / "ndevs" / index),
            }
        )
    return {
        "port": int(number),
        "state": read(port_dir / "state"),
        "phys_state": read(port_dir / "phys_state"),
        "link_layer": read(port_dir / "link_layer"),
        "rate": read(port_dir / "rate"),
        "lid": read(port_dir / "lid"),
        "sm_lid": read(port_dir / "sm_lid"),
        "gids": gids,
    }


def rdma_devices(root: str | Path = "/sys/class/infiniband") -> list[dict]:
    """The one reader of the RDMA devices in sysfs (rdma_stack records them with it, through the module
    rdma_sysfs_devices): one entry per device under `root` with its node type, GUID, firmware and ports (state, rate,
    GIDs)."""
    root = Path(root)
    found = []
    for name in _entries(root):
        dev = root / name
        found.append(
            {
                "name": name,
                "node_type": read(dev / "node_type"),
                "node_guid": read(dev / "node_guid"),
                "fw_ver": read(dev / "fw_ver"),
                "hca_type": read(dev / "hca_type"),
                "ports": [_port(dev / "ports" / n, n) for n in _entries(dev / "ports") if n.isdigit()],
            }
        )
    return found


def rdma_drivers(root: Path) -> dict:
    out = {}
    base = root / "sys/class/infiniband"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        link = dev / "device" / "driver"
        out[dev.name] = {
            "driver": driver_link(link),
            "sriov_vf": (dev / "device" / "physfn").exists(),
        }
    return out


def port_counters(root: Path) -> dict:
    """Every RDMA port's `counters/` and `hw_counters/` (sysfs; GCM check-ib-counters reads the same files):
    {"mlx5_0:1": {"counters": {name: int}, "hw_counters": {name: int}}}."""
    out = {}
    base = root / "sys/class/infiniband"
    for dev in _entries(base):
        for port in _entries(base / dev / "ports"):
            if not port.isdigit():
                continue
            entry = {}
            for group in ("counters", "hw_counters"):
                values = {}
                for name in _entries(base / dev / "ports" / port / group):
                    text = read(base / dev / "ports" / port / group / name)
                    if text is not None and re.fullmatch(r"\d+", text):
                        values[name] = int(text)
                entry[group] = values
            out[f"{dev}:{port}"] = entry
    return out


def modules(root: Path) -> list[str] | None:
    text = read(root / "proc/modules")
    if text is None:
        return None  # kernel without loadable modules
    return sorted(line.split()[0] for line in text.splitlines() if line.strip())


def gpus_proc(root: Path) -> dict:
    """GPUs the NVIDIA driver registered (/proc/driver/nvidia/gpus/<pci>): the count when nvidia-smi is absent."""
    base = root / "proc/driver/nvidia"
    listed = base / "gpus"
    pci = sorted(p.name for p in listed.iterdir()) if listed.is_dir() else []
    version = read(base / "version")
    return {"count": len(pci), "pci": pci, "driver": version.splitlines()[0] if version else None}


PEERMEM = (
    ("nvidia_peermem", "sys/module/nvidia_peermem/version"),
    ("nv_peer_mem", "sys/kernel/mm/memory_peers/nv_mem/version"),
    ("nv_peer_mem", "sys/kernel/mm/memory_peers/nv_mem_nc/version"),
)


def peermem(root: Path) -> dict:
    for name, rel in PEERMEM:
        if (root / rel).exists():
            return {"module": name, "version": read(root / rel)}
    return {"module": None, "version": None}


def boot_time(root: Path) -> float | None:
    """The kernel's boot time (`btime` of /proc/stat): events before it belong to another boot."""
    for line in (read(root / "proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None
