"""The PCI bus as sysfs shows it with no driver loaded: each function's vendor, device and class are the config
space's own, so a bare server's GPUs, NVSwitches and NICs are known before anything is installed.

Classes (the PCI class code's upper 16 bits, as `lspci` names them): 0300 VGA compatible controller and 0302 3D
controller (a data-center GPU), 0680 Bridge (NVSwitch generations 1 to 3: NVIDIA Fabric Manager User Guide,
"GPU Baseboard Topologies"), 0200 Ethernet and 0207 InfiniBand controller. `root` is the node's `/` (tests point
it at a fake tree).
"""

from __future__ import annotations

from pathlib import Path

NVIDIA = "10de"
MELLANOX = "15b3"
GPU_CLASSES = ("0300", "0302")
NVSWITCH_CLASS = "0680"
NIC_CLASSES = ("0200", "0207")


def _hex(path: Path) -> str:
    return path.read_text().strip().lower().removeprefix("0x")


def read(root: str | Path = "/") -> list[dict]:
    """Every PCI function under <root>/sys/bus/pci/devices: address, vendor, device, class (4 hex digits each but
    the address) and the bound driver's name, or '' with none; sorted by address. No bus: an empty list."""
    top = Path(root) / "sys" / "bus" / "pci" / "devices"
    out = []
    for fn in sorted(top.iterdir()) if top.is_dir() else []:
        try:
            vendor, device, klass = (_hex(fn / name) for name in ("vendor", "device", "class"))
        except (OSError, ValueError):
            continue  # a function removed while read, or a tree without these files: not a device to plan for
        driver = fn / "driver"
        out.append(
            {
                "address": fn.name,
                "vendor": vendor,
                "device": device,
                "class": klass[:4],
                "driver": Path(driver.resolve()).name if driver.is_symlink() else "",
            }
        )
    return out


def inventory(devices: list[dict]) -> dict:
    """The devices this stack is about: NVIDIA GPUs, NVSwitches on the bus, NVIDIA (Mellanox) NICs."""
    return {
        "gpus": [d for d in devices if d["vendor"] == NVIDIA and d["class"] in GPU_CLASSES],
        "nvswitches": [d for d in devices if d["vendor"] == NVIDIA and d["class"] == NVSWITCH_CLASS],
        "nics": [d for d in devices if d["vendor"] == MELLANOX and d["class"] in NIC_CLASSES],
    }
