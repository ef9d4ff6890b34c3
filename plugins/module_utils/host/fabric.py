"""The design's fabric address (docs/design.md): the first address of a host's first fabric interface. One rule
for /etc/hosts, netplan's post-check, the inventory contract, the ladder and the launch's rendezvous."""

from __future__ import annotations

from typing import Any


def fabric_cidr(interfaces: Any) -> str | None:
    """The first address (CIDR, as written) of the first fabric interface; None when there is none."""
    if not isinstance(interfaces, list) or not interfaces or not isinstance(interfaces[0], dict):
        return None
    addresses = interfaces[0].get("addresses")
    return str(addresses[0]) if isinstance(addresses, list) and addresses else None


def fabric_address(interfaces: Any) -> str:
    """The fabric address without its prefix length ("10.77.250.11"); "" when there is none."""
    cidr = fabric_cidr(interfaces)
    return cidr.split("/", 1)[0] if cidr else ""


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"fabric_address": fabric_address}
