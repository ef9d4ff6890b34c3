"""What a GPU is and which NVIDIA driver branches drive it: one table, each row with its source.

Device names and chips: the PCI ID Repository as Debian 12 ships it (`pci.ids` 2023.04.10), data-center GPUs only;
later devices from the source named on their row. An architecture's first branch is the first driver of the
first CUDA toolkit that supports it, its last branch the last driver that does ("CUDA Toolkit, Driver, and
Architecture Matrix", docs.nvidia.com/datacenter/tesla/drivers: Volta's last driver R580; Hopper from CUDA 11.8,
whose minimum driver is 520.61.05; Blackwell from CUDA 12.8, minimum 570.26, per the CUDA Toolkit Release Notes'
driver table). Blackwell and Grace Hopper run only NVIDIA's open kernel modules, which exist from R515 and for
Turing and later (NVIDIA Driver Installation Guide, "Open GPU Kernel Modules"). A GPU missing here is added by
the inventory (gpu_stack_gpus), not guessed.
"""

from __future__ import annotations

import re

# chip prefix of a pci.ids name -> architecture
CHIPS = {"GV1": "volta", "TU1": "turing", "GA1": "ampere", "AD1": "ada", "GH1": "hopper", "GB1": "blackwell",
         "GB2": "blackwell"}  # fmt: skip

# architecture -> (first branch, last branch or None while NVIDIA's matrix says "Ongoing", open modules only,
# open modules possible). NVIDIA's open kernel modules start with R515 and drive Turing and later only.
ARCHITECTURES = {
    "volta": (384, 580, False, False),
    "turing": (410, None, False, True),
    "ampere": (450, None, False, True),
    "ada": (520, None, False, True),
    "hopper": (520, None, False, True),
    "blackwell": (570, None, True, True),
}
OPEN_FIRST_BRANCH = 515

# 10de:<device> -> (name, chip)
GPUS = {
    # pci.ids 2023.04.10 (Debian 12 `pci.ids`)
    "1db1": ("Tesla V100 SXM2 16GB", "GV100GL"),
    "1db4": ("Tesla V100 PCIe 16GB", "GV100GL"),
    "1db5": ("Tesla V100 SXM2 32GB", "GV100GL"),
    "1db6": ("Tesla V100 PCIe 32GB", "GV100GL"),
    "1db8": ("Tesla V100 SXM3 32GB", "GV100GL"),
    "1df6": ("Tesla V100S PCIe 32GB", "GV100GL"),
    "1eb8": ("Tesla T4", "TU104GL"),
    "20b0": ("A100 SXM4 40GB", "GA100"),
    "20b1": ("A100 PCIe 40GB", "GA100"),
    "20b2": ("A100 SXM4 80GB", "GA100"),
    "20b5": ("A100 PCIe 80GB", "GA100"),
    "20b7": ("A30 PCIe", "GA100GL"),
    "20f3": ("A800-SXM4-80GB", "GA100"),
    "20f5": ("A800 80GB PCIe", "GA100"),
    "2235": ("A40", "GA102GL"),
    "2236": ("A10", "GA102GL"),
    "2237": ("A10G", "GA102GL"),
    "2322": ("H800 PCIe", "GH100"),
    "2324": ("H800", "GH100"),
    "2330": ("H100 SXM5 80GB", "GH100"),
    "2331": ("H100 PCIe", "GH100"),
    "2339": ("H100", "GH100"),
    "26b5": ("L40", "AD102GL"),
    "27b0": ("RTX 4000 SFF Ada Generation", "AD104GL"),
    "27b8": ("L4", "AD104GL"),
    # this project's recording of an H200 (tests/fixtures/node_check/nvidia_smi_h200.xml: pci_device_id 233510DE)
    "2335": ("H200", "GH100"),
    # NVIDIA Fabric Manager User Guide, "NVIDIA HGX B200/B100 GPU Baseboard" (release 2.3, its lspci: Device 29bc)
    "29bc": ("HGX B200 GPU", "GB100"),
}


DEVICE_ID = re.compile(r"^[0-9a-f]{4}$")


def entries_problem(value: object) -> str | None:
    """What is wrong with the inventory's gpu_stack_gpus ({device id: {name, architecture}}), None when nothing."""
    if not isinstance(value, dict):
        return f"must be a mapping of NVIDIA device id to {{name, architecture}} (got {value!r})"
    for device, row in value.items():
        if not DEVICE_ID.match(str(device)):
            return f"{device!r}: a device id is 4 lower-case hex digits, as sysfs shows it (2330)"
        if not isinstance(row, dict) or row.get("architecture") not in ARCHITECTURES:
            return f"{device}: needs an architecture, one of {', '.join(ARCHITECTURES)} (got {row!r})"
    return None


def describe(device: str, extra: dict | None = None) -> dict | None:
    """{name, chip, architecture} of NVIDIA device `device` (4 hex digits), from `extra` (the inventory's
    {device: {name, architecture}}) first, then the table; None when neither knows it."""
    known = (extra or {}).get(device)
    if known:
        return {"name": str(known.get("name", device)), "chip": "", "architecture": str(known["architecture"])}
    row = GPUS.get(device)
    if not row:
        return None
    arch = next((a for prefix, a in CHIPS.items() if row[1].startswith(prefix)), None)
    return {"name": row[0], "chip": row[1], "architecture": arch} if arch else None


def branch_problem(architecture: str, branch: int, open_modules: bool) -> str:
    """Why driver branch `branch` cannot drive `architecture` ('' when it can)."""
    if architecture not in ARCHITECTURES:
        return f"architecture {architecture!r} unknown (one of {', '.join(ARCHITECTURES)})"
    first, last, open_only, open_possible = ARCHITECTURES[architecture]
    if branch < first:
        return f"{architecture} needs driver branch {first} or later (got {branch})"
    if last is not None and branch > last:
        return f"{architecture}'s last driver branch is {last} (got {branch})"
    if open_only and not open_modules:
        return f"{architecture} runs only NVIDIA's open kernel modules (gpu_stack_driver_open: true)"
    if open_modules and not open_possible:
        return f"{architecture} has no open kernel modules (gpu_stack_driver_open: false)"
    if open_modules and branch < OPEN_FIRST_BRANCH:
        return f"open kernel modules start with branch {OPEN_FIRST_BRANCH} (got {branch})"
    return ""
