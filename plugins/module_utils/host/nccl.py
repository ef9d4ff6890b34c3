"""What the RDMA devices mean for NCCL and perftest, and what NCCL says it used: one home for these rules.

rdma_stack's module rdma_sysfs_devices reads the devices; this file decides, from that list, which HCA, port
and RoCE v2 GID index carries a host's fabric address (`endpoint`), the NCCL settings that follow from it
(`nccl_ib_env`), and reads NCCL's own log of the transport it chose (`parse_nccl_log`, `transport_checks`).
The launch (train_launch), the validation ladder (cluster_validate) and the run report use these, so the
ladder proves the path training takes. Imported by name by the launch's and the ladder's rules; tested in
tests/unit/plugins/module_utils/host/test_nccl.py on fake sysfs trees and recorded NCCL logs.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

# The GID rules live with the node checks (rdma-node-check runs them on the node as one stdlib file).
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import roce_gid_of, same_gid

DOCUMENTATION = """
name: rdma_stack_endpoint
short_description: The RDMA device, port and RoCE v2 GID index of a fabric address; NCCL's settings and log
description: See roles/rdma_stack/README.md (NCCL and perftest endpoint).
"""


def endpoint(devices: list[dict[str, Any]], ifname: str, ipv4: str) -> dict[str, Any]:
    """The RDMA device, port and GID index NCCL and perftest must use for the fabric interface.

    RoCE: the port whose GID of type "RoCE v2" on `ifname` is the fabric address mapped into IPv6
    (::ffff:a.b.c.d); a wrong index is the most common NCCL failure on RoCE. InfiniBand: the first ACTIVE
    port (the GID index does not matter; perftest finds the peer by LID). Returns {"devices": names, "hca",
    "port", "gid_index", "link_layer", "note"}; "hca" is None when no port qualifies, and "note" says why."""
    names = [d.get("name") for d in devices or []]
    out = {"devices": names, "hca": None, "port": None, "gid_index": None, "link_layer": None}
    want = roce_gid_of(ipv4) if ipv4 else None
    ib = None
    for dev in devices or []:
        for port in dev.get("ports") or []:
            if port.get("link_layer") == "InfiniBand":
                if ib is None and "ACTIVE" in (port.get("state") or ""):
                    ib = {"hca": dev["name"], "port": port["port"], "link_layer": "InfiniBand"}
                continue
            for gid in port.get("gids") or []:
                if (
                    want
                    and gid.get("netdev") == ifname
                    and "v2" in (gid.get("type") or "").lower()
                    and same_gid(gid.get("gid") or "", want)
                ):
                    return out | {
                        "hca": dev["name"],
                        "port": port["port"],
                        "gid_index": gid["index"],
                        "link_layer": port.get("link_layer"),
                        "note": f"RoCEv2 GID {gid['index']} of {dev['name']} port {port['port']} carries {ipv4}",
                    }
    if ib:
        return out | ib | {"note": f"InfiniBand port {ib['port']} of {ib['hca']} (ACTIVE)"}
    if names:
        return out | {
            "note": f"RDMA devices {', '.join(names)} present, none carries {ipv4} on {ifname} (RoCE v2 GID)"
            " nor has an ACTIVE InfiniBand port"
        }
    return out | {"note": "no RDMA device found"}


def first_ipv4(addresses: list[str] | None) -> str:
    """The first IPv4 address of a fabric interface's `addresses` (CIDR), "" when it has none."""
    for cidr in addresses or []:
        try:
            iface = ipaddress.ip_interface(str(cidr))
        except ValueError:
            continue
        if iface.version == 4:
            return str(iface.ip)
    return ""


def rails(devices: list[dict[str, Any]], interfaces: list[dict[str, Any]]) -> dict[str, Any]:
    """The host's endpoint and every rail NCCL should use, from its fabric interfaces (cluster_fabric_interfaces:
    `name`, `addresses`; the first is the host's fabric interface).

    Returns endpoint() of the first interface with "rails": [{"hca", "port", "gid_index", "interface"}]: on RoCE
    one per fabric interface whose RoCE v2 GID carries its IPv4 address, on InfiniBand every ACTIVE port (what
    NCCL would take itself, made explicit). An 8-GPU node with a NIC per GPU gets its eight NICs, not one. No
    rails where the first interface has no endpoint: NCCL does not use RDMA there."""
    named = [(i.get("name") or "", first_ipv4(i.get("addresses"))) for i in interfaces or []] or [("", "")]
    first = endpoint(devices, *named[0])
    out: list[dict[str, Any]] = []
    if first["link_layer"] == "InfiniBand":
        out = [
            {"hca": dev["name"], "port": port["port"], "gid_index": None, "interface": None}
            for dev in devices or []
            for port in dev.get("ports") or []
            if port.get("link_layer") == "InfiniBand" and "ACTIVE" in (port.get("state") or "")
        ]
    elif first["hca"]:
        for name, ipv4 in named:
            ep = endpoint(devices, name, ipv4)
            if ep["hca"] and ep["link_layer"] != "InfiniBand":
                out.append({"hca": ep["hca"], "port": ep["port"], "gid_index": ep["gid_index"], "interface": name})
    unique = list({(r["hca"], r["port"]): r for r in out}.values())
    if len(unique) > 1:
        first["note"] += "; rails " + ", ".join(
            f"{r['hca']}:{r['port']}" + (f" ({r['interface']})" if r["interface"] else "") for r in unique
        )
        if len({r["gid_index"] for r in unique}) > 1:
            first["note"] += ": GID indexes differ, NCCL picks each port's RoCE v2 IPv4 GID itself (NCCL 2.21 or later)"
    return first | {"rails": unique}


