"""What the gpu package's tests share: fake roots made from recorded buses (tests/fixtures/gpu_stack/, see its
README): lspci's lines as the guide prints them become sysfs functions with the config space's numbers, the CI
VM's own sysfs listing, and the recorded H200's `nvidia-smi -q -x` as a one-GPU VM's bus."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[5]
FIX = ROOT / "tests" / "fixtures" / "gpu_stack"
NODE_FIX = ROOT / "tests" / "fixtures" / "node_check"

# lspci's names for the numbers (pci.ids: class 03 02 "3D controller", 06 80 "Bridge", 02 07 "Infiniband
# controller"; vendor 10de NVIDIA Corporation, 15b3 Mellanox Technologies, device 15b3:1021 "MT2910 Family
# [ConnectX-7]")
CLASSES = {"3D controller": "0x030200", "VGA compatible controller": "0x030000", "Bridge": "0x068000",
           "Infiniband controller": "0x020700", "Ethernet controller": "0x020000"}  # fmt: skip
VENDORS = {"NVIDIA Corporation": "0x10de", "Mellanox Technologies": "0x15b3"}
NAMED = {"MT2910 Family [ConnectX-7]": "1021"}
LINE = re.compile(r"^(?P<addr>[0-9a-f:.]+) (?P<cls>[^:]+): (?P<vendor>NVIDIA Corporation|Mellanox Technologies) "
                  r"(?P<rest>.*?)( \(rev [0-9a-f]+\))?$")  # fmt: skip


def function(root: Path, address: str, vendor: str, device: str, klass: str, driver: str = "") -> None:
    fn = root / "sys" / "bus" / "pci" / "devices" / address
    fn.mkdir(parents=True, exist_ok=True)
    for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
        (fn / name).write_text(value + "\n")
    if driver:
        target = root / "sys" / "bus" / "pci" / "drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        (fn / "driver").symlink_to(target)


def from_lspci(root: Path, name: str, driver: str = "") -> Path:
    """A fake root whose PCI bus is the lspci recording `name` (tests/fixtures/gpu_stack/)."""
    for line in (FIX / name).read_text().splitlines():
        m = LINE.match(line)
        assert m, f"{name}: {line!r} is not an lspci line this helper reads"
        rest = m["rest"]
        device = rest.removeprefix("Device ") if rest.startswith("Device ") else NAMED[rest]
        function(root, "0000:" + m["addr"], VENDORS[m["vendor"]], "0x" + device, CLASSES[m["cls"]], driver)
    return root


def from_sysfs_listing(root: Path, name: str = "sysfs_pci_ci_vm.txt") -> Path:
    """A fake root of a recorded `address vendor device class` listing (this CI VM's own bus)."""
    for line in (FIX / name).read_text().splitlines():
        address, vendor, device, klass = line.split()
        function(root, address, vendor, device, klass)
    return root


def from_nvidia_smi(root: Path, name: str = "nvidia_smi_h200.xml") -> Path:
    """A one-GPU VM's bus: the CI VM's devices plus the GPU of a recorded `nvidia-smi -q -x` (pci_device_id
    233510DE is device 2335, vendor 10de; pci_bus_id 00000000:00:06.0), driver nvidia bound."""
    text = (NODE_FIX / name).read_text()
    dev_id = re.search(r"<pci_device_id>([0-9A-F]{4})([0-9A-F]{4})</pci_device_id>", text)
    bus_id = re.search(r"<pci_bus_id>[0-9A-F]{4}([0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.\d)</pci_bus_id>", text)
    from_sysfs_listing(root)
    function(root, bus_id[1].lower(), "0x" + dev_id[2].lower(), "0x" + dev_id[1].lower(), "0x030200", "nvidia")
    return root


def node_state(root: Path, kernel: str = "6.8.0-87-generic", status: str = "", **files: str) -> Path:
    """The node's side of the fake root: kernel release, dpkg's status file, any other file (path=content with
    `/` as `__`)."""
    (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text(kernel + "\n")
    (root / "var" / "lib" / "dpkg").mkdir(parents=True, exist_ok=True)
    (root / "var" / "lib" / "dpkg" / "status").write_text(status)
    for path, content in files.items():
        target = root / path.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return root


def stanza(package: str, version: str, want: str = "install", arch: str = "amd64") -> str:
    """One package in dpkg's status format, the fields as this Debian 12 VM's /var/lib/dpkg/status has them."""
    fields = {"Package": package, "Status": f"{want} ok installed", "Priority": "optional", "Section": "misc",
              "Installed-Size": "100", "Maintainer": "Ubuntu Developers <ubuntu-devel-discuss@lists.ubuntu.com>",
              "Architecture": arch, "Version": version, "Description": f"{package}\n more"}  # fmt: skip
    return "".join(f"{key}: {value}\n" for key, value in fields.items()) + "\n"
