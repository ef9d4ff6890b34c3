"""Where the GPUs and fabric NICs sit on PCI (sysfs links into /sys/devices), the distance between two of them in
nvidia-smi topo -m's levels, and the ACS control of the PCIe switch ports above them (their config space)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import read

# nvidia-smi topo -m's distances, nearest first (NVML's common-ancestor levels).
PCI_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def pci_bdf(text: str) -> str:
    """nvidia-smi's `00000000:18:00.0` -> sysfs's `0000:18:00.0`."""
    text = str(text).strip().lower()
    domain, _, rest = text.partition(":")
    if rest.count(":") != 1 or not re.fullmatch(r"[0-9a-f]+", domain):
        return text
    return f"{int(domain, 16):04x}:{rest}"


def pci_place(root: Path, device: Path) -> dict | None:
    """Where a PCI device sits: the chain from its host bridge (`pci0000:17`) down to it, as sysfs links it
    (/sys/bus/pci/devices/<bdf> and /sys/class/net/<if>/device are links into /sys/devices), and its NUMA node."""
    if not device.exists():
        return None
    real = Path(os.path.realpath(device))
    try:
        parts = real.relative_to(Path(os.path.realpath(root)) / "sys/devices").parts
    except ValueError:
        return None
    if not parts or not parts[0].startswith("pci"):
        return None  # a virtual device (veth, a bridge): no PCI place
    numa = read(real / "numa_node")
    return {"path": list(parts), "numa": int(numa) if numa and numa.lstrip("-").isdigit() else None}


def pci_distance(a: dict, b: dict) -> str:
    """nvidia-smi topo -m's level between two PCI places: PIX (one PCIe switch between them: below the switch's
    ports only), PXB (more than one switch, no host bridge), PHB (through their host bridge), NODE (another host
    bridge of the same NUMA node), SYS (across NUMA nodes)."""
    pa, pb = a["path"], b["path"]
    if pa[0] != pb[0]:
        return "NODE" if a["numa"] == b["numa"] else "SYS"
    common = 0
    while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
        common += 1
    if common <= 1:
        return "PHB"
    # A switch is its upstream port and a downstream port per device below it: two links each side at most.
    return "PIX" if max(len(pa), len(pb)) - common <= 2 else "PXB"


def pci_places(root: Path, gpus: list[str], ifnames: list[str]) -> dict:
    """Each GPU's (by PCI address) and each fabric interface's PCI place (None: not a PCI device here)."""
    return {
        "gpus": {bdf: pci_place(root, root / "sys/bus/pci/devices" / bdf) for bdf in gpus},
        "nics": {n: pci_place(root, root / "sys/class/net" / n / "device") for n in ifnames},
    }


# The ACS extended capability (PCIe base spec 7.7.11) and its control register's bits, low bit first, named as
# lspci prints them (`ACSCtl: SrcValid+ TransBlk- ReqRedir+ ...`, pciutils ls-ecaps.c).
ACS_CAP_ID = 0x000D
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmplRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# The two that send peer-to-peer traffic up to the root complex.
ACS_REDIRECT = ("ReqRedir", "CmplRedir")
BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def acs_control(config: bytes) -> dict | None:
    """The ACS Control register of a PCIe function from its config space (sysfs `config`; only root reads past
    the first 256 bytes, where the extended capabilities are): {bit name: on}, None without an ACS capability or
    with the extended space unreadable."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            control = int.from_bytes(config[offset + 6 : offset + 8], "little")
            return {name: bool(control >> bit & 1) for bit, name in enumerate(ACS_BITS)}
        offset = (header >> 20) & 0xFFC
    return None


def switch_ports(place: dict | None) -> list[str]:
    """The PCIe switch ports above a device: its path less the host bridge, the root port and itself."""
    return [p for p in (place or {"path": []})["path"][2:-1] if BDF_RE.fullmatch(p)]


def pci_acs(root: Path, places: dict) -> dict:
    """{bdf: ACS control or None} of every PCIe switch port above the GPUs and fabric NICs; `readable`: whether
    the extended config space could be read at all (root, and a real PCIe device)."""
    ports = sorted({b for kind in ("gpus", "nics") for p in (places.get(kind) or {}).values() for b in switch_ports(p)})
    devices = root / "sys/bus/pci/devices"
    out = {}
    for bdf in ports:
        try:
            config = (devices / bdf / "config").read_bytes()
        except OSError:
            config = b""
        out[bdf] = {"readable": len(config) > 0x100, "control": acs_control(config)}
    return out
