"""The node's software stack (kernel, OS, NIC driver and firmware, rdma-core, GPU driver, CUDA, VBIOS, the venv's
torch, NCCL and pins), read, and judged against the one the fleet passed the ladder with (the baseline's `stack`)."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import (
    parse_dpkg_status,
    parse_ethtool_info,
    parse_nvidia_smi,
    parse_os_release,
    upstream,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import driver_link, read
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import Tools

# The GPU stack's packages beside the driver (role gpu_stack installs them): stack key -> package name prefix.
GPU_PACKAGES = {"fabric manager": "nvidia-fabricmanager", "nscq": "libnvidia-nscq", "dcgm": "datacenter-gpu-manager"}

# What the venv's site-packages says of the training stack (distribution names as pip normalises them).
VENV_DISTS = ("torch", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "deepspeed", "transformers")


def venv_stack(venv: Path) -> dict:
    """The venv's training stack from its site-packages' dist-info names (no import: seconds saved per node) and
    train_venv's stamp of its requirements and pins (`.pins.sha256`). {} when there is no venv."""
    out = {}
    for site in sorted(venv.glob("lib/python3*/site-packages")):
        for info in sorted(site.glob("*.dist-info")):
            name, _, version = info.name[: -len(".dist-info")].rpartition("-")
            name = re.sub(r"[-_.]+", "-", name).lower()
            if name in VENV_DISTS:
                out[name] = version
    pins = read(venv / ".pins.sha256")
    if pins:
        out["venv pins"] = pins.split()[0][:12]
    return out


def stack(config: dict, root: Path, tools: Tools, smi: dict | None, rdma: list[dict]) -> dict:
    """The node's software stack, one value per key (the ladder compares the keys across the fleet): kernel, OS,
    the fabric NICs' driver and firmware (`ethtool -i`; the driver from sysfs without ethtool) and the RDMA
    devices' firmware (every distinct value, so a node with two firmwares shows both), rdma-core's package, GPU
    driver, CUDA and VBIOS from nvidia-smi's XML, the venv's torch, NCCL and pins. Keys nothing answered for are
    left out."""
    out = {"kernel": read(root / "proc/sys/kernel/osrelease"), "os": parse_os_release(read(root / "etc/os-release"))}
    nics = []
    for i in config["interfaces"]:
        netdev = root / "sys/class/net" / i["name"]
        res = tools.run(["ethtool", "-i", i["name"]]) if netdev.exists() else None
        info = parse_ethtool_info(res["out"]) if res and res["rc"] == 0 else {}
        nics.append({**info, "driver": info.get("driver") or driver_link(netdev / "device" / "driver")})
    for key, field in (("nic driver", "driver"), ("nic driver version", "version"), ("nic firmware", "firmware")):
        out[key] = ", ".join(sorted({n[field] for n in nics if n.get(field)}))
    out["rdma firmware"] = ", ".join(sorted({d["fw_ver"] for d in rdma if d.get("fw_ver")}))
    res = tools.run(["dpkg-query", "-W", "-f", "${Version}", "rdma-core"])
    out["rdma-core"] = (res["out"].strip() or None) if res and res["rc"] == 0 else None
    info = parse_nvidia_smi(smi["out"]) if smi and smi.get("rc") == 0 else None
    if info:
        out["gpu driver"], out["cuda"] = info["driver"], info["cuda"]
        # The module the next boot loads for this kernel: another version than the loaded one is a reboot pending.
        res = tools.run(["modinfo", "-F", "version", "nvidia"])
        out["gpu driver on disk"] = res["out"].strip() if res and res["rc"] == 0 else None
        out["vbios"] = ", ".join(sorted({g["vbios"] for g in info["gpus"] if g.get("vbios")})) or None
    out.update(gpu_packages(root))
    if config.get("venv"):
        out.update(venv_stack(root / config["venv"].lstrip("/")))
    return {k: v for k, v in out.items() if v}


