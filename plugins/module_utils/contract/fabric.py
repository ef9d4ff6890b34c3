"""The inventory contract's fabric rules: each node's interfaces (names, addresses, MTU by link layer and address
family, routes, resolvers), addresses, hostnames and ranks unique across nodes, the fabric off the management
network, every peer and every rail reachable, the same rails on every node, netplan's revert timer, one link layer.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    ALL,
    NODES,
    SUBNET_MANAGERS,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import DOMAIN_RE, IFNAME_RE, integer
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.fabric import fabric_cidr
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

# Fabric MTU per link layer (and IPoIB mode): the one place these ranges live.
# IPv4 needs 576; Nexus ports carry up to 9216; IPoIB datagram mode is the IB MTU (4096) less the
# 4-byte IPoIB header; connected mode goes up to 65520.
MTU_RANGES: dict[tuple[str, str], tuple[int, int]] = {
    ("ethernet", "datagram"): (576, 9216),
    ("infiniband", "datagram"): (576, 4092),
    ("infiniband", "connected"): (576, 65520),
}
IPV6_MTU_MIN = 1280
INTERFACE_KEYS = ("name", "addresses", "mtu", "routes", "nameservers", "ipoib_mode")
ROUTE_KEYS = ("to", "via", "metric")
NAMESERVER_KEYS = ("addresses", "search")


def iface_label(iface: Any, i: int) -> str:
    name = iface.get("name") if isinstance(iface, dict) else None
    return f"cluster_fabric_interfaces[{name if isinstance(name, str) and name else i}]"


def host_interfaces(inv: Inventory, host: str) -> list[dict]:
    ifaces = inv.get(host, "cluster_fabric_interfaces")
    return [i for i in ifaces if isinstance(i, dict)] if isinstance(ifaces, list) else []


def host_link_layer(inv: Inventory, host: str) -> str:
    # rdma_stack_link_layer carries the effective value (cluster_link_layer or the role's default).
    layer = inv.get(host, "rdma_stack_link_layer", inv.get(host, "cluster_link_layer"))
    return layer if layer in ("ethernet", "infiniband") else "ethernet"


def as_interface(s: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    """A host address with an explicit prefix length (netaddr and netplan read a bare address as /32)."""
    if not isinstance(s, str) or not re.fullmatch(r"[0-9A-Fa-f:.]+/[0-9]{1,3}", s):
        return None
    try:
        iface = ipaddress.ip_interface(s)
    except ValueError:
        return None
    net = iface.network
    if net.num_addresses > 2 and iface.ip in (net.network_address, net.broadcast_address) and iface.version == 4:
        return None
    return iface


def as_address(s: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(s) if isinstance(s, str) else None
    except ValueError:
        return None


def as_network(s: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not isinstance(s, str) or "/" not in s:
        return None
    try:
        return ipaddress.ip_network(s, strict=True)
    except ValueError:
        return None


def fabric_interfaces(inv: Inventory) -> Iterator[Problem]:
    """Shape, names, addresses, MTU (by link layer and address family), routes and resolvers."""
    for host in inv.members(NODES):
        ifaces = inv.get(host, "cluster_fabric_interfaces")
        if not isinstance(ifaces, list):
            continue
        layer = host_link_layer(inv, host)
        names = Counter(i.get("name") for i in ifaces if isinstance(i, dict))
        for i, iface in enumerate(ifaces):
            if not isinstance(iface, dict):
                continue
            label = iface_label(iface, i)
            unknown = sorted(set(iface) - set(INTERFACE_KEYS))
            if unknown:
                yield Problem(
                    host, label, f"has unknown key(s) {', '.join(unknown)} (known: {', '.join(INTERFACE_KEYS)})"
                )
            name = iface.get("name")
            if not isinstance(name, str) or not re.fullmatch(IFNAME_RE, name):
                yield Problem(
                    host, f"{label}.name", f"must be a Linux interface name (at most 15 of A-Za-z0-9_.-), got {name!r}"
                )
            elif names[name] > 1:
                yield Problem(host, f"{label}.name", "is listed twice")
            addrs = iface.get("addresses")
            parsed = []
            if not isinstance(addrs, list) or not addrs:
                yield Problem(
                    host, f"{label}.addresses", "must list at least one address in CIDR form (192.168.250.201/24)"
                )
            else:
                for a in addrs:
                    ip = as_interface(a)
                    if ip is None:
                        yield Problem(
                            host,
                            f"{label}.addresses",
                            f"has {a!r}, which is not a host address with a prefix length such as 192.168.250.201/24",
                        )
                    else:
                        parsed.append(ip)
            yield from _mtu(host, label, iface, layer, parsed)
            yield from _routes(host, label, iface, parsed)
            yield from _nameservers(host, label, iface)


def _mtu(host: str, label: str, iface: dict, layer: str, addrs: list) -> Iterator[Problem]:
    mode = iface.get("ipoib_mode", "datagram")
    if "ipoib_mode" in iface and (layer != "infiniband" or mode not in ("datagram", "connected")):
        yield Problem(
            host,
            f"{label}.ipoib_mode",
            f"must be datagram or connected, and only on an infiniband fabric (got {mode!r} on {layer})",
        )
        return
    if iface.get("mtu") is None:
        return
    lo, hi = MTU_RANGES[(layer, mode)]
    if any(a.version == 6 for a in addrs):
        lo = max(lo, IPV6_MTU_MIN)
    if integer(lo, hi)(iface["mtu"]):
        where = (
            layer + (f", IPoIB {mode} mode" if layer == "infiniband" else "") + (", IPv6" if lo == IPV6_MTU_MIN else "")
        )
        yield Problem(host, f"{label}.mtu", f"{iface['mtu']!r} must lie within {lo}-{hi} ({where})")


def _routes(host: str, label: str, iface: dict, addrs: list) -> Iterator[Problem]:
    routes = iface.get("routes")
    if routes is None:
        return
    if not isinstance(routes, list):
        yield Problem(host, f"{label}.routes", f"must be a list of routes (got {routes!r})")
        return
    for r in routes:
        if not isinstance(r, dict):
            yield Problem(host, f"{label}.routes", f"has {r!r}, which is not a route (to, via, metric)")
            continue
        to, via = r.get("to"), r.get("via")
        where = f"{label}.routes"
        prefix = f"has route to {to!r} via {via!r}:"
        unknown = sorted(set(r) - set(ROUTE_KEYS))
        if unknown:
            yield Problem(host, where, f"{prefix} unknown key(s) {', '.join(unknown)} (known: {', '.join(ROUTE_KEYS)})")
        if to in ("default", "0.0.0.0/0", "::/0"):
            yield Problem(
                host,
                where,
                f"{prefix} a default route over the fabric would take the management path; list the remote fabric "
                "networks instead",
            )
            continue
        net, gw = as_network(to), as_address(via)
        if net is None:
            yield Problem(host, where, f"{prefix} 'to' must be a network in CIDR form (192.168.251.0/24)")
        if gw is None:
            yield Problem(host, where, f"{prefix} 'via' must be an address")
        elif net is not None and net.version != gw.version:
            yield Problem(host, where, f"{prefix} 'to' and 'via' are of different address families")
        elif addrs and not any(a.version == gw.version and gw in a.network and gw != a.ip for a in addrs):
            yield Problem(
                host,
                where,
                f"{prefix} 'via' must be an address inside one of {', '.join(map(str, addrs))} (not the host's own)",
            )
        if r.get("metric") is not None and integer(0)(r["metric"]):
            yield Problem(host, where, f"{prefix} 'metric' must be a non-negative integer")


def _nameservers(host: str, label: str, iface: dict) -> Iterator[Problem]:
    ns = iface.get("nameservers")
    if ns is None:
        return
    if not isinstance(ns, dict):
        yield Problem(host, f"{label}.nameservers", f"must be a mapping with addresses and search (got {ns!r})")
        return
    unknown = sorted(set(ns) - set(NAMESERVER_KEYS))
    if unknown:
        yield Problem(
            host, f"{label}.nameservers", f"has unknown key(s) {', '.join(unknown)} (known: addresses, search)"
        )
    for a in ns.get("addresses") or []:
        if as_address(a) is None:
            yield Problem(host, f"{label}.nameservers.addresses", f"has {a!r}, which is not an IP address")
    for d in ns.get("search") or []:
        if not isinstance(d, str) or not re.fullmatch(DOMAIN_RE, d):
            yield Problem(host, f"{label}.nameservers.search", f"has {d!r}, which is not a domain name")


def fabric_address(inv: Inventory, host: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    """The design's fabric address (module_utils/host/fabric.py), as an interface (address and prefix)."""
    cidr = fabric_cidr(host_interfaces(inv, host))
    return as_interface(cidr) if cidr is not None else None


