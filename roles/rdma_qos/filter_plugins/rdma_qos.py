"""The QoS consistency rules (host side against the switch side), checked before any change.

One place for them: the role's assert step runs `rdma_qos_input_errors`; each message names the variable.
"""

from __future__ import annotations

import ipaddress
from typing import Any

HOST_FIELDS = {
    "roce_dscp": ("rdma_qos_roce_dscp", 0, 63),
    "cnp_dscp": ("rdma_qos_cnp_dscp", 0, 63),
    "pfc_priority": ("rdma_qos_pfc_priority", 0, 7),
    "cnp_priority": ("rdma_qos_cnp_priority", 0, 7),
    "roce_bandwidth": ("rdma_qos_roce_bandwidth_percent", 0, 100),
    "default_bandwidth": ("rdma_qos_default_bandwidth_percent", 0, 100),
    "tos_ecn": ("rdma_qos_tos_ecn", 0, 3),
    "ib_sl": ("rdma_qos_ib_sl", 0, 15),
}

# host field -> (switch field, the switch role's variable)
SWITCH_PAIRS = {
    "pfc_priority": ("nodrop_cos", "nxos_roce_qos_nodrop_cos"),
    "cnp_priority": ("cnp_qos_group", "nxos_roce_qos_cnp_qos_group"),
    "cnp_dscp": ("cnp_dscp", "nxos_roce_qos_cnp_dscp"),
    "roce_bandwidth": ("roce_bandwidth", "nxos_roce_qos_roce_bandwidth_percent"),
    "default_bandwidth": ("default_bandwidth", "nxos_roce_qos_default_bandwidth_percent"),
}


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def rdma_qos_input_errors(host: dict[str, Any], switches: list[dict[str, Any]] | None = None) -> list[str]:
    """Errors in the host QoS values and between them and each switch's values; [] when consistent."""
    errors: list[str] = []
    v: dict[str, int] = {}
    for field, (var, low, high) in HOST_FIELDS.items():
        if field not in host:
            continue
        number = _int(host[field])
        if number is None or not low <= number <= high:
            errors.append(f"{var} is {host[field]!r}: expected an integer {low}-{high}")
        else:
            v[field] = number
    if {"roce_dscp", "cnp_dscp"} <= v.keys() and v["roce_dscp"] == v["cnp_dscp"]:
        errors.append(
            f"rdma_qos_cnp_dscp equals rdma_qos_roce_dscp ({v['cnp_dscp']}): CNPs must be classified apart from "
            "the data they throttle"
        )
    if {"pfc_priority", "cnp_priority"} <= v.keys() and v["pfc_priority"] == v["cnp_priority"]:
        errors.append(
            f"rdma_qos_cnp_priority equals rdma_qos_pfc_priority ({v['pfc_priority']}): CNPs need their own "
            "strict-priority class"
        )
    for field in ("pfc_priority", "cnp_priority"):
        if v.get(field) == 0:
            errors.append(f"{HOST_FIELDS[field][0]} is 0: priority 0 is the default class of all other traffic")
    if {"roce_bandwidth", "default_bandwidth"} <= v.keys() and v["roce_bandwidth"] + v["default_bandwidth"] != 100:
        errors.append(
            f"rdma_qos_roce_bandwidth_percent + rdma_qos_default_bandwidth_percent = "
            f"{v['roce_bandwidth']} + {v['default_bandwidth']}: the ETS shares must add up to 100"
        )
    for switch in switches or []:
        name = switch.get("name", "switch")
        roce = switch.get("roce_dscp")
        if roce is not None and "roce_dscp" in v:
            listed = [_int(d) for d in (roce if isinstance(roce, list) else [roce])]
            if v["roce_dscp"] not in listed:
                errors.append(
                    f"{name}: nxos_roce_qos_roce_dscp {roce} does not classify the hosts' RoCE DSCP "
                    f"(rdma_qos_roce_dscp {v['roce_dscp']})"
                )
        for field, (sw_field, sw_var) in SWITCH_PAIRS.items():
            if sw_field in switch and field in v and _int(switch[sw_field]) != v[field]:
                errors.append(
                    f"{name}: {sw_var} is {switch[sw_field]} but the hosts use {HOST_FIELDS[field][0]} {v[field]}"
                )
    return errors


SWITCH_VARS = {
    "nxos_roce_qos_roce_dscp": "roce_dscp",
    "nxos_roce_qos_nodrop_cos": "nodrop_cos",
    "nxos_roce_qos_cnp_qos_group": "cnp_qos_group",
    "nxos_roce_qos_cnp_dscp": "cnp_dscp",
    "nxos_roce_qos_roce_bandwidth_percent": "roce_bandwidth",
    "nxos_roce_qos_default_bandwidth_percent": "default_bandwidth",
}


def rdma_qos_switch_values(hostvars: Any) -> dict[str, Any]:
    """A switch's QoS values as set in the inventory (the role's own defaults read the shared variables)."""
    out: dict[str, Any] = {"name": hostvars.get("inventory_hostname", "switch")}
    for var, field in SWITCH_VARS.items():
        if var in hostvars:
            out[field] = hostvars[var]
    return out


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
        return {
            "rdma_qos_input_errors": rdma_qos_input_errors,
            "rdma_qos_switch_values": rdma_qos_switch_values,
            "rdma_qos_fabric_networks": rdma_qos_fabric_networks,
        }