def qos_fact(local_facts: dict[str, Any] | None) -> dict[str, Any]:
    """rdma_qos's fact from a host's local facts (ansible_local): the one place that knows its path; {} where it is
    absent (rdma_qos has not run, or its fact is off)."""
    fact = (local_facts or {}).get("rdma_qos") or {}
    return fact if isinstance(fact, dict) else {}


def qos_env(local_facts: dict[str, Any] | None) -> dict[str, Any]:
    """NCCL's QoS settings from a host's local facts (ansible_local): rdma_qos's fact `nccl_env` (NCCL_IB_TC on
    RoCE, NCCL_IB_SL on InfiniBand, NCCL_IB_QPS_PER_CONNECTION); {} where the fact is absent."""
    return dict(qos_fact(local_facts).get("nccl_env") or {})


def nccl_env(ep: dict[str, Any] | None, qos_env: dict[str, Any] | None = None, ifname: str = "") -> dict[str, str]:
    """NCCL's settings for a host: NCCL_SOCKET_IFNAME (its bootstrap interface) and, where the endpoint has an
    HCA, NCCL_IB_HCA (device:port of every rail), NCCL_IB_GID_INDEX on RoCE and the host's QoS fact
    (ansible_local.rdma_qos.nccl_env: NCCL_IB_TC on RoCE, NCCL_IB_SL on InfiniBand, NCCL_IB_QPS_PER_CONNECTION).
    Without an HCA NCCL does not use RDMA, so a traffic class would mean nothing.

    Both names carry NCCL's `=` (exact match): NCCL matches them as prefixes otherwise, so `mlx5_1:1` would
    also select mlx5_10 and mlx5_11 on a host with twelve HCAs (an 8-GPU node with storage NICs), and `ens1`
    every ens1f* port."""
    env = {"NCCL_SOCKET_IFNAME": f"={ifname}"} if ifname else {}
    if not ep or not ep.get("hca"):
        return env
    used = ep.get("rails") or [ep]
    env["NCCL_IB_HCA"] = "=" + ",".join(f"{r['hca']}:{r['port']}" for r in used)
    # One index for every rail; where they differ NCCL finds each port's RoCE v2 IPv4 GID (its default since 2.21).
    indexes = {r.get("gid_index") for r in used}
    if len(indexes) == 1 and None not in indexes:
        env["NCCL_IB_GID_INDEX"] = str(indexes.pop())
    env.update({str(k): str(v) for k, v in (qos_env or {}).items()})
    return env


# NCCL's INFO lines (NCCL_DEBUG=INFO, subsystems INIT,NET) that say which transport it chose. Formats from NCCL's
# source (src/transport/net_ib*, src/transport/net.cc, src/graph/paths.cc); tests/fixtures/validate/nccl_*.
_VERSION = re.compile(r"NCCL version (\S+)")
_NETWORK = re.compile(r"Using network (.+?)\s*$")
_IB_DEVS = re.compile(r"NET/IB\w* ?: Using ((?:\[\d+\]\S+ ?)+)")
_IB_DEV = re.compile(r"\[\d+\](\S+)")
_NO_DEVICE = re.compile(r"NET/IB\w* ?: No device found")
# NET/Socket prints the same line for its interface (NCCL 2.28: `NET/Socket : GPU Direct RDMA Disabled for HCA 0
# 'lo'`), which is no HCA: only the RDMA transports' lines count.
_GDR_HCA = re.compile(
    r"^(?!.*NET/Socket).*GPU Direct RDMA (?:\((?P<how>[^)]+)\) )?(?P<state>enabled?|disabled) for HCA \d+ "
    r"'(?P<hca>[^']+)'",
    re.I,
)
_GDR_GPU = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for GPU \S+ / HCA \d+ \((?P<why>[^)]*)\)")
_CHANNEL = re.compile(r"via NET/(?P<net>.+?)/\d+(?:\(\d+\))?(?P<flags>(?:/[A-Za-z]+)*)\s*$")
_WARN = re.compile(r"NCCL WARN (.+?)\s*$")