def fabric_address_family(inv: Inventory) -> Iterator[Problem]:
    # netplan renders IPv6 addresses and routes, but the rendezvous endpoint, /etc/hosts and the RoCE
    # GID choice use the fabric address as IPv4: an IPv6 address is accepted after it, not as it.
    for host in inv.members(NODES):
        fa = fabric_address(inv, host)
        if fa is not None and fa.version == 6:
            label = iface_label(host_interfaces(inv, host)[0], 0)
            yield Problem(
                host,
                f"{label}.addresses",
                f"starts with {fa}: the fabric address (first address of the first interface) must be IPv4; IPv6 "
                "addresses may follow it",
            )


def unique_across_nodes(inv: Inventory) -> Iterator[Problem]:
    owners: dict[str, list[str]] = defaultdict(list)
    for host in inv.members(NODES):
        for iface in host_interfaces(inv, host):
            for a in iface.get("addresses") or []:
                ip = as_interface(a)
                if ip is not None:
                    owners[str(ip.ip)].append(host)
    for addr, hosts in owners.items():
        if len(hosts) > 1:
            for host in sorted(set(hosts)):
                yield Problem(
                    host,
                    "cluster_fabric_interfaces",
                    f"has fabric address {addr}, also on {', '.join(sorted(set(hosts) - {host})) or 'this host twice'}",
                )
    # A node added from a copy of another's host_vars: two inventory names on one machine (Ansible would converge it
    # twice, Slurm would count it twice).
    logins: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host in inv.members(NODES):
        logins[(str(inv.get(host, "ansible_host", host)), str(inv.get(host, "ansible_port", 22)))].append(host)
    for (addr, port), hosts in logins.items():
        for host in hosts if len(hosts) > 1 else []:
            yield Problem(
                host,
                "ansible_host",
                f"{addr} (port {port}) is also the management address of {', '.join(h for h in hosts if h != host)}: "
                "each node is one machine",
            )
    names: dict[str, list[str]] = defaultdict(list)
    for host in inv.members(NODES):
        names[str(inv.get(host, "common_hostname", host.split(".")[0]))].append(host)
    for name, hosts in names.items():
        for host in hosts if len(hosts) > 1 else []:
            yield Problem(
                host, "common_hostname", f"{name!r} is also the hostname of {', '.join(h for h in hosts if h != host)}"
            )


