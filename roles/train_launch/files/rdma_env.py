#!/usr/bin/env python3
"""Find the RDMA device and RoCEv2 GID index NCCL must use for a fabric interface. Stdlib only.

The most common NCCL failure on RoCE is a wrong GID index: the right one is the GID of type "RoCE v2"
whose network device is the fabric interface and whose value is the interface's IPv4 address mapped into
IPv6 (::ffff:a.b.c.d). Prints JSON; `devices` is empty when the kernel has no RDMA devices.

  rdma_env.py --ifname ens192 --ipv4 192.168.250.201
"""

from __future__ import annotations

import argparse
import ipaddress
import json
from pathlib import Path

SYS = Path("/sys/class/infiniband")


def read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ifname", required=True)
    ap.add_argument("--ipv4", required=True)
    args = ap.parse_args()
    mapped = ipaddress.IPv6Address(f"::ffff:{args.ipv4}").exploded
    out = {
        "devices": [],
        "hca": None,
        "port": None,
        "gid_index": None,
        "link_layer": None,
        "note": "no RDMA device found",
    }
    devices = sorted(p.name for p in SYS.iterdir()) if SYS.is_dir() else []
    out["devices"] = devices
    for dev in devices:
        for port_dir in sorted((SYS / dev / "ports").glob("*")):
            layer = read(port_dir / "link_layer")
            if layer == "InfiniBand":
                # IB: NCCL takes the HCA; the GID index only matters for RoCE.
                if out["hca"] is None:
                    out.update(hca=dev, port=int(port_dir.name), link_layer=layer, note="InfiniBand port")
                continue
            for gid_file in sorted((port_dir / "gids").glob("*"), key=lambda p: int(p.name)):
                idx = gid_file.name
                if read(port_dir / "gid_attrs" / "ndevs" / idx) != args.ifname:
                    continue
                if read(port_dir / "gid_attrs" / "types" / idx) != "RoCE v2":
                    continue
                try:
                    gid = ipaddress.IPv6Address(read(gid_file)).exploded
                except ValueError:
                    continue
                if gid == mapped:
                    out.update(
                        hca=dev,
                        port=int(port_dir.name),
                        gid_index=int(idx),
                        link_layer=layer,
                        note=f"RoCEv2 GID {idx} of {dev} port {port_dir.name} carries {args.ipv4}",
                    )
                    print(json.dumps(out))
                    return 0
    if devices and out["hca"] is None:
        out["note"] = f"RDMA devices {', '.join(devices)} present, none carries {args.ipv4} on {args.ifname}"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