def gpu_packages(root: Path) -> dict:
    """The fabric manager's, NSCQ's and DCGM's installed versions from dpkg's status file (every distinct one)."""
    installed, _ = parse_dpkg_status(read(root / "var/lib/dpkg/status") or "")
    out = {}
    for key, prefix in GPU_PACKAGES.items():
        versions = sorted({v for name, v in installed.items() if name.startswith(prefix)})
        if versions:
            out[key] = ", ".join(versions)
    return out


def reboot_pending_check(j: Judge, now: dict) -> None:
    """The driver installed for this kernel (modinfo) is not the one loaded: a driver upgrade waits for its reboot,
    and until then nvidia-smi and NVML answer from one version, the user space from another. A fail: the node
    is drained and repair.yml reboots, re-converges and re-proves it (roles/rolling/README.md, "Repair")."""
    loaded, disk = now.get("gpu driver"), now.get("gpu driver on disk")
    if loaded and disk and loaded != disk:
        j.add("gpu driver reboot", "fail", f"gpu driver {loaded} loaded, {disk} installed: a reboot is pending",
              value=loaded, threshold=disk)  # fmt: skip


def fabric_manager_check(j: Judge, now: dict) -> None:
    """The fabric manager and NSCQ run only with the driver of their own version (NVIDIA Fabric Manager User Guide:
    a mismatch keeps the fabric manager from starting, and the GPUs from NVLink): a fail, not a drift."""
    driver = now.get("gpu driver")
    for key in ("fabric manager", "nscq"):
        if driver and now.get(key):
            odd = [v for v in now[key].split(", ") if upstream(v) != driver]
            if odd:
                j.add(f"stack {key}", "fail", f"{key} {now[key]} with driver {driver}: they must be one version",
                      value=now[key], threshold=driver)  # fmt: skip


def firmware_checks(j: Judge) -> None:
    """Each RDMA device against the minimum firmware of its model (thresholds.firmware_minimum by hca_type)."""
    minimum = j.t["firmware_minimum"]
    for dev in j.facts.get("rdma") or []:
        want, have = minimum.get(dev.get("hca_type") or ""), dev.get("fw_ver") or ""
        if not want:
            continue
        numbers = [int(n) for n in have.split(".") if n.isdigit()]
        ok = len(numbers) == 3 and numbers >= [int(n) for n in want.split(".")]
        j.add(f"firmware {dev['name']}", "pass" if ok else "fail",
              f"{dev['name']} ({dev['hca_type']}) firmware {have or 'unknown'}, minimum {want}",
              value=have, threshold=want)  # fmt: skip


def stack_checks(j: Judge):
    """The node's stack against the fleet's when it passed the ladder (baseline `stack`): each key that differs is
    one check at thresholds.stack_mismatch; without a baseline, what the node runs is reported."""
    now, base = j.facts.get("stack") or {}, (j.config.get("baseline") or {}).get("stack") or {}
    if not now:
        j.add("stack", "skip", "no version readable (no /proc/sys/kernel/osrelease, /etc/os-release or tools)")
        return
    reboot_pending_check(j, now)
    fabric_manager_check(j, now)
    firmware_checks(j)
    if not base:
        shown = ", ".join(f"{k} {now[k]}" for k in ("kernel", "nic driver", "nic firmware", "gpu driver", "torch")
                          if k in now)  # fmt: skip
        j.add("stack", "pass", f"{len(now)} versions read ({shown}); no passing ladder to compare with yet")
        return
    status = "pass" if j.t["stack_mismatch"] == "report" else j.t["stack_mismatch"]
    odd = [k for k in sorted(set(now) | set(base)) if now.get(k) != base.get(k)]
    for key in odd:
        j.add(f"stack {key}", status, f"{key} {now.get(key) or 'absent'}, the fleet passed the ladder with "
              f"{base.get(key) or 'none'}", value=now.get(key), threshold=base.get(key))  # fmt: skip
    if not odd:
        j.add("stack", "pass", f"{len(now)} versions as the fleet passed the ladder with")