def node_ranks(inv: Inventory) -> Iterator[Problem]:
    nodes = inv.members(NODES)
    ranks = {h: as_int(inv.get(h, "cluster_node_rank")) for h in nodes if inv.get(h, "cluster_node_rank") is not None}
    count = Counter(r for r in ranks.values() if r is not None)
    for host, r in ranks.items():
        if r is None:
            continue  # the type row reports it
        if not 0 <= r < len(nodes):
            yield Problem(
                host, "cluster_node_rank", f"{r} must lie within 0-{len(nodes) - 1} ({len(nodes)} nodes in {NODES})"
            )
        elif count[r] > 1:
            others = ", ".join(h for h, o in ranks.items() if o == r and h != host)
            yield Problem(host, "cluster_node_rank", f"{r} is also the rank of {others}")


def fabric_off_management(inv: Inventory) -> Iterator[Problem]:
    """A fabric subnet holding a management address (ansible_host) would pull the controller's path onto it."""
    mgmt = {h: as_address(inv.get(h, "ansible_host")) for h in inv.members(ALL)}
    for host in inv.members(NODES):
        for iface in host_interfaces(inv, host):
            for a in iface.get("addresses") or []:
                ip = as_interface(a)
                if ip is None:
                    continue
                inside = sorted(
                    h for h, m in mgmt.items() if m is not None and m.version == ip.version and m in ip.network
                )
                if inside:
                    yield Problem(
                        host,
                        f"{iface_label(iface, 0)}.addresses",
                        f"has {a}, whose subnet holds the management address (ansible_host) of {', '.join(inside)}: "
                        "the fabric must not overlap the management network",
                    )


def _reach(iface: dict) -> list:
    """The networks one fabric interface reaches: its subnets and its routes' destinations."""
    nets = [ip.network for ip in map(as_interface, iface.get("addresses") or []) if ip is not None]
    return nets + [n for n in (as_network(r.get("to")) for r in iface.get("routes") or [] if isinstance(r, dict)) if n]


def peers_reachable(inv: Inventory) -> Iterator[Problem]:
    """Each node reaches every peer's fabric address on one of its subnets or through one of its routes."""
    nodes = inv.members(NODES)
    fabric = {h: fabric_address(inv, h) for h in nodes}
    for host in nodes:
        nets = []
        addrs = [a for i in host_interfaces(inv, host) for a in (i.get("addresses") or [])]
        if not addrs or None in map(as_interface, addrs):
            continue  # its own addresses are reported already
        for iface in host_interfaces(inv, host):
            nets += _reach(iface)
        if not nets:
            continue
        for peer, fa in fabric.items():
            if peer == host or fa is None or fa.version != 4:
                continue
            if not any(n.version == fa.version and fa.ip in n for n in nets):
                yield Problem(
                    host,
                    "cluster_fabric_interfaces",
                    f"reaches no subnet or route holding {peer}'s fabric address {fa.ip}: put it on a shared subnet "
                    "or add a route",
                )