def parse_nccl_log(lines: list[str] | None) -> dict[str, Any]:
    """What NCCL said about its transport: {"version", "network", "devices", "no_device",
    "gdr_hca": {hca: "enabled"|"disabled" [+ how]}, "gdr_gpu": [(state, why)], "channels", "gdr_channels",
    "socket_channels", "warnings"}. `channels` counts the network channels (`via NET/...`), not intra-node ones."""
    out = {"version": None, "network": None, "devices": [], "no_device": False, "gdr_hca": {}, "gdr_gpu": [],
           "channels": 0, "gdr_channels": 0, "socket_channels": 0, "warnings": []}  # fmt: skip
    for line in lines or []:
        if m := _VERSION.search(line):
            out["version"] = out["version"] or m.group(1)
        if m := _NETWORK.search(line):
            out["network"] = m.group(1)
        if m := _IB_DEVS.search(line):
            out["devices"] = _IB_DEV.findall(m.group(1))
        if _NO_DEVICE.search(line):
            out["no_device"] = True
        if m := _GDR_HCA.search(line):
            state = "enabled" if m.group("state").lower().startswith("enable") else "disabled"
            out["gdr_hca"][m.group("hca")] = state + (f" ({m.group('how')})" if m.group("how") else "")
        elif m := _GDR_GPU.search(line):
            out["gdr_gpu"].append((m.group("state").lower(), m.group("why")))
        if m := _CHANNEL.search(line):
            out["channels"] += 1
            out["gdr_channels"] += "/GDRDMA" in m.group("flags")
            out["socket_channels"] += m.group("net") == "Socket"
        if m := _WARN.search(line):
            out["warnings"].append(m.group(1))
    return out


def transport_checks(nccl: dict[str, Any], rdma_expected: bool, require_gdr: bool = True) -> list[tuple[str, str, str]]:
    """The transport NCCL used on one node (parse_nccl_log) against what the node has: [(check, status, detail)].

    RDMA where it is expected (`rdma_expected`: NCCL was given an HCA; a silent fall-back to TCP sockets is the
    commonest RoCE failure), and then GPUDirect RDMA; a node without it fails unless `require_gdr` is false
    (then it is only reported)."""
    on_socket = nccl["network"] == "Socket" or nccl["socket_channels"] or nccl["no_device"]
    net = nccl["network"] or "unknown"
    devices = ", ".join(nccl["devices"])
    if not rdma_expected:
        checks = [("nccl transport", "skip", f"NCCL over {net}: no RDMA device expected")]
    elif on_socket:
        why = "NET/IB found no device" if nccl["no_device"] else f"network {net}"
        warn = f"; {nccl['warnings'][0]}" if nccl["warnings"] else ""
        checks = [("nccl transport", "fail", f"NCCL fell back to TCP sockets, not RDMA ({why}){warn}")]
    elif nccl["network"] is None and not nccl["channels"]:
        checks = [("nccl transport", "skip", "NCCL's log does not show its transport")]
    else:
        checks = [("nccl transport", "pass", f"NCCL over {net}" + (f" ({devices})" if devices else ""))]
    # NCCL ran, so the node has a GPU: GPUDirect RDMA applies wherever NCCL used RDMA.
    if not rdma_expected or on_socket:
        return checks
    disabled = sorted(h for h, s in nccl["gdr_hca"].items() if s.startswith("disabled"))
    far = sorted({why for state, why in nccl["gdr_gpu"] if state == "disabled"})
    if nccl["channels"]:
        staged = nccl["channels"] - nccl["gdr_channels"]
        ok = staged == 0
        detail = (
            f"GPUDirect RDMA on all {nccl['channels']} network channel(s)"
            if ok
            else f"{staged} of {nccl['channels']} network channel(s) staged through host memory (no GDRDMA)"
        )
    elif nccl["gdr_hca"]:
        ok = not disabled
        detail = "GPUDirect RDMA " + ", ".join(f"{s} for {h}" for h, s in sorted(nccl["gdr_hca"].items()))
    else:
        return [*checks, ("gpudirect rdma", "skip", "NCCL's log does not show GPUDirect RDMA")]
    if not ok:
        causes = [f"GPU Direct RDMA disabled for HCA {h} (no peer-memory module: nvidia_peermem)" for h in disabled]
        causes += [f"GPU too far from the NIC ({why})" for why in far]
        detail = "; ".join([detail, *causes])
    return [*checks, ("gpudirect rdma", "pass" if ok else ("fail" if require_gdr else "skip"), detail)]


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "rdma_stack_endpoint": rails,
    "rdma_stack_nccl_env": nccl_env,
    "rdma_stack_qos_env": qos_env,
    "rdma_stack_qos_fact": qos_fact,
    "rdma_stack_nccl_transport": parse_nccl_log,
}
