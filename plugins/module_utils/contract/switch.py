"""The inventory contract's switch rules: every value rendered into the switch config (the switch role's own rules,
run here for every switch), the hosts' MTU on every switch port, the switch's credentials.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.fabric import (
    MTU_RANGES,
    host_interfaces,
    host_link_layer,
    iface_label,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    NODES,
    SWITCHES,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.qos import (
    QOS_PREFIXES,
    class_clashes,
    shares_off,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import integer
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

# The variables the switch role renders into the device config (its validator's input), as it lists them.
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import RENDERED as NXOS_RENDERED
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import nxos_roce_qos_validate


def _inherited_clash(inv: Inventory, sw: str, var: str) -> bool:
    """The switch's `var` only repeats a cluster_* mistake: every switch value of its kind (DSCPs, queues, shares)
    equals its cluster_* counterpart and rule qos_classes or qos_shares already reports the cluster_* values."""
    switch_kinds, cluster_kinds = QOS_PREFIXES["nxos_roce_qos_"][1], QOS_PREFIXES["cluster_"][1]
    kind = next((k for k, names in switch_kinds.items() if var in names), None)
    if kind is None:
        return False
    for mine, shared in zip(switch_kinds[kind], cluster_kinds[kind], strict=True):
        value, default = inv.get(sw, mine), inv.get(sw, shared)
        if value is None or default is None or _as_set(value) != _as_set(default):
            return False
    flagged = {name for finding in (class_clashes, shares_off) for name, _, _ in finding(inv, sw, "cluster_").values()}
    return bool(flagged & set(cluster_kinds[kind]))


def _as_set(value: Any) -> frozenset:
    items = value if isinstance(value, list) else [value]
    return frozenset(v if as_int(v) is None else as_int(v) for v in items)


def switch_values(inv: Inventory) -> Iterator[Problem]:
    """Every value rendered into the switch config: ranges, consistency, NX-OS names, no CLI injection. A value
    that only repeats a cluster_* mistake is reported once, under the cluster_* name (as the hosts' are)."""
    for sw in inv.members(SWITCHES):
        if "variables" in inv.unreadable.get(sw, {}):
            continue
        values = {n: inv.get(sw, n) for n in NXOS_RENDERED if inv.get(sw, n) is not None}
        for p in nxos_roce_qos_validate(values):
            if _inherited_clash(inv, sw, p["var"]):
                continue
            msg = p["msg"].removeprefix(f"{p['var']}: ").removeprefix(p["var"]).lstrip()
            yield Problem(sw, p["var"], msg)


def switch_ports(inv: Inventory, sw: str) -> list[dict]:
    ports = inv.get(sw, "nxos_roce_qos_interfaces")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def host_mtu_fits_switch(inv: Inventory) -> Iterator[Problem]:
    """On a RoCE fabric every switch port and the no-drop class must carry the hosts' largest frame."""
    biggest: tuple[int, str] | None = None
    for host in inv.members(NODES):
        if host_link_layer(inv, host) != "ethernet":
            return
        for iface in host_interfaces(inv, host):
            m = as_int(iface.get("mtu"))
            if m is None or integer(*MTU_RANGES[("ethernet", "datagram")])(m):
                continue  # unset (kernel default) or reported as out of range
            if biggest is None or m > biggest[0]:
                biggest = (m, f"{host} {iface_label(iface, 0)}")
    if biggest is None:
        return
    for sw in inv.members(SWITCHES):
        class_mtu = as_int(inv.get(sw, "nxos_roce_qos_mtu"))
        if class_mtu is not None and integer(1500, 9216, even=True)(class_mtu):
            class_mtu = None  # the switch's own rules report it
        if class_mtu is not None and class_mtu < biggest[0]:
            yield Problem(
                sw,
                "nxos_roce_qos_mtu",
                f"{class_mtu} is below the hosts' fabric MTU {biggest[0]} ({biggest[1]}): no-drop frames would be "
                "discarded",
            )
        for p in switch_ports(inv, sw):
            m = as_int(p.get("mtu", class_mtu))
            if m is not None and not integer(576, 9216, even=True)(m) and m < biggest[0]:
                yield Problem(
                    sw,
                    f"nxos_roce_qos_interfaces[{p.get('name')}].mtu",
                    f"{m} is below the hosts' fabric MTU {biggest[0]} ({biggest[1]}): frames would be dropped",
                )


def switch_credentials(inv: Inventory) -> Iterator[Problem]:
    for sw in inv.members(SWITCHES):
        if set(inv.unreadable.get(sw, {})) & {"variables", "ansible_user", "ansible_password"}:
            continue  # reported as unreadable (a vault without its password)
        if not inv.get(sw, "ansible_user"):
            yield Problem(
                sw, "ansible_user", "must be set for the switch (the example inventory takes it from vault.yml)"
            )
        if not (
            inv.get(sw, "ansible_password")
            or inv.get(sw, "ansible_ssh_pass")
            or inv.get(sw, "ansible_ssh_private_key_file")
        ):
            yield Problem(
                sw,
                "ansible_password",
                "(or ansible_ssh_private_key_file) must be set for the switch (the example inventory takes it from "
                "vault.yml)",
            )
