"""The fabric checks: every fabric interface's NIC (present, up, MTU, line rate) and its RDMA port (bound, ACTIVE,
link layer, active MTU, RoCE v2 GID of its address; on InfiniBand LID, SM LID and a master SM), the kernel modules."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_ibv_devinfo, parse_sminfo
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import (
    link_rate_gbps,
    number,
    required_ib_mtu,
    roce_gid_of,
    same_gid,
)

VIRTUAL_RDMA = {
    "vmw_pvrdma": (
        "VMware paravirtual RDMA (vmw_pvrdma): traffic goes through the hypervisor's vSwitch; expect a fraction "
        "of the physical line rate and no PFC/ECN end to end — use passthrough or SR-IOV for training"
    ),
}
VMWARE_VENDOR_ID = "0x15ad"
SRIOV_NOTE = (
    "SR-IOV virtual function: shares the physical port (and its line rate) with the other VFs on it; "
    "per-VF rate limits may apply"
)


def _nic_checks(j: Judge, ifname: str, want_mtu: int):
    """A fabric interface: present, up, its MTU, its line rate. Returns its rate in Gb/s (None: unknown), False
    when the interface does not exist."""
    nic = (j.facts.get("nic") or {}).get(ifname) or {}
    if not nic.get("exists"):
        j.add("fabric nic", "fail", f"{ifname}: fabric interface {ifname} does not exist")
        return False
    state = nic.get("operstate")
    up = state in ("up", "unknown") and nic.get("carrier", 1)
    detail = f"{ifname}: up (operstate {state}, carrier {nic.get('carrier')})"
    if not up:
        detail = f"{ifname}: link down (operstate {state}, carrier {nic.get('carrier')})"
    j.add("fabric nic", "pass" if up else "fail", detail)
    mtu = nic.get("mtu")
    ok = mtu is not None and mtu >= want_mtu
    j.add("mtu", "pass" if ok else "fail", f"{ifname}: MTU {mtu} (configured {want_mtu})", value=mtu,
          threshold=want_mtu, unit="bytes")  # fmt: skip
    # A virtual NIC (veth, bridge, tun: no device behind it) reports a nominal speed (veth says 10000 Mb/s
    # whatever the path does): that is no line rate to hold a link to.
    rate = None if nic.get("virtual") else link_rate_gbps(nic.get("speed_mbps"))
    if rate is None:
        nominal = f", its nominal {nic['speed_mbps']} Mb/s ignored" if nic.get("speed_mbps") else ""
        why = f"virtual NIC (no device behind it{nominal})" if nic.get("virtual") else "not reported"
        j.add("nic speed", "skip", f"{ifname} link speed unknown: {why}")
    else:
        j.line_rate("nic speed", ifname, ifname, rate)
    if nic.get("sriov_vf"):
        j.notes.append(f"{ifname} is an {SRIOV_NOTE}")
    return rate


def _rdma_checks(j: Judge, ifname: str, address: str, mtu: int, expected: list[str]):
    devices = j.facts.get("rdma") or []
    if not devices:
        if expected:
            j.add("rdma devices", "fail", f"expected RDMA device(s) {', '.join(expected)}; none found")
        else:
            j.add("rdma devices", "skip", "no RDMA device found")
        return
    names = [d["name"] for d in devices]
    missing = [d for d in expected if d not in names]
    if missing:
        j.add("rdma devices", "fail", f"missing {', '.join(missing)} (found {', '.join(names)})")
    devinfo_raw = j.facts.get("ibv_devinfo")
    devinfo = {d["hca_id"]: d for d in parse_ibv_devinfo((devinfo_raw or {}).get("out") or "")}
    link_layer = {"ethernet": "Ethernet", "infiniband": "InfiniBand"}[j.config["link_layer"]]
    bound = []
    for dev in devices:
        for port in dev.get("ports") or []:
            netdevs = {g.get("netdev") for g in port.get("gids") or []}
            if link_layer == "Ethernet" and ifname not in netdevs:
                continue
            bound.append((dev, port))
    if not bound and link_layer == "Ethernet":
        j.add("rdma binding", "fail", f"{ifname}: no RDMA port is bound to {ifname} (devices: {', '.join(names)})")
        return
    if not bound:
        bound = [(d, p) for d in devices for p in d.get("ports") or []]
    drivers = j.facts.get("rdma_drivers") or {}
    for dev, port in bound:
        where = f"{dev['name']} port {port['port']}"
        driver = dev.get("driver") or drivers.get(dev["name"], {}).get("driver") or ""
        if drivers.get(dev["name"], {}).get("sriov_vf"):
            j.notes.append(f"{where} is an {SRIOV_NOTE}")
        vmware = devinfo.get(dev["name"], {}).get("vendor_id") == VMWARE_VENDOR_ID
        for key, note in VIRTUAL_RDMA.items():
            if dev["name"].startswith(key) or driver == key or (vmware and key == "vmw_pvrdma"):
                j.notes.append(f"{where} is {note}")
        j.add("rdma binding", "pass", f"{where} bound to {ifname}")
        state = (port.get("state") or "").split()[-1] if port.get("state") else ""
        j.add("port state", "pass" if state == "ACTIVE" else "fail", f"{where}: state {port.get('state')}")
        j.add(
            "link layer",
            "pass" if port.get("link_layer") == link_layer else "fail",
            f"{where}: link layer {port.get('link_layer')} (configured {link_layer})",
        )
        # The port's rate, on the rail the pair tests name it by: the interface on RoCE, `hca:port` on InfiniBand.
        rail = ifname if link_layer == "Ethernet" else f"{dev['name']}:{port['port']}"
        rate = link_rate_gbps(port.get("rate"))
        j.rate(rail, rate)
        if rate is not None and (j.config["line_rate_gbps"] or j.baseline.get(rail)):
            j.line_rate("port rate", rail, where, rate)
        info = next((p for p in devinfo.get(dev["name"], {}).get("ports", []) if p["port"] == port["port"]), None)
        if info and "active_mtu" in info:
            need = required_ib_mtu(mtu)
            j.add("active mtu", "pass" if info["active_mtu"] >= need else "fail",
                  f"{where}: active_mtu {info['active_mtu']} (needs {need} for netdev MTU {mtu})",
                  value=info["active_mtu"], threshold=need, unit="bytes")  # fmt: skip
        else:
            why = "ibv_devinfo not installed" if devinfo_raw is None else "ibv_devinfo gave no active_mtu"
            j.add("active mtu", "skip", f"{where}: {why}")
        if link_layer == "Ethernet":
            _roce_gid_check(j, where, port, address)
        else:
            _ib_sm_checks(j, where, port)


def _roce_gid_check(j: Judge, where, port, address):
    if not address:
        j.add("roce v2 gid", "skip", f"{where}: no fabric address configured")
        return
    found = [g for g in port.get("gids") or [] if same_gid(g.get("gid") or "", roce_gid_of(address))]
    v2 = [g for g in found if "v2" in (g.get("type") or "").lower()]
    if v2:
        j.add("roce v2 gid", "pass", f"{where} GID index {v2[0]['index']} is RoCE v2 for {address}")
    elif found:
        j.add("roce v2 gid", "fail", f"{where} carries {address} only as {found[0].get('type')}, not RoCE v2")
    else:
        j.add("roce v2 gid", "fail", f"{where} has no GID for the fabric address {address}")


def _ib_sm_checks(j: Judge, where, port):
    """An InfiniBand port needs a LID and a subnet manager (its SM LID), and that SM must be the master."""
    lid = number(port.get("lid") or "0")
    sm_lid = number(port.get("sm_lid") or "0")
    j.add("lid", "pass" if lid else "fail", f"{where}: LID {port.get('lid')}")
    j.add("sm lid", "pass" if sm_lid else "fail", f"{where}: SM LID {port.get('sm_lid')}")
    raw = j.facts.get("sminfo")
    if raw is None:
        j.add("subnet manager", "skip", "sminfo not installed (infiniband-diags)")
        return
    text = (raw.get("out") or "") + (raw.get("err") or "")
    sm = parse_sminfo(text)
    if sm is None:
        j.add("subnet manager", "fail", f"sminfo found no subnet manager: {text.strip()[:120]}")
    else:
        j.add(
            "subnet manager",
            "pass" if sm["state_name"] == "SMINFO_MASTER" else "fail",
            f"SM at LID {sm['sm_lid']} ({sm['sm_guid']}) is {sm['state_name']}",
        )


def _module_checks(j: Judge):
    loaded = j.facts.get("modules")
    expected = j.config["modules"]
    if not expected:
        return
    if loaded is None:
        j.add("kernel modules", "skip", "kernel without loadable modules (no /proc/modules)")
        return
    missing = [m for m in expected if m not in loaded]
    if missing:
        j.add("kernel modules", "fail", f"not loaded: {', '.join(missing)}")
    else:
        j.add("kernel modules", "pass", f"loaded: {', '.join(expected)}")


def fabric_checks(j: Judge):
    """Every fabric interface: the NIC, and its RDMA port (RoCE: bound, ACTIVE, MTU, RoCE v2 GID of its address);
    on InfiniBand every port with the first interface (LID, SM LID, SM master); the modules."""
    interfaces = j.config["interfaces"]
    infiniband = j.config["link_layer"] == "infiniband"
    for n, iface in enumerate(interfaces):
        rate = _nic_checks(j, iface["name"], iface["mtu"])
        if rate is False:
            continue
        j.rate(iface["name"], rate)
        if n == 0:
            _rdma_checks(j, iface["name"], iface["address"], iface["mtu"], j.config["devices"])
        elif not infiniband and j.facts.get("rdma"):
            _rdma_checks(j, iface["name"], iface["address"], iface["mtu"], [])
    _module_checks(j)
    known = {rail: r for rail, r in j.rates.items() if r is not None}
    if len(set(known.values())) > 1 and not j.config["line_rate_gbps"]:
        j.notes.append(
            "fabric links at different line rates ("
            + ", ".join(f"{rail} {r:g} Gb/s" for rail, r in known.items())
            + "): each rail is held to its own; set the line rate to fail a link trained down"
        )
