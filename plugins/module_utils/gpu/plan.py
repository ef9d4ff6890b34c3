"""What the gpu_stack role installs on a node, decided from its PCI bus and the inventory's pins.

One driver version pins everything NVIDIA ships with the driver: the precompiled kernel modules for the running
kernel and for the kernel meta-package's next one, the headless user space with its persistence daemon, the
fabric manager and NSCQ (their packages require the driver's exact version: NVIDIA Fabric Manager User Guide;
Ubuntu's nvidia-fabricmanager-580 depends on nvidia-kernel-common-580-server-<its version>). Names are Ubuntu's
archive (packages.ubuntu.com: linux-modules-nvidia-<branch>-server[-open]-<flavour or kernel release>,
nvidia-headless-no-dkms-<branch>-server[-open], nvidia-utils-<branch>-server, nvidia-fabricmanager-<branch>,
libnvidia-nscq-<branch>): signed, precompiled modules need neither DKMS nor kernel headers. DCGM comes from
NVIDIA's CUDA repository (the inventory names it). Everything planned is held, with the kernel's meta-packages,
so an upgrade cannot pull a kernel the modules do not match.

Fabric manager: needed where NVSwitches are on the bus (HGX/DGX A100, H100, H200: the guide's lspci samples) or
the inventory says so (HGX B200: their NVSwitches are behind a ConnectX-7 bridge, not PCI devices). An SXM
GPU alone on the bus (a VM given one GPU) has its fabric managed by the host.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import catalog, pci
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import upstream

VERSION = re.compile(r"^(\d{3})\.\d{1,3}(\.\d{1,3})?$")
BLACKLIST = "blacklist nouveau\noptions nouveau modeset=0\n"
KERNEL_METAS = ("linux-{flavour}", "linux-image-{flavour}", "linux-headers-{flavour}")
NO_GPU = "no NVIDIA GPU on the PCI bus"
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")  # Debian Policy 5.6.1; flavours are part of package names


class PlanError(ValueError):
    """An input the role cannot plan from, said before any change to the node."""


def branch_of(version: str) -> int:
    match = VERSION.match(str(version))
    if not match:
        raise PlanError(f"gpu_stack_driver_version must look like 580.95.05 (got {version!r})")
    return int(match.group(1))


def fabric_manager(mode: str, inv: dict, gpus: list[dict]) -> tuple[bool, str]:
    """(needed, why) for the fabric manager."""
    switches = len(inv["nvswitches"])
    if mode == "true":
        return True, "gpu_stack_fabric_manager: true"
    if mode == "false":
        return False, "gpu_stack_fabric_manager: false" + (
            f" (but {switches} NVSwitches are on the bus)" if switches else ""
        )
    if mode != "auto":
        raise PlanError(f"gpu_stack_fabric_manager must be auto, true or false (got {mode!r})")
    if switches:
        return True, f"{switches} NVSwitches on the PCI bus"
    if any(g["architecture"] == "blackwell" for g in gpus):
        return False, ("no NVSwitch on the PCI bus (an HGX B200's are behind its ConnectX-7 bridge: set "
                       "gpu_stack_fabric_manager: true there)")  # fmt: skip
    return False, "no NVSwitch on the PCI bus"


def plan(devices: list[dict], settings: dict, state: dict) -> dict:
    """The node's plan. settings: driver_version, open (bool), kernel_flavour, fabric_manager (auto/true/false),
    dcgm_packages (list, [] for none), gpus ({device: {name, architecture}} the inventory adds).
    state: installed ({package: version}), held (list), kernel (release), loaded_driver ('' when not loaded),
    nouveau_loaded (bool), blacklist (the blacklist file's content or None)."""
    inv = pci.inventory(devices)
    base = {"needed": False, "gpus": [], "nvswitches": len(inv["nvswitches"]), "nics": len(inv["nics"]),
            "fabric_manager": {"needed": False, "why": ""}, "packages": [], "install": [], "hold": [],
            "undo": [], "services": [], "blacklist": None, "reboot": "", "summary": NO_GPU}  # fmt: skip
    if not inv["gpus"]:
        return base
    version = str(settings["driver_version"])
    branch = branch_of(version)
    open_modules = bool(settings.get("open", True))
    gpus, problems = [], {}  # problem -> addresses: eight GPUs of one kind are one line
    for dev in inv["gpus"]:
        known = catalog.describe(dev["device"], settings.get("gpus"))
        if known is None:
            why = (f"NVIDIA device {dev['device']} is not in the catalog: add it to gpu_stack_gpus with its "
                   "architecture")  # fmt: skip
        else:
            gpus.append({"address": dev["address"], "device": dev["device"], **known})
            why = catalog.branch_problem(known["architecture"], branch, open_modules)
            why = why and f"{known['name']}: {why}"
        if why:
            problems.setdefault(why, []).append(dev["address"])
    if problems:
        raise PlanError("; ".join(f"{at[0]}{f' and {len(at) - 1} more' if len(at) > 1 else ''}: {why}"
                                  for why, at in problems.items()))  # fmt: skip
    fm_needed, fm_why = fabric_manager(str(settings.get("fabric_manager", "auto")).lower(), inv, gpus)
    flavour = str(settings.get("kernel_flavour", "generic"))
    dcgm = [str(p) for p in settings.get("dcgm_packages") or []]
    for what, name in [("gpu_stack_kernel_flavour", flavour), *(("gpu_stack_dcgm_packages", p) for p in dcgm)]:
        if not PACKAGE_NAME.match(name):
            raise PlanError(f"{what}: {name!r} cannot be part of a Debian package name")
    kernel = str(state.get("kernel", ""))
    if not kernel:
        raise PlanError("the running kernel's release is unknown (/proc/sys/kernel/osrelease)")
    server = f"{branch}-server" + ("-open" if open_modules else "")
    pinned = f"{version}-*"
    packages = [
        {"name": f"linux-modules-nvidia-{server}-{kernel}", "version": ""},
        {"name": f"linux-modules-nvidia-{server}-{flavour}", "version": ""},
        {"name": f"nvidia-headless-no-dkms-{server}", "version": pinned},
        {"name": f"nvidia-utils-{branch}-server", "version": pinned},
    ]
    services = ["nvidia-persistenced"]
    if fm_needed:
        packages += [{"name": f"nvidia-fabricmanager-{branch}", "version": pinned},
                     {"name": f"libnvidia-nscq-{branch}", "version": pinned}]  # fmt: skip
        services.append("nvidia-fabricmanager")
    packages += [{"name": p, "version": ""} for p in dcgm]
    if dcgm:
        services.append("nvidia-dcgm")
    installed = state.get("installed") or {}
    install = [
        p["name"] + (f"={p['version']}" if p["version"] else "")
        for p in packages
        if p["name"] not in installed or (p["version"] and upstream(installed[p["name"]]) != version)
    ]
    # The kernel's meta-packages the node has: held, the next kernel cannot come without its modules.
    metas = [m.format(flavour=flavour) for m in KERNEL_METAS]
    holds = [p["name"] for p in packages] + [m for m in metas if m in installed]
    held = set(state.get("held") or [])
    loaded = str(state.get("loaded_driver") or "")
    reboot = ""
    if loaded and loaded != version:
        reboot = f"the loaded driver is {loaded}, the planned {version}: it loads at the next boot"
    elif state.get("nouveau_loaded"):
        reboot = "nouveau is loaded: the NVIDIA driver loads once it is blacklisted and the node rebooted"
    names = ", ".join(sorted({g["name"] for g in gpus}))
    summary = (f"{len(gpus)} x {names}, {len(inv['nvswitches'])} NVSwitches: driver {version} "
               f"({'open' if open_modules else 'proprietary'} modules), fabric manager "
               f"{'yes' if fm_needed else 'no'} ({fm_why}), DCGM {'yes' if dcgm else 'no'}")  # fmt: skip
    hold = [h for h in dict.fromkeys(holds) if h not in held]
    return {
        **base,
        "needed": True,
        "gpus": gpus,
        "fabric_manager": {"needed": fm_needed, "why": fm_why},
        "packages": packages,
        "install": install,
        "hold": hold,
        # for the reset record: reset unholds only what this role held
        "undo": [{"key": f"hold {name}", "argv": ["apt-mark", "unhold", name]} for name in hold],
        "held": sorted(held & set(holds)),
        "services": services,
        "blacklist": None if state.get("blacklist") == BLACKLIST else BLACKLIST,
        "reboot": reboot,
        "summary": summary,
    }


def diff(result: dict, state: dict) -> dict:
    """Before and after, one package a line (`name version`, `absent`, `held`), for --diff."""
    installed = state.get("installed") or {}
    held = set(state.get("held") or [])
    before, after = [], []
    for p in result["packages"]:
        name = p["name"]
        before.append(f"{name} {installed.get(name, 'absent')}{' held' if name in held else ''}")
        want = p["version"] or (installed.get(name) or "candidate")
        after.append(f"{name} {want} held")
    return {"before": "\n".join(before) + "\n" if before else "", "after": "\n".join(after) + "\n" if after else ""}
