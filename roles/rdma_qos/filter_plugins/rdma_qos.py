"""Filters of the rdma_qos role. The QoS consistency rules live in the inventory contract (rule host_qos)."""

from __future__ import annotations

import ipaddress
from typing import Any


def rdma_qos_fabric_networks(interfaces: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The fabric's networks (interface subnets and routed destinations), split by IP version."""
    nets: dict[str, list[str]] = {"ipv4": [], "ipv6": []}
    for interface in interfaces or []:
        cidrs = [str(ipaddress.ip_interface(a).network) for a in interface.get("addresses", [])]
        cidrs += [str(ipaddress.ip_network(r["to"], strict=False)) for r in interface.get("routes", []) or []]
        for cidr in cidrs:
            key = "ipv4" if ipaddress.ip_network(cidr).version == 4 else "ipv6"
            if cidr not in nets[key]:
                nets[key].append(cidr)
    return nets


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rdma_qos_fabric_networks": rdma_qos_fabric_networks}
