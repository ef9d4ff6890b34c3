"""Decisions of the rdma_netplan role as pure functions (tests/unit/plugins/module_utils/host/test_netplan.py).

They read Ansible's network facts (`ansible_facts` after `setup: gather_subset: network`): per interface
`ansible_facts[<name with '-' as '_'>]` with `ipv4` {address, prefix}, `ipv4_secondaries` and `ipv6` lists,
`mtu`; and `default_ipv4.interface`.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError


def _iface_facts(facts: dict[str, Any], name: str) -> dict[str, Any]:
    value = facts.get(name.replace("-", "_"))
    return value if isinstance(value, dict) else {}


def _v4(iface: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in [iface.get("ipv4") or {}, *(iface.get("ipv4_secondaries") or [])] if isinstance(a, dict)]


def conn_ifaces(facts: dict[str, Any], ansible_host: str | None) -> list[str]:
    """Interfaces that carry the Ansible connection: the one holding the default route (the path back to
    the controller) and the one holding `ansible_host` when that is an address. Sorted, no empties."""
    found = {(facts.get("default_ipv4") or {}).get("interface") or ""}
    for name in facts.get("interfaces") or []:
        if ansible_host and any(a.get("address") == ansible_host for a in _v4(_iface_facts(facts, name))):
            found.add(name)
    return sorted(n for n in found if n)


def _host_prefix(cidr: str) -> str:
    try:
        iface = ipaddress.ip_interface(str(cidr))
    except ValueError as e:
        raise RuleError(f"rdma_netplan: {cidr!r} is not an address/prefix") from e
    return f"{iface.ip}/{iface.network.prefixlen}"


def _live_address(fact: dict[str, Any]) -> str:
    try:
        return f"{ipaddress.ip_address(str(fact.get('address')))}/{fact.get('prefix', '')}"
    except ValueError:
        return ""


def live(interfaces: list[dict[str, Any]], facts: dict[str, Any]) -> bool:
    """True when every wanted address (with its prefix) and MTU of `interfaces` (rdma_netplan_interfaces) is
    live already on the host, so a run that changes no file applies nothing."""
    for want in interfaces:
        have = _iface_facts(facts, want["name"])
        addresses = {_live_address(a) for a in _v4(have) + [a for a in have.get("ipv6") or [] if isinstance(a, dict)]}
        if any(_host_prefix(a) not in addresses for a in want.get("addresses") or []):
            return False
        mtu = want.get("mtu")
        if mtu is not None and int(have.get("mtu") or 0) != int(mtu):
            return False
    return True


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"rdma_netplan_conn_ifaces": conn_ifaces, "rdma_netplan_live": live}