def _rail(iface: dict) -> tuple[Any, list]:
    """(first IPv4 address, the networks it reaches) of one fabric interface."""
    ips = [ip.ip for ip in map(as_interface, iface.get("addresses") or []) if ip is not None and ip.version == 4]
    return (ips[0] if ips else None), _reach(iface)


def rails_by_position(inv: Inventory) -> Iterator[Problem]:
    """Rail i (the i-th fabric interface, after the first) reaches rail i of every peer through its own subnets or
    routes: the ladder's pair tests and NCCL's rail-aligned rings meet rail i with rail i, so rails listed in
    another order on one node would be tested, and trained, across rails."""
    nodes = inv.members(NODES)
    rails = {
        h: [(iface_label(iface, i), *_rail(iface)) for i, iface in enumerate(host_interfaces(inv, h))] for h in nodes
    }
    for host in nodes:
        for i, (label, addr, nets) in enumerate(rails[host][1:], start=1):
            if addr is None or not nets:
                continue  # no IPv4 address on this rail: nothing to meet by address
            for peer in nodes:
                theirs = rails[peer][i][1] if peer != host and i < len(rails[peer]) else None
                if theirs is not None and not any(theirs in n for n in nets):
                    yield Problem(
                        host,
                        f"{label}.addresses",
                        f"(rail {i + 1}) reaches no subnet or route holding {peer}'s rail {i + 1} address {theirs}: "
                        f"rail {i + 1} of every node must share a subnet (or a route), as the pair tests and NCCL's "
                        "rail-aligned rings meet rail i with rail i",
                    )


# Why every node needs every rail (rule rails_on_every_node).
SAME_RAILS = (
    "every node needs the same rails, in the same order (NCCL's rail-aligned rings and the pair tests meet rail i "
    "with rail i)"
)


def rails_on_every_node(inv: Inventory) -> Iterator[Problem]:
    """Every node has every rail (fabric interface position): NCCL's rail-aligned rings and the ladder's pair tests
    meet rail i with rail i, so a rail one node has alone would carry no job's traffic there, or a node without it
    would be the job's odd one out. Named on the fewer side: the node with the extra rail, or the node that lacks one
    the others have (on a tie, the nodes that have it)."""
    nodes = [h for h in inv.members(NODES) if isinstance(inv.get(h, "cluster_fabric_interfaces"), list)]
    labels = {h: [iface_label(iface, i) for i, iface in enumerate(host_interfaces(inv, h))] for h in nodes}
    for i in range(1, max((len(v) for v in labels.values()), default=0)):
        have = [h for h in nodes if i < len(labels[h])]
        lack = [h for h in nodes if h not in have]
        if not lack:
            continue
        if len(have) <= len(lack):
            verb = "lacks" if len(lack) == 1 else "lack"
            for host in have:
                yield Problem(host, labels[host][i], f"is rail {i + 1}, which {', '.join(lack)} {verb}: {SAME_RAILS}")
        else:
            where = ", ".join(f"{h} {labels[h][i]}" for h in have)
            for host in lack:
                yield Problem(host, "cluster_fabric_interfaces", f"lacks rail {i + 1} ({where}): {SAME_RAILS}")


def netplan_revert_after_connect(inv: Inventory) -> Iterator[Problem]:
    """The host must not revert a good change while the controller may still be reconnecting."""
    for host in inv.members(NODES):
        after = as_int(inv.get(host, "rdma_netplan_revert_after"))
        wait = as_int(inv.get(host, "rdma_netplan_connect_timeout"))
        if after and wait and after <= wait:
            yield Problem(
                host,
                "rdma_netplan_revert_after",
                f"{after} must exceed rdma_netplan_connect_timeout ({wait}) or be 0 (off)",
            )


def link_layer(inv: Inventory) -> Iterator[Problem]:
    nodes = inv.members(NODES)
    layers = {h: host_link_layer(inv, h) for h in nodes}
    if len(set(layers.values())) > 1:
        for host in nodes:
            yield Problem(
                host, "cluster_link_layer", f"is {layers[host]}, other nodes have another: one fabric, one link layer"
            )
    if "infiniband" in layers.values() and not inv.members(SUBNET_MANAGERS):
        yield Problem("inventory", f"group {SUBNET_MANAGERS}", "is empty: an InfiniBand fabric needs a subnet manager")
