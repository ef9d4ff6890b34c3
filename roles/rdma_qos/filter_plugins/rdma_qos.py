"""Filters of the rdma_qos role. The QoS consistency rules live in the inventory contract (rule host_qos)."""

from __future__ import annotations

import ipaddress
from typing import Any


def rdma_qos_fabric_networks(interfaces: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The fabric's networks (interface subnets and routed destinations), split by IP version."""
    nets: dict[str, list[str]] = {"ipv4": [], "ipv6": []}
    for interface in [i for i in interfaces or [] if isinstance(i, dict)]:
        cidrs = [_network(a) for a in interface.get("addresses", []) or []]
        cidrs += [_network(r.get("to")) for r in interface.get("routes", []) or [] if isinstance(r, dict)]
        for cidr in filter(None, cidrs):
            key = "ipv4" if ipaddress.ip_network(cidr).version == 4 else "ipv6"
            if cidr not in nets[key]:
                nets[key].append(cidr)
    return nets


def _network(value: Any) -> str | None:
    """The network of an address or route; None for what the inventory contract refuses (reported there, once)."""
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except (TypeError, ValueError):
        return None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rdma_qos_fabric_networks": rdma_qos_fabric_networks}
