#!/usr/bin/env python3
"""Read-only facts of one node for the ladder's node-health rung: the fabric NIC, modules, GPUs. Stdlib only.

  node_probe.py --ifname rdma0 [--root /]      (root: a fake tree in tests)

Prints one JSON object. Decisions are made on the controller (cluster_validate filters).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


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
    driver = os.path.basename(os.readlink(device / "driver")) if (device / "driver").is_symlink() else None
    uevent = read(base / "uevent") or ""
    kind = next((line.split("=", 1)[1] for line in uevent.splitlines() if line.startswith("DEVTYPE=")), None)
    if kind is None and not device.exists():
        kind = "virtual"
    return {
        "name": ifname,
        "exists": True,
        "operstate": read(base / "operstate"),
        "carrier": int(read(base / "carrier") or 0),
        "mtu": int(read(base / "mtu") or 0),
        "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() else None,
        "virtual": not device.exists(),
        "kind": kind,
        "driver": driver,
        "sriov_vf": (device / "physfn").exists(),
    }


def rdma_drivers(root: Path) -> dict:
    out = {}
    base = root / "sys/class/infiniband"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        link = dev / "device" / "driver"
        out[dev.name] = {
            "driver": os.path.basename(os.readlink(link)) if link.is_symlink() else None,
            "sriov_vf": (dev / "device" / "physfn").exists(),
        }
    return out


def modules(root: Path) -> list[str] | None:
    text = read(root / "proc/modules")
    if text is None:
        return None  # kernel without loadable modules
    return sorted(line.split()[0] for line in text.splitlines() if line.strip())


def gpus(root: Path) -> dict:
    base = root / "proc/driver/nvidia"
    listed = base / "gpus"
    count = len(list(listed.iterdir())) if listed.is_dir() else 0
    version = read(base / "version")
    return {"count": count, "driver": version.splitlines()[0] if version else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ifname", required=True)
    ap.add_argument("--root", default="/")
    args = ap.parse_args()
    root = Path(args.root)
    print(
        json.dumps(
            {
                "nic": nic(root, args.ifname),
                "rdma_drivers": rdma_drivers(root),
                "modules": modules(root),
                "gpus": gpus(root),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
