"""Units and addresses: a link's line rate in Gb/s (sysfs net speed, an RDMA port's rate), RoCE v2 GIDs of an IPv4
address, the RDMA path MTU a netdev MTU needs, numbers as the tools print them."""

from __future__ import annotations

import ipaddress
import re


def roce_gid_of(ipv4: str) -> str:
    """The IPv4-mapped RoCE v2 GID a port carries for an address, in sysfs notation."""
    mapped = ipaddress.IPv6Address(f"::ffff:{ipaddress.IPv4Address(ipv4)}")
    return ":".join(f"{x:04x}" for x in (int(mapped) >> s & 0xFFFF for s in range(112, -16, -16)))


def same_gid(value: str, want: str) -> bool:
    """Two GIDs are one address, whatever their notation (sysfs writes every group, zero-padded)."""
    try:
        return ipaddress.IPv6Address(value) == ipaddress.IPv6Address(want)
    except ValueError:
        return False


def link_rate_gbps(value):
    """Line rate in Gb/s from sysfs net `speed` (Mb/s, int or str) or an RDMA port `rate` ("100 Gb/sec (4X EDR)").

    None when unknown: -1 / empty / unreadable (veth and other virtual NICs report no speed).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):  # not `int | float`: the nodes' Python may be 3.9
        return float(value) / 1000 if value > 0 else None
    text = str(value).strip()
    match = re.match(r"^([\d.]+)\s*Gb/sec", text)
    if match:
        return float(match.group(1))
    if re.fullmatch(r"-?\d+", text):
        return link_rate_gbps(int(text))
    return None


IB_MTUS = (256, 512, 1024, 2048, 4096)


def required_ib_mtu(netdev_mtu):
    """Largest RDMA path MTU that fits a netdev MTU (RoCE) — what `active_mtu` should reach."""
    fits = [m for m in IB_MTUS if m <= int(netdev_mtu)]
    return fits[-1] if fits else IB_MTUS[0]


def number(text):
    text = str(text).strip()
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    try:
        return int(text)
    except ValueError:
        return float(text)
