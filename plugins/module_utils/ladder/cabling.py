"""Cabling as the inventory says: the switches' RoCE ports as a map of links (switch port <-> host NIC or other
switch's port), checked once in the inventory (a NIC on two ports, an uplink its far end does not list) and
against what LLDP sees from both ends (NX-OS `show lldp neighbors detail`, lldpd's `lldpcli -f json0 show
neighbors` on the hosts). One place for the map: the inventory contract, the ladder's `cabling` rung.

A port item of nxos_roce_qos_host_interfaces / _uplink_interfaces names its far end with `peer` (inventory host
or switch) and `peer_port` (that host's NIC, that switch's port); without them, its description's first two
words (`lab-node3 rdma0`, `lab-spine1 Ethernet1/1`): the convention topology.conf already reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

PORT_LISTS = ("nxos_roce_qos_host_interfaces", "nxos_roce_qos_uplink_interfaces")
# NX-OS abbreviates its own ports in LLDP's `Local Port id` (Eth1/1) and names them in full elsewhere.
_ETH = re.compile(r"^(?:Eth|Ethernet)(\d.*)$", re.I)
_MAC = re.compile(r"^(?:[0-9a-f]{2}[:-]){5}[0-9a-f]{2}$|^(?:[0-9a-f]{4}\.){2}[0-9a-f]{4}$", re.I)


def names(nodes: list[str], switches: list[str] = (), hostname_of=lambda host: None) -> dict[str, str]:
    """alias -> inventory node or switch, as a port's description, its `peer` or LLDP may name it: a node's inventory
    name, its short form and its hostname (`hostname_of(node)`: the common role's common_hostname), a switch's
    inventory name and its short form (a switch's LLDP sends its hostname)."""
    out: dict[str, str] = {}
    for node in nodes:
        for alias in (node, node.split(".")[0], hostname_of(node)):
            if isinstance(alias, str) and alias:
                out.setdefault(alias, node)
    out.update({sw: sw for sw in switches})
    for sw in switches:
        out.setdefault(sw.split(".")[0], sw)
    return out


def port_name(name: Any) -> str:
    """`Eth1/1`, `ethernet1/1` -> `Ethernet1/1`; anything else as given."""
    text = str(name or "").strip()
    m = _ETH.match(text)
    return f"Ethernet{m.group(1)}" if m else text


def mac(text: Any) -> str | None:
    """A MAC address in any of the usual forms (`0c42.a1b2.c3d4`, `0c:42:a1:b2:c3:d4`) as 12 lower hex digits."""
    text = str(text or "").strip()
    return re.sub(r"[^0-9a-f]", "", text.lower()) if _MAC.match(text) else None


# ------------------------------------------------------------------------------------------- the inventory's map


def far_end(item: Mapping, names: Mapping[str, str]) -> tuple[str | None, str | None, str]:
    """(peer, peer_port, source) of one port item: its `peer`/`peer_port` keys ("keys"), else the first two words
    of its description when the first names an inventory host or switch ("description"); peer None otherwise."""
    if item.get("peer"):
        peer = str(item["peer"])
        return names.get(peer, peer), item.get("peer_port"), "keys"
    words = str(item.get("description") or "").split()
    peer = description_owner(item.get("description"), names)
    return peer, (words[1] if peer and len(words) > 1 else None), "description"


def description_owner(description: Any, names: Mapping[str, str]) -> str | None:
    """The inventory host or switch a port's description names: its first word (`lab-node1 rdma0`, `ubunturdma2
    ens192 RoCE`, `lab-spine1 Ethernet1/1`), looked up in `names` (alias -> inventory name); None otherwise."""
    if not isinstance(description, str) or not description.split():
        return None
    return names.get(description.split()[0])


def links(ports: Mapping[str, list], names: Mapping[str, str]) -> list[dict]:
    """Every RoCE port of every switch as a link: {"switch", "port", "peer", "peer_port", "kind" (host|switch),
    "source" (keys|description)}. ports: switch -> its port items; names: alias -> inventory host or switch (the
    switches map to themselves). A port whose far end is not named (no keys, a description naming nobody) has
    peer None."""
    out = []
    for sw in sorted(ports):
        for item in ports[sw] or []:
            if not isinstance(item, Mapping) or not item.get("name"):
                continue
            peer, peer_port, source = far_end(item, names)
            kind = "switch" if peer in ports else "host"
            out.append(
                {
                    "switch": sw,
                    "port": port_name(item["name"]),
                    "peer": peer,
                    "peer_port": (port_name(peer_port) if kind == "switch" else str(peer_port)) if peer_port else None,
                    "kind": kind,
                    "source": source,
                }
            )
    return out


def end(link: Mapping) -> str:
    """`lab-leaf1 Ethernet1/2`."""
    return f"{link['switch']} {link['port']}"


def far(link: Mapping) -> str:
    return f"{link['peer']} {link['peer_port'] or '(no port named)'}"


def map_problems(links_: list[dict], hosts: list[str]) -> Iterator[tuple[str, str, str]]:
    """(where, variable, message) of a map that cannot be true: one NIC on two switch ports, a port named by `peer`
    that is no inventory host or switch, an uplink whose far end lists another port (or none) back."""
    seen: dict[tuple, dict] = {}
    for link in links_:
        if link["peer"] is None or not link["peer_port"]:
            continue
        far_end = (link["peer"], link["peer_port"])
        if far_end in seen:
            first = seen[far_end]
            yield (
                link["switch"],
                "nxos_roce_qos_host_interfaces" if link["kind"] == "host" else "nxos_roce_qos_uplink_interfaces",
                f"{far(link)} is on {end(first)} and on {end(link)}: one cable cannot end on two ports",
            )
        else:
            seen[far_end] = link
    switches = {link["switch"] for link in links_}
    for link in links_:
        if link["source"] == "keys" and link["peer"] not in set(hosts) | switches:
            yield (link["switch"], "nxos_roce_qos_host_interfaces",
                   f"{end(link)}: peer {link['peer']!r} is no host or switch of the inventory")  # fmt: skip
    by_end = {(link["switch"], link["port"]): link for link in links_}
    for link in links_:
        if link["kind"] != "switch" or not link["peer_port"]:
            continue
        back = by_end.get((link["peer"], link["peer_port"]))
        if back is None:
            yield (link["switch"], "nxos_roce_qos_uplink_interfaces",
                   f"{end(link)} goes to {far(link)}, which {link['peer']} does not list as a RoCE port")  # fmt: skip
        elif (back["peer"], back["peer_port"]) not in ((link["switch"], link["port"]), (link["switch"], None)):
            yield (link["switch"], "nxos_roce_qos_uplink_interfaces",
                   f"{end(link)} goes to {far(link)}, whose own entry goes to {far(back)}")  # fmt: skip


# ------------------------------------------------------------------------------------------- what LLDP sees


def parse_nxos_lldp(text: str) -> dict[str, dict] | None:
    """`show lldp neighbors detail` (NX-OS): {local port (Ethernet1/1): {"system_name", "port_id",
    "port_description", "chassis_id"}}; one neighbour per port (the first). None where the switch has no LLDP
    (`% Invalid command`: `feature lldp` off)."""
    if re.search(r"^\s*% Invalid command", text or "", re.M):
        return None
    out: dict[str, dict] = {}
    for block in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("Chassis id", "Port id", "Local Port id", "Port Description", "System Name"):
                fields[key.strip()] = value.strip()
        local = fields.get("Local Port id")
        if local:
            out.setdefault(
                port_name(local),
                {
                    "system_name": fields.get("System Name") or None,
                    "port_id": fields.get("Port id") or None,
                    "port_description": fields.get("Port Description") or None,
                    "chassis_id": fields.get("Chassis id") or None,
                },
            )
    return out


def _value(node: Any) -> str | None:
    """lldpd json0's `[{"value": "x"}]` (or `[{"type": "mac", "value": "x"}]`) -> "x"."""
    if isinstance(node, list) and node and isinstance(node[0], Mapping):
        value = node[0].get("value")
        return str(value) if value is not None else None
    return None


def parse_lldpcli(text: str) -> dict[str, dict] | None:
    """`lldpcli -f json0 show neighbors` (lldpd; json0 keeps every level a list whatever the count, unlike
    `-f json`): {local interface: {"system_name", "port_id", "port_description", "chassis_id"}}. None where the
    output is not lldpd's."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("lldp"), list):
        return None
    out: dict[str, dict] = {}
    for lldp in data["lldp"]:
        for iface in (lldp or {}).get("interface") or []:
            chassis = (iface.get("chassis") or [{}])[0]
            port = (iface.get("port") or [{}])[0]
            if iface.get("name"):
                out.setdefault(
                    str(iface["name"]),
                    {
                        "system_name": _value(chassis.get("name")),
                        "port_id": _value(port.get("id")),
                        "port_description": _value(port.get("descr")),
                        "chassis_id": _value(chassis.get("id")),
                    },
                )
    return out


# ------------------------------------------------------------------------------------------- map against LLDP


def _who(seen: Mapping, names: Mapping[str, str]) -> str | None:
    """The inventory host or switch an LLDP neighbour is: its system name, full or short (a host's lldpd sends its
    FQDN, a switch its hostname)."""
    name = seen.get("system_name") or ""
    return names.get(name) or names.get(name.split(".")[0])


def _port_matches(seen: Mapping, want: str | None, macs: Mapping[str, str]) -> bool:
    """The far port LLDP names is the one the inventory names: by name (port id or description: lldpd sends the
    MAC as port id and the interface name as description by default, a switch its port name), or by MAC."""
    if not want:
        return True
    named = {port_name(seen.get("port_id")), port_name(seen.get("port_description"))}
    if want in named:  # links() names switch ports in full already
        return True
    want_mac = mac(macs.get(want))
    return bool(want_mac) and want_mac == mac(seen.get("port_id"))


def _shown(seen: Mapping | None) -> str:
    if not seen:
        return "no LLDP neighbour"
    return f"{seen.get('system_name') or '?'} {seen.get('port_description') or seen.get('port_id') or '?'}"


def compare(
    links_: list[dict],
    switch_seen: Mapping[str, dict | None],
    host_seen: Mapping[str, dict | None],
    names: Mapping[str, str],
    macs: Mapping[str, Mapping[str, str]] | None = None,
) -> list[dict]:
    """Checks {"where", "status" (pass|fail|skip), "detail"} of every link of the map against LLDP from both ends:
    switch_seen: switch -> parse_nxos_lldp's result (None: LLDP off there; absent: not read); host_seen: host ->
    parse_lldpcli's (None: lldpd not there). A link LLDP contradicts fails naming both ends as the map has them
    and as LLDP sees them; a port with no neighbour fails from the switch side (the cable, the port, or the far
    end's LLDP agent); a host NIC without a neighbour is skipped (a host agent may be off or just started: the
    switch side is the proof). macs: host -> {interface: MAC}, for lldpd's MAC port ids."""
    macs = macs or {}
    checks = []
    for link in links_:
        if link["peer"] is None:
            checks.append({"where": end(link), "status": "skip", "detail": "the inventory names no far end"})
            continue
        seen_map = switch_seen.get(link["switch"])
        if link["switch"] not in switch_seen:
            status, detail = "skip", f"{link['switch']} not read"
        elif seen_map is None:
            status, detail = "skip", f"LLDP off on {link['switch']} (feature lldp)"
        else:
            seen = seen_map.get(link["port"])
            peer_macs = macs.get(link["peer"]) or {}
            if not seen:
                status, detail = "fail", f"{end(link)}: no LLDP neighbour; the inventory has {far(link)} there"
            elif _who(seen, names) == link["peer"] and _port_matches(seen, link["peer_port"], peer_macs):
                status, detail = "pass", f"{end(link)} <-> {far(link)}"
            else:
                status = "fail"
                detail = f"{end(link)}: LLDP sees {_shown(seen)}; the inventory has {far(link)} there"
        checks.append({"where": end(link), "status": status, "detail": detail})
        if link["kind"] != "host" or not link["peer_port"]:
            continue
        from_host = host_seen.get(link["peer"])
        where = far(link)
        if link["peer"] not in host_seen:
            continue
        if from_host is None:
            checks.append({"where": where, "status": "skip", "detail": f"no lldpd on {link['peer']}"})
            continue
        seen = from_host.get(link["peer_port"])
        if not seen:
            checks.append({"where": where, "status": "skip", "detail": f"{where}: lldpd sees no neighbour yet"})
        elif _who(seen, names) == link["switch"] and _port_matches(seen, link["port"], {}):
            checks.append({"where": where, "status": "pass", "detail": f"{where} <-> {end(link)}"})
        else:
            detail = f"{where}: LLDP sees {_shown(seen)}; the inventory has {end(link)} there"
            checks.append({"where": where, "status": "fail", "detail": detail})
    return checks


def strangers(links_: list[dict], switch_seen: Mapping[str, dict | None]) -> list[str]:
    """Neighbours LLDP sees on a switch port the map does not have (a server cabled where the inventory has no
    RoCE port): reported, not judged."""
    mapped = {(link["switch"], link["port"]) for link in links_}
    return [
        f"{sw} {port}: LLDP sees {_shown(seen)}, a port the inventory does not list"
        for sw, ports in sorted(switch_seen.items())
        for port, seen in sorted((ports or {}).items())
        if (sw, port) not in mapped
    ]
