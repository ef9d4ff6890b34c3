#!/usr/bin/env python3
"""rdma-node-check: one node's health, the rules the validation ladder and a scheduler's health check share.

  rdma-node-check --config /etc/rdma-llm/node-check.json [--root /] [--state-dir /var/lib/rdma-llm]
                  [--only fabric,gpu,counters,flaps,stack] [--dcgm-level 0-3] [--brief]

Prints one JSON object (schema rdma-llm-cluster/node-check/1; --brief: one line `<status>: <reason>`) and exits
0 pass, 1 warn, 2 fail, 3 when it could not check (bad config or usage). The reason is one line a scheduler can
put on a drained node (`rdma0: link down (operstate down, carrier 0)`, `GPU 3: XID 79 ...`).

One file, stdlib only: the role node_health installs it as /usr/local/sbin/rdma-node-check (the lookup
rdma_llm.cluster.module_source reads it by module name), the module rdma_llm.cluster.node_check runs the same code
for the ladder's node_health rung (AnsiballZ ships it), and the tests import it. Every path starts at `root` and
every tool runs through `Tools`, so tests run it on fake sysfs trees with recorded tool outputs. Nothing is
guessed: no GPU, no RDMA device, no tool or no kernel log is a `skip` that says so, never a pass.
Thresholds and their sources: DEFAULTS below and roles/node_health/README.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

DOCUMENTATION = """
name: node_check
short_description: The node checks (fabric NICs, RDMA ports, GPUs, NIC counters, link flaps) of rdma-node-check
description: See roles/node_health/README.md.
"""

SCHEMA = "rdma-llm-cluster/node-check/1"
CONFIG_SCHEMA = "rdma-llm-cluster/node-check-config/1"
STATE_SCHEMA = "rdma-llm-cluster/node-check-state/1"
STATE_FILE = "node-check-state.json"
STATUSES = ("pass", "warn", "fail", "skip")
EXIT = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}
EXIT_ERROR = 3  # the check could not run (Nagios' UNKNOWN): never read as "fail" by a scheduler
GROUPS = ("fabric", "gpu", "counters", "flaps", "stack")
REASON_MAX = 240
NO_GPU = "no GPU"

# Every threshold, with its source (roles/node_health/README.md has the table). A config's `thresholds` override.
DEFAULTS = {
    # XIDs that fail a node: Azure azurehpc-health-checks customTests/azure_gpu_xid.nhc (XID_EC), in a window of
    # 2 h (its default time_threshold), this boot only (a reboot resets the GPU).
    "xids": [48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120],
    "xid_window_s": 7200,
    # Uncorrectable ECC errors since the driver loaded: GCM check-nvidia-smi ecc_uncorrected_volatile_total (0).
    "ecc_uncorrectable_volatile_max": 0,
    # SRAM correctable errors (volatile or aggregate): Azure conf/nd96isr_h100_v5.conf `check_gpu_ecc 20000000 10000`.
    "ecc_sram_correctable_max": 10000,
    # DRAM errors, correctable or not (volatile or aggregate): the same line's first argument.
    "ecc_dram_max": 20000000,
    # Row remapping: pending or failed fails; more than 512 uncorrectable remaps fails (azure_gpu_ecc.nhc).
    "row_remap_uncorrectable_max": 512,
    # Retired pages (pre-Ampere): more than 10, or one pending, fails (GCM check-nvidia-smi gpu_retired_pages).
    "retired_pages_max": 10,
    # SW power cap is the power limit doing its job under load (Azure exempts it like idle): reported, or `warn`.
    "sw_power_cap": "report",
    # Persistence mode off: warn (Azure's check turns it on; the driver re-initialises a GPU per process without it).
    "persistence_mode": "warn",
    # dcgmi diag level where dcgmi exists (1 "quick deployment checks, normally lasting seconds"; 2-3 by option;
    # 0 off): NVIDIA DCGM docs, dcgmi-diag. Timeouts: r1 seconds, r2 ~2 min, r3 ~15 min, with margin.
    "dcgm_level": 1,
    "dcgm_timeout_s": {"1": 300, "2": 900, "3": 2700},
    # Port error counters that must not grow between two readings: GCM check-ib-counters' error counters.
    "error_counters": [
        "symbol_error",
        "link_error_recovery",
        "link_downed",
        "port_rcv_errors",
        "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors",
        "port_xmit_discards",
        "port_xmit_constraint_errors",
        "port_rcv_constraint_errors",
        "local_link_integrity_errors",
        "excessive_buffer_overrun_errors",
        "VL15_dropped",
    ],
    # mlx5 hw_counters reported, not judged (congestion signals: drops for lack of receive buffer, CNPs, ECN marks).
    "report_counters": ["out_of_buffer", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"],
    # The lossless priority whose ethtool pause counters are reported (cluster_nodrop_cos).
    "nodrop_priority": 3,
    # Link flaps in the journal: 5 or more in 24 h fail (Azure check_ib_link_flapping defaults); one outage of
    # 30 s or more fails (NVIDIA Health Validation rdma_linkflap_fatal: min_outage_seconds 30, threshold 1).
    "flap_window_s": 86400,
    "flap_max": 5,
    "outage_max_s": 30,
    # The software stack (kernel, OS, NIC driver and firmware, rdma-core, GPU driver, CUDA, VBIOS, the venv's torch
    # and NCCL and its pins) against the one the fleet passed the ladder with (the baseline's `stack`): one node
    # with another version is the classic slow ring or hang (field-references: Imbue cluster-health's config.json,
    # GCM's manifest and vbios_mismatch). `warn` by default: after a fleet-wide upgrade every node differs from the
    # old baseline until the ladder passes again; the ladder itself fails an odd node (cluster_validate_stack_mismatch).
    "stack_mismatch": "warn",
    # GPU <-> fabric NIC distance, in nvidia-smi topo -m's levels (PIX, PXB, PHB, NODE, SYS): NCCL turns GPUDirect
    # RDMA off beyond PXB by default (src/graph/paths.cc ncclTopoCheckGdr: netGdrLevel = PATH_PXB), so each GPU's
    # nearest fabric NIC further than `gpu_nic_warn_above` warns; across NUMA nodes (over `gpu_nic_fail_above`) fails.
    "gpu_nic_warn_above": "PXB",
    "gpu_nic_fail_above": "NODE",
    # PCIe ACS redirecting peer-to-peer requests or completions on a PCIe switch port above a GPU or fabric NIC:
    # P2P and GPUDirect RDMA go up through the root complex, slow or broken (NCCL user guide, Troubleshooting, "PCI
    # Access Control Services (ACS)": on bare metal disable it, in the BIOS or with setpci). `warn` by default: a
    # VM's passthrough needs ACS on, and the host's bridges are the hypervisor's.
    "pcie_acs": "warn",
}
CHOICES = {
    "sw_power_cap": ("report", "warn"),
    "persistence_mode": ("warn", "report"),
    "stack_mismatch": ("warn", "fail", "report"),
    "gpu_nic_warn_above": ("PIX", "PXB", "PHB", "NODE", "SYS"),
    "gpu_nic_fail_above": ("PIX", "PXB", "PHB", "NODE", "SYS"),
    "pcie_acs": ("warn", "fail", "report"),
}
# The no-drop priority's PFC counters as mlx5 names them (en_stats.c, pport_per_prio_pfc_stats_desc), reported
# here and sampled by the training watch (train_launch.poll_tail).
PAUSE_COUNTER = "(rx|tx)_prio{prio}_pause(_duration)?"
# nvidia-smi topo -m's distances, nearest first (NVML's common-ancestor levels).
PCI_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
# What the venv's site-packages says of the training stack (distribution names as pip normalises them).
VENV_DISTS = ("torch", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "deepspeed", "transformers")


class ConfigError(ValueError):
    """A config the command cannot check against (exit 3)."""


# --------------------------------------------------------------------------------------------- config


def resolve(config: dict) -> dict:
    """The config with every threshold (DEFAULTS under the config's `thresholds`), checked: ConfigError if not."""
    if not isinstance(config, dict):
        raise ConfigError("the config must be a JSON object")
    interfaces = config.get("interfaces")
    if not isinstance(interfaces, list) or not interfaces or not all(isinstance(i, dict) for i in interfaces):
        raise ConfigError("config: interfaces must be a non-empty list of {name, address, mtu}")
    if any(not isinstance(i.get("name"), str) or not i["name"] for i in interfaces):
        raise ConfigError("config: every interface needs a name")
    if config.get("link_layer", "ethernet") not in ("ethernet", "infiniband"):
        raise ConfigError(f"config: link_layer must be ethernet or infiniband (got {config.get('link_layer')!r})")
    given = config.get("thresholds") or {}
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"config: unknown thresholds {', '.join(unknown)} (known: {', '.join(DEFAULTS)})")
    thresholds = {**DEFAULTS, **given}
    for key, options in CHOICES.items():
        if thresholds[key] not in options:
            raise ConfigError(f"config: thresholds.{key} must be one of {', '.join(options)}")
    for key in ("xid_window_s", "flap_window_s", "flap_max", "outage_max_s", "dcgm_level"):
        if not isinstance(thresholds[key], int) or isinstance(thresholds[key], bool) or thresholds[key] < 0:
            raise ConfigError(f"config: thresholds.{key} must be an integer >= 0")
    if thresholds["dcgm_level"] > 4:
        raise ConfigError("config: thresholds.dcgm_level must be 0-4")
    return {
        **config,
        "link_layer": config.get("link_layer", "ethernet"),
        "interfaces": [
            {"name": i["name"], "address": i.get("address") or "", "mtu": int(i.get("mtu") or 1500)} for i in interfaces
        ],
        "devices": list(config.get("devices") or []),
        "modules": list(config.get("modules") or []),
        "gpus": int(config.get("gpus") or 0),
        "line_rate_gbps": float(config.get("line_rate_gbps") or 0),
        "thresholds": thresholds,
        "baseline": config.get("baseline") or {},
        "venv": str(config.get("venv") or ""),
    }


def load_config(path: str) -> dict:
    try:
        return resolve(json.loads(Path(path).read_text()))
    except OSError as exc:
        raise ConfigError(f"cannot read the config {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the config {path} is not JSON: {exc}") from exc


# --------------------------------------------------------------------------------------------- tools


# Where the tools are when the caller gives no PATH (a scheduler may run the command with an empty environment):
# sminfo and ethtool live in sbin.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Tools:
    """Runs the node's tools (found on PATH, or on `path`; SYSTEM_PATH when PATH is unset); tests pass their own
    with recorded outputs. run() returns {"rc", "out", "err"}, or None when the tool is not installed."""

    def __init__(self, path: str | None = None):
        self.path = path or os.environ.get("PATH") or SYSTEM_PATH

    def run(self, argv: list[str], timeout: float = 60) -> dict | None:
        exe = shutil.which(argv[0], path=self.path)
        if exe is None:
            return None
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"rc": 124, "out": "", "err": f"{argv[0]} did not finish within {timeout:.0f} s"}
        except OSError as exc:
            return {"rc": 126, "out": "", "err": f"{argv[0]}: {exc}"}
        return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}


def _last_line(res: dict | None) -> str:
    text = ((res or {}).get("err") or "").strip() or ((res or {}).get("out") or "").strip()
    return text.splitlines()[-1][:160] if text else f"rc {(res or {}).get('rc')}"


# --------------------------------------------------------------------------------------------- sysfs and /proc


def _driver_link(path: Path) -> str | None:
    """The driver a sysfs device is bound to (the name its `driver` link points at), None when unbound."""
    return os.path.basename(os.readlink(path)) if path.is_symlink() else None


def read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # veth: reading `speed` fails with EINVAL; absent files read as None
        return None


def nic(root: Path, ifname: str) -> dict:
    base = root / "sys/class/net" / ifname
    if not base.exists():
        return {"name": ifname, "exists": False}
    device = base / "device"
    speed = read(base / "speed")
    driver = _driver_link(device / "driver")
    uevent = read(base / "uevent") or ""
    kind = next((line.split("=", 1)[1] for line in uevent.splitlines() if line.startswith("DEVTYPE=")), None)
    if kind is None and not device.exists():
        kind = "virtual"
    return {
        "name": ifname,
        "exists": True,
        "address": read(base / "address"),
        "operstate": read(base / "operstate"),
        "carrier": int(read(base / "carrier") or 0),
        "mtu": int(read(base / "mtu") or 0),
        "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() else None,
        "virtual": not device.exists(),
        "kind": kind,
        "driver": driver,
        "sriov_vf": (device / "physfn").exists(),
    }


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _entries(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path), key=lambda n: (len(n), n))
    except OSError:
        return []


def _port(port_dir: Path, number: str) -> dict:
    gids = []
    for index in _entries(port_dir / "gids"):
        gid = read(port_dir / "gids" / index)
        if not gid or gid == ZERO_GID:
            continue
        gids.append(
            {
                "index": int(index),
                "gid": gid,
                "type": read(port_dir / "gid_attrs" / "types" / index),
                "netdev": read(port_dir / "gid_attrs" / "ndevs" / index),
            }
        )
    return {
        "port": int(number),
        "state": read(port_dir / "state"),
        "phys_state": read(port_dir / "phys_state"),
        "link_layer": read(port_dir / "link_layer"),
        "rate": read(port_dir / "rate"),
        "lid": read(port_dir / "lid"),
        "sm_lid": read(port_dir / "sm_lid"),
        "gids": gids,
    }


def rdma_devices(root: str | Path = "/sys/class/infiniband") -> list[dict]:
    """The one reader of the RDMA devices in sysfs (rdma_stack records them with it, through module_utils
    rdma_sysfs): one entry per device under `root` with its node type, GUID, firmware and ports (state, rate, GIDs)."""
    root = Path(root)
    found = []
    for name in _entries(root):
        dev = root / name
        found.append(
            {
                "name": name,
                "node_type": read(dev / "node_type"),
                "node_guid": read(dev / "node_guid"),
                "fw_ver": read(dev / "fw_ver"),
                "ports": [_port(dev / "ports" / n, n) for n in _entries(dev / "ports") if n.isdigit()],
            }
        )
    return found


def rdma_drivers(root: Path) -> dict:
    out = {}
    base = root / "sys/class/infiniband"
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        link = dev / "device" / "driver"
        out[dev.name] = {
            "driver": _driver_link(link),
            "sriov_vf": (dev / "device" / "physfn").exists(),
        }
    return out


def port_counters(root: Path) -> dict:
    """Every RDMA port's `counters/` and `hw_counters/` (sysfs; GCM check-ib-counters reads the same files):
    {"mlx5_0:1": {"counters": {name: int}, "hw_counters": {name: int}}}."""
    out = {}
    base = root / "sys/class/infiniband"
    for dev in _entries(base):
        for port in _entries(base / dev / "ports"):
            if not port.isdigit():
                continue
            entry = {}
            for group in ("counters", "hw_counters"):
                values = {}
                for name in _entries(base / dev / "ports" / port / group):
                    text = read(base / dev / "ports" / port / group / name)
                    if text is not None and re.fullmatch(r"\d+", text):
                        values[name] = int(text)
                entry[group] = values
            out[f"{dev}:{port}"] = entry
    return out


def modules(root: Path) -> list[str] | None:
    text = read(root / "proc/modules")
    if text is None:
        return None  # kernel without loadable modules
    return sorted(line.split()[0] for line in text.splitlines() if line.strip())


def gpus_proc(root: Path) -> dict:
    """GPUs the NVIDIA driver registered (/proc/driver/nvidia/gpus/<pci>): the count when nvidia-smi is absent."""
    base = root / "proc/driver/nvidia"
    listed = base / "gpus"
    pci = sorted(p.name for p in listed.iterdir()) if listed.is_dir() else []
    version = read(base / "version")
    return {"count": len(pci), "pci": pci, "driver": version.splitlines()[0] if version else None}


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


# Where NCCL (and UCX) look for a GPU peer-memory client, the kernel side of GPUDirect RDMA: nvidia_peermem,
# or the older out-of-tree nv_peer_mem.
PEERMEM = (
    ("nvidia_peermem", "sys/module/nvidia_peermem/version"),
    ("nv_peer_mem", "sys/kernel/mm/memory_peers/nv_mem/version"),
    ("nv_peer_mem", "sys/kernel/mm/memory_peers/nv_mem_nc/version"),
)


def peermem(root: Path) -> dict:
    for name, rel in PEERMEM:
        if (root / rel).exists():
            return {"module": name, "version": read(root / rel)}
    return {"module": None, "version": None}


def boot_time(root: Path) -> float | None:
    """The kernel's boot time (`btime` of /proc/stat): events before it belong to another boot."""
    for line in (read(root / "proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


# --------------------------------------------------------------------------------------------- units, GIDs


def roce_gid_of(ipv4: str) -> str:
    """The IPv4-mapped RoCE v2 GID a port carries for an address, in sysfs notation."""
    mapped = ipaddress.IPv6Address(f"::ffff:{ipaddress.IPv4Address(ipv4)}")
    return ":".join(f"{x:04x}" for x in (int(mapped) >> s & 0xFFFF for s in range(112, -16, -16)))


def same_gid(value: str, want: str) -> bool:
    """Two GIDs are one address, whatever their notation (sysfs writes every group, zero-padded)."""
    try:
        return ipaddress.IPv6Address(value) == ipaddress.IPv6Address(want)
    except ValueError:
        return False


def link_rate_gbps(value):
    """Line rate in Gb/s from sysfs net `speed` (Mb/s, int or str) or an RDMA port `rate` ("100 Gb/sec (4X EDR)").

    None when unknown: -1 / empty / unreadable (veth and other virtual NICs report no speed).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) / 1000 if value > 0 else None
    text = str(value).strip()
    match = re.match(r"^([\d.]+)\s*Gb/sec", text)
    if match:
        return float(match.group(1))
    if re.fullmatch(r"-?\d+", text):
        return link_rate_gbps(int(text))
    return None


IB_MTUS = (256, 512, 1024, 2048, 4096)


def required_ib_mtu(netdev_mtu):
    """Largest RDMA path MTU that fits a netdev MTU (RoCE) — what `active_mtu` should reach."""
    fits = [m for m in IB_MTUS if m <= int(netdev_mtu)]
    return fits[-1] if fits else IB_MTUS[0]


def _num(text):
    text = str(text).strip()
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    try:
        return int(text)
    except ValueError:
        return float(text)


# --------------------------------------------------------------------------------------------- parsers


def parse_ibv_devinfo(text):
    """`ibv_devinfo` (rdma-core) -> [{hca_id, transport, fw_ver, node_guid, vendor_id, ports: [...]}]."""
    devices = []
    dev = port = None
    for raw in str(text).splitlines():
        line = raw.strip()
        if not line or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            dev = {"hca_id": value, "ports": []}
            devices.append(dev)
            port = None
        elif dev is None:
            continue
        elif key == "port":
            port = {"port": int(value)}
            dev["ports"].append(port)
        elif port is not None:
            if key in ("state", "phys_state"):
                port[key] = value.split()[0]
            elif key in ("max_mtu", "active_mtu"):
                port[key] = int(value.split()[0])
            elif key in ("sm_lid", "port_lid", "port_lmc"):
                port[key] = _num(value.split()[0])
            elif key == "link_layer":
                port[key] = value
        elif key in ("transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id", "vendor_part_id", "hw_ver"):
            dev[key] = value
        elif key == "phys_port_cnt":
            dev[key] = int(value)
    return devices


def parse_sminfo(text):
    """`sminfo` (infiniband-diags) -> {sm_lid, sm_guid, activity, priority, state, state_name} or None."""
    match = re.search(
        r"sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) state (\d+) (\w+)", str(text)
    )
    if not match:
        return None
    return {
        "sm_lid": int(match.group(1)),
        "sm_guid": match.group(2),
        "activity": int(match.group(3)),
        "priority": int(match.group(4)),
        "state": int(match.group(5)),
        "state_name": match.group(6),
    }


def _int_or_none(text):
    text = (text or "").strip()
    return int(text) if re.fullmatch(r"\d+", text) else None


def _pci_key(text):
    """(domain, bus, device) of a PCI address: nvidia-smi's `00000000:9B:00.0` or the kernel's `0000:9b:00`."""
    parts = re.split(r"[:.]", str(text).strip())
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
    except (IndexError, ValueError):
        return None


def _active(node, *names):
    """Whether a clocks event/throttle reason is Active (driver 535 renamed clocks_throttle_* to clocks_event_*)."""
    for name in names:
        for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
            value = node.findtext(f".//{prefix}{name}")
            if value is not None:
                return value.strip() == "Active"
    return None


def _ecc_block(node):
    """One ECC block (volatile or aggregate) -> {sram_correctable, sram_uncorrectable, dram_correctable,
    dram_uncorrectable} (None where N/A); driver 555+ splits SRAM uncorrectable into parity and SECDED."""
    if node is None:
        return None
    out = {}
    for key in ("sram_correctable", "dram_correctable", "dram_uncorrectable"):
        out[key] = _int_or_none(node.findtext(key))
    if node.find("sram_uncorrectable") is not None:
        out["sram_uncorrectable"] = _int_or_none(node.findtext("sram_uncorrectable"))
    else:
        parts = [_int_or_none(node.findtext(k)) for k in ("sram_uncorrectable_parity", "sram_uncorrectable_secded")]
        out["sram_uncorrectable"] = None if None in parts else sum(parts)
    return out


def parse_nvidia_smi(text):
    """`nvidia-smi -q -x` -> {"driver", "gpus": [...]}, one entry per <gpu> in nvidia-smi's order (its index).
    Fields the driver reports as N/A are None (the checks say `not reported`); XML that does not parse: None."""
    try:
        root = ET.fromstring(str(text).strip())
    except ET.ParseError:
        return None
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        pci = gpu.get("id") or gpu.findtext("pci/pci_bus_id") or ""
        link = gpu.find("pci/pci_gpu_link_info")
        remap = gpu.find("remapped_rows")
        retired = gpu.find("retired_pages")
        remap_info = None
        if remap is not None and remap.find("remapped_row_pending") is not None:
            remap_info = {
                "correctable": _int_or_none(remap.findtext("remapped_row_corr")),
                "uncorrectable": _int_or_none(remap.findtext("remapped_row_unc")),
                "pending": (remap.findtext("remapped_row_pending") or "").strip() == "Yes",
                "failure": (remap.findtext("remapped_row_failure") or "").strip() == "Yes",
            }
        retired_info = None
        if retired is not None:
            single = _int_or_none(retired.findtext("multiple_single_bit_retirement/retired_count"))
            double = _int_or_none(retired.findtext("double_bit_retirement/retired_count"))
            pending = (retired.findtext("pending_retirement") or "").strip()
            if single is not None or double is not None:
                retired_info = {"single_bit": single or 0, "double_bit": double or 0, "pending": pending == "Yes"}
        gpus.append(
            {
                "index": index,
                "pci": pci,
                "name": (gpu.findtext("product_name") or "").strip(),
                "persistence": (gpu.findtext("persistence_mode") or "").strip() or None,
                "pstate": (gpu.findtext("performance_state") or "").strip() or None,
                "idle": _active(gpu, "gpu_idle"),
                "throttle": {
                    name: _active(gpu, name)
                    for name in (
                        "hw_slowdown",
                        "hw_thermal_slowdown",
                        "hw_power_brake_slowdown",
                        "sw_power_cap",
                        "sw_thermal_slowdown",
                    )
                },
                "pcie": {
                    "gen": _int_or_none(link.findtext("pcie_gen/current_link_gen")) if link is not None else None,
                    "max_gen": _int_or_none(link.findtext("pcie_gen/max_link_gen")) if link is not None else None,
                    "width": _int_or_none((link.findtext("link_widths/current_link_width") or "").rstrip("x"))
                    if link is not None
                    else None,
                    "max_width": _int_or_none((link.findtext("link_widths/max_link_width") or "").rstrip("x"))
                    if link is not None
                    else None,
                },
                "ecc_mode": (gpu.findtext("ecc_mode/current_ecc") or "").strip() or None,
                "vbios": (gpu.findtext("vbios_version") or "").strip() or None,
                "ecc": {
                    "volatile": _ecc_block(gpu.find("ecc_errors/volatile")),
                    "aggregate": _ecc_block(gpu.find("ecc_errors/aggregate")),
                },
                "remap": remap_info,
                "retired": retired_info,
            }
        )
    return {
        "driver": (root.findtext("driver_version") or "").strip() or None,
        "cuda": (root.findtext("cuda_version") or "").strip() or None,
        "gpus": gpus,
    }


def parse_nvlink_status(text):
    """`nvidia-smi nvlink -s` -> {gpu index: {link: "25 GB/s" | "<inactive>"}} (GPUs without NVLink: no links)."""
    out = {}
    gpu = None
    for line in str(text).splitlines():
        head = re.match(r"^GPU (\d+):", line)
        if head:
            gpu = int(head.group(1))
            out[gpu] = {}
            continue
        link = re.match(r"^\s+Link (\d+): (.+?)\s*$", line)
        if link and gpu is not None:
            out[gpu][int(link.group(1))] = link.group(2)
    return out


def parse_dcgmi_diag(text):
    """`dcgmi diag -r N -j` -> [{"name", "status", "gpus"}] for every test with a result (DCGM 3.x and 4.x both
    nest tests as {"name", "results": [{"status", "gpu_ids"|"entity_id"...}]}; text before the JSON is skipped).
    None when there is no JSON."""
    text = str(text)
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc = json.loads(text[start:])
    except json.JSONDecodeError:
        return None
    tests = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("name"), str) and isinstance(node.get("results"), list):
                for res in node["results"]:
                    if isinstance(res, dict) and res.get("status"):
                        gpu = res.get("gpu_ids", res.get("gpu_id", res.get("entity_id")))
                        tests.append({"name": node["name"], "status": str(res["status"]).lower(), "gpus": gpu})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return tests


def parse_ethtool_stats(text):
    """`ethtool -S <if>` (`NIC statistics:`, then `     name: value` lines) -> {name: int}: the driver's own counter
    names; lines that are not a number are skipped."""
    out = {}
    for line in str(text).splitlines():
        match = re.match(r"^\s*([^:\s][^:]*):\s+(-?\d+)\s*$", line)
        if match:
            out[match.group(1).strip()] = int(match.group(2))
    return out


_SHORT_UNIX = re.compile(r"^(\d+(?:\.\d+)?) (\S+) ([^:\s]+(?:\[\d+\])?): (.*)$")
_DMESG_T = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\] (.*)$")


def parse_log(text):
    """Journal lines (`journalctl -o short-unix`: `<epoch> <host> <identifier>: <message>`) or `dmesg -T` lines
    (`[Sun Feb 23 16:24:18 2025] <message>`, local time) -> [(epoch, identifier, message)]."""
    out = []
    for line in str(text).splitlines():
        match = _SHORT_UNIX.match(line)
        if match:
            out.append((float(match.group(1)), re.sub(r"\[\d+\]$", "", match.group(3)), match.group(4)))
            continue
        match = _DMESG_T.match(line)
        if match:
            try:
                when = time.mktime(time.strptime(match.group(1), "%a %b %d %H:%M:%S %Y"))
            except ValueError:
                continue
            out.append((when, "kernel", match.group(2)))
    return out


XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+)\): (\d+),\s*(.*)")
# Link events, the kernel's own: the NIC driver's carrier (mlx5e, mlx4: `<if>: Link up|down`) and the RDMA core's
# port state (`<dev>: Port: 1 Link ACTIVE|DOWN`, drivers/infiniband/core/cache.c; INIT and ARMED are steps on the
# way up). Not systemd-networkd's `Lost carrier`: it also logs the link changes it makes itself (netplan apply).
LINK_RE = re.compile(r"(?:^|\s)([^\s:]+): Link (up|down)\b", re.I)
PORT_RE = re.compile(r"(?:^|\s)([^\s:]+): Port: (\d+) Link (ACTIVE|DOWN)\b")


def xid_events(entries):
    """[(epoch, pci, xid, text)] of the kernel's NVRM Xid lines."""
    out = []
    for when, ident, msg in entries:
        match = XID_RE.search(msg) if ident == "kernel" else None
        if match:
            out.append((when, match.group(1).lower(), int(match.group(2)), match.group(3).strip()))
    return out


def link_events(entries, names):
    """[(epoch, link, "down"|"up")] of the kernel's link messages for the links in `names` (interfaces; an RDMA
    device's port is `dev:port`)."""
    out = []
    for when, ident, msg in entries:
        if ident != "kernel":
            continue
        match = PORT_RE.search(msg)
        if match and match.group(1) in names:
            out.append((when, f"{match.group(1)}:{match.group(2)}", "up" if match.group(3) == "ACTIVE" else "down"))
            continue
        match = LINK_RE.search(msg)
        if match and match.group(1) in names:
            out.append((when, match.group(1), match.group(2).lower()))
    return out


def outages(events, now):
    """Per link: {"flaps": down events, "outages": [(start, seconds, ongoing)]} from time-ordered events."""
    out = {}
    down_since = {}
    for when, link, state in sorted(events):
        entry = out.setdefault(link, {"flaps": 0, "outages": []})
        if state == "down" and link not in down_since:
            down_since[link] = when
            entry["flaps"] += 1
        elif state == "up" and link in down_since:
            start = down_since.pop(link)
            entry["outages"].append((start, when - start, False))
    for link, start in down_since.items():
        out[link]["outages"].append((start, now - start, True))
    return out


def parse_ethtool_info(text):
    """`ethtool -i <if>` -> {"driver", "version", "firmware"} (None where not reported; a veth has no firmware)."""
    fields = {}
    for line in str(text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return {k: fields.get(f) or None for k, f in (("driver", "driver"), ("version", "version"),
                                                   ("firmware", "firmware-version"))}  # fmt: skip


def parse_os_release(text):
    """/etc/os-release -> PRETTY_NAME (else NAME VERSION_ID), or None."""
    fields = {}
    for line in str(text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"').strip("'")
    return fields.get("PRETTY_NAME") or " ".join(v for v in (fields.get("NAME"), fields.get("VERSION_ID")) if v) or None


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
        nics.append({**info, "driver": info.get("driver") or _driver_link(netdev / "device" / "driver")})
    for key, field in (("nic driver", "driver"), ("nic driver version", "version"), ("nic firmware", "firmware")):
        out[key] = ", ".join(sorted({n[field] for n in nics if n.get(field)}))
    out["rdma firmware"] = ", ".join(sorted({d["fw_ver"] for d in rdma if d.get("fw_ver")}))
    res = tools.run(["dpkg-query", "-W", "-f", "${Version}", "rdma-core"])
    out["rdma-core"] = (res["out"].strip() or None) if res and res["rc"] == 0 else None
    info = parse_nvidia_smi(smi["out"]) if smi and smi.get("rc") == 0 else None
    if info:
        out["gpu driver"], out["cuda"] = info["driver"], info["cuda"]
        out["vbios"] = ", ".join(sorted({g["vbios"] for g in info["gpus"] if g.get("vbios")})) or None
    if config.get("venv"):
        out.update(venv_stack(root / config["venv"].lstrip("/")))
    return {k: v for k, v in out.items() if v}


# --------------------------------------------------------------------------------------------- collect


def collect(config: dict, root="/", tools: Tools | None = None, now: float | None = None, groups=GROUPS) -> dict:
    """Read the node: sysfs and /proc under `root`, the tools' raw output (parsed in evaluate())."""
    root = Path(root)
    tools = tools or Tools()
    now = time.time() if now is None else now
    t = config["thresholds"]
    ifnames = [i["name"] for i in config["interfaces"]]
    facts = {"time": now, "groups": list(groups), "boot_time": boot_time(root)}
    facts["rdma"] = rdma_devices(root / "sys/class/infiniband")
    if "fabric" in groups:
        facts["nic"] = {n: nic(root, n) for n in ifnames}
        facts["rdma_drivers"] = rdma_drivers(root)
        facts["modules"] = modules(root)
        if facts["rdma"]:
            facts["ibv_devinfo"] = tools.run(["ibv_devinfo"])
            if config["link_layer"] == "infiniband":
                facts["sminfo"] = tools.run(["sminfo"])
    if "gpu" in groups:
        facts["gpus_proc"] = gpus_proc(root)
        facts["peermem"] = peermem(root)
        facts["nvidia_smi"] = tools.run(["nvidia-smi", "-q", "-x"])
        gpus = list(facts["gpus_proc"]["pci"])
        if facts["nvidia_smi"] is not None and facts["nvidia_smi"]["rc"] == 0:
            facts["nvlink"] = tools.run(["nvidia-smi", "nvlink", "-s"])
            smi = parse_nvidia_smi(facts["nvidia_smi"]["out"]) or {"gpus": []}
            gpus = sorted({*gpus, *(pci_bdf(g["pci"]) for g in smi["gpus"] if g["pci"])})
        facts["pci"] = pci_places(root, gpus, ifnames)
        facts["pci_acs"] = pci_acs(root, facts["pci"])
        level = t["dcgm_level"]
        if level and (facts["gpus_proc"]["count"] or (facts["nvidia_smi"] or {}).get("rc") == 0):
            limit = t["dcgm_timeout_s"].get(str(level), 2700)
            facts["dcgm"] = tools.run(["dcgmi", "diag", "-r", str(level), "-j"], timeout=limit)
    if "gpu" in groups or "flaps" in groups:
        windows = ([t["xid_window_s"]] if "gpu" in groups else []) + ([t["flap_window_s"]] if "flaps" in groups else [])
        since = now - max(windows)
        if facts["boot_time"]:
            since = max(since, facts["boot_time"])
        facts["log_since"] = since
        facts["log"] = read_kernel_log(tools, since)
    if "stack" in groups:
        smi = facts.get("nvidia_smi") if "gpu" in groups else tools.run(["nvidia-smi", "-q", "-x"])
        facts["stack"] = stack(config, root, tools, smi, facts["rdma"])
    if "counters" in groups:
        facts["counters"] = port_counters(root)
        facts["ethtool"] = {
            n: tools.run(["ethtool", "-S", n]) for n in ifnames if (root / "sys/class/net" / n).exists()
        }
    return facts


def read_kernel_log(tools: Tools, since: float) -> dict:
    """The kernel's messages of this boot since `since`: {"source", "text", "kernel" (whether the journal holds any
    kernel message of this boot: a container's may not)} or {"error"}. The journal first, else `dmesg -T`."""
    res = tools.run(["journalctl", "-k", "--no-pager", "--quiet", "--output=short-unix", f"--since=@{int(since)}"])
    if res is not None and res["rc"] == 0:
        kernel = any(ident == "kernel" for _, ident, _ in parse_log(res["out"]))
        if not kernel:  # a quiet window, or no kernel messages at all?
            probe = tools.run(["journalctl", "-k", "--no-pager", "--quiet", "--output=short-unix", "-n", "1"])
            kernel = bool(probe and probe["rc"] == 0 and any(i == "kernel" for _, i, _ in parse_log(probe["out"])))
        return {"source": "journalctl", "text": res["out"], "kernel": kernel}
    dmesg = tools.run(["dmesg", "-T"])
    if dmesg is not None and dmesg["rc"] == 0:
        return {"source": "dmesg -T", "text": dmesg["out"], "kernel": bool(dmesg["out"].strip())}
    why = f"journalctl: {_last_line(res)}" if res is not None else "journalctl not installed"
    why += f"; dmesg: {_last_line(dmesg)}" if dmesg is not None else "; dmesg not installed"
    return {"error": why}


# --------------------------------------------------------------------------------------------- checks


def check(name, status, detail, value=None, threshold=None, unit=None):
    if status not in STATUSES:
        raise ValueError(f"check {name}: status must be one of {STATUSES}, got {status!r}")
    return {"check": name, "status": status, "detail": detail, "value": value, "threshold": threshold, "unit": unit}


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


class Judge:
    """One evaluation: the checks, notes and each rail's line rate (Gb/s; None: unknown)."""

    def __init__(self, facts: dict, config: dict):
        self.facts, self.config, self.t = facts, config, config["thresholds"]
        self.checks: list[dict] = []
        self.notes: list[str] = []
        self.rates: dict = {}
        self.baseline = (config.get("baseline") or {}).get("rail_gbps") or {}
        self.reading: dict | None = None  # the counters read (counter_checks), kept for the next run
        self.deltas: dict = {}

    def add(self, *args, **kw):
        self.checks.append(check(*args, **kw))

    def rate(self, rail, rate):
        """Record a link's line rate: a rail keeps the lowest of its NIC and its RDMA port."""
        have = self.rates.get(rail)
        self.rates[rail] = rate if have is None else (have if rate is None else min(have, rate))

    def line_rate(self, what, rail, where, rate):
        """A link against the expected line rate (config line_rate_gbps), else the rate this rail passed the ladder
        at (baseline): below it the link trained down (a cable, a port, a PCIe slot)."""
        want, why = self.config["line_rate_gbps"], "expected"
        if not want and self.baseline.get(rail):
            want, why = float(self.baseline[rail]), "baseline"
        if not want:
            self.add(what, "pass", f"{where} {rate:g} Gb/s", value=rate, unit="Gb/s")
        elif rate < want:
            text = "the expected" if why == "expected" else "the rate it passed the ladder at,"
            self.add(what, "fail", f"{where} {rate:g} Gb/s, below {text} {want:g} Gb/s (trained down?)",
                     value=rate, threshold=want, unit="Gb/s")  # fmt: skip
        else:
            self.add(what, "pass", f"{where} {rate:g} Gb/s", value=rate, threshold=want, unit="Gb/s")


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
    lid = _num(port.get("lid") or "0")
    sm_lid = _num(port.get("sm_lid") or "0")
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


# ---- GPUs


def _gpus(j: Judge):
    """(parsed nvidia-smi or None, why not) — the GPUs nvidia-smi reports."""
    raw = j.facts.get("nvidia_smi")
    if raw is None:
        return None, "nvidia-smi not installed"
    if raw["rc"] != 0:
        return None, f"nvidia-smi -q -x failed: {_last_line(raw)}"
    parsed = parse_nvidia_smi(raw["out"])
    if parsed is None:
        return None, "nvidia-smi -q -x printed no XML"
    return parsed, ""


def _per_gpu(j: Judge, name, gpus, judge, what):
    """One check over every GPU: judge(gpu) -> (status, text) or None (not reported). The worst status wins; the
    detail names each GPU that is not pass."""
    results = [(g, judge(g)) for g in gpus]
    reported = [(g, r) for g, r in results if r is not None]
    if not reported:
        j.add(name, "skip", f"{what} not reported by nvidia-smi (N/A)")
        return
    for status in ("fail", "warn"):
        bad = [f"GPU {g['index']}: {r[1]}" for g, r in reported if r[0] == status]
        if bad:
            j.add(name, status, "; ".join(bad))
            return
    texts = sorted({r[1] for _, r in reported})
    j.add(name, "pass", f"{len(reported)} GPU(s): " + "; ".join(texts))


GPU_CHECKS = ("gpu xid", "gpu ecc", "gpu row remap", "gpu retired pages", "gpu throttle", "gpu pcie",
              "gpu persistence", "nvlink", "gpu nic affinity", "pcie acs", "dcgm diag")  # fmt: skip
# The checks nvidia-smi's output decides (skipped with its reason where it did not run).
SMI_CHECKS = GPU_CHECKS[1:8]


def gpu_checks(j: Judge):
    proc = j.facts.get("gpus_proc") or {}
    smi, why = _gpus(j)
    found = len(smi["gpus"]) if smi else int(proc.get("count") or 0)
    expected = j.config["gpus"] or int((j.config.get("baseline") or {}).get("gpus") or 0)
    driver = (smi or {}).get("driver") or proc.get("driver") or "none"
    if not expected:
        if found:
            j.add("gpus", "pass", f"{found} GPU(s), driver {driver}", value=found)
        else:
            j.add("gpus", "skip", NO_GPU)
    else:
        j.add("gpus", "pass" if found >= expected else "fail",
              f"{found} GPU(s) (expected {expected}), driver {driver}", value=found, threshold=expected)  # fmt: skip
    # The kernel side of GPUDirect RDMA (what NCCL looks for), where the node has RDMA devices: without it
    # DMA-BUF may still serve (the ladder's all-reduce reads what NCCL used), so its absence is reported.
    if found and (j.config["devices"] or j.facts.get("rdma")):
        mem = j.facts.get("peermem") or {}
        if mem.get("module"):
            j.add("gpu peer memory", "pass", f"{mem['module']} {mem.get('version') or ''}".strip())
        else:
            j.add("gpu peer memory", "skip",
                  "no GPU peer-memory module (nvidia_peermem): GPUDirect RDMA only through DMA-BUF")  # fmt: skip
    if not found:
        for name in GPU_CHECKS:
            j.add(name, "skip", NO_GPU)
        return
    _xid_check(j, smi["gpus"] if smi else [])
    if smi is None:
        for name in SMI_CHECKS:
            j.add(name, "skip", why)
    else:
        _gpu_smi_checks(j, smi["gpus"])
    _affinity_check(j)
    _acs_check(j)
    _dcgm_check(j)


def _affinity_check(j: Judge):
    """Each GPU against its nearest fabric NIC (what NCCL picks): within gpu_nic_warn_above passes (GPUDirect RDMA
    at NCCL's default), beyond it warns, beyond gpu_nic_fail_above (another NUMA node by default) fails."""
    places = j.facts.get("pci") or {}
    gpus = {bdf: p for bdf, p in (places.get("gpus") or {}).items() if p}
    nics = {n: p for n, p in (places.get("nics") or {}).items() if p}
    if not gpus or not nics:
        why = "no GPU found in sysfs" if not gpus else "no fabric NIC on PCI (a virtual interface has no PCI place)"
        j.add("gpu nic affinity", "skip", why)
        return
    warn, fail = PCI_LEVELS.index(j.t["gpu_nic_warn_above"]), PCI_LEVELS.index(j.t["gpu_nic_fail_above"])
    for index, (bdf, place) in enumerate(sorted(gpus.items())):
        level, nic = min((PCI_LEVELS.index(pci_distance(place, p)), n) for n, p in sorted(nics.items()))
        detail = f"GPU {index} ({bdf}): nearest fabric NIC {nic} at {PCI_LEVELS[level]}"
        if level > fail:
            status, detail = "fail", f"{detail}, beyond {j.t['gpu_nic_fail_above']}: give each GPU a NIC on its side"
        elif level > warn:
            status = "warn"
            detail += f", beyond {j.t['gpu_nic_warn_above']}: NCCL's default NCCL_NET_GDR_LEVEL (PXB) leaves GPUDirect"
            detail += " RDMA off, its traffic goes through host memory"
        else:
            status = "pass"
        j.add("gpu nic affinity", status, detail, value=PCI_LEVELS[level])


def _acs_check(j: Judge):
    """The PCIe switch ports above each GPU and fabric NIC must not redirect peer-to-peer traffic (ACS ReqRedir,
    CmplRedir): `pcie_acs` decides warn, fail or report."""
    acs = j.facts.get("pci_acs") or {}
    if not acs:
        j.add("pcie acs", "skip", "no PCIe switch above the GPUs and fabric NICs (or no PCI place)")
        return
    unreadable = sorted(b for b, a in acs.items() if not a["readable"])
    if len(unreadable) == len(acs):
        j.add("pcie acs", "skip", "the PCIe extended config space is unreadable (not root?)")
        return
    redirecting = {b: [n for n in ACS_REDIRECT if a["control"][n]] for b, a in sorted(acs.items()) if a["control"]}
    redirecting = {b: bits for b, bits in redirecting.items() if bits}
    if not redirecting:
        j.add("pcie acs", "pass", f"no ACS redirect on the {len(acs)} PCIe switch port(s) above the GPUs and NICs")
        return
    mode = j.t["pcie_acs"]
    for bdf, bits in redirecting.items():
        detail = f"{bdf}: ACS {' '.join(b + '+' for b in bits)}: peer-to-peer and GPUDirect RDMA go through the root"
        detail += (
            f" complex; disable it in the BIOS or with `setpci -s {bdf} ECAP_ACS+0x6.w=0000` (NCCL troubleshooting)"
        )
        j.add("pcie acs", "pass" if mode == "report" else mode, detail)


def _xid_check(j: Judge, gpus):
    log = j.facts.get("log") or {}
    if "error" in log:
        j.add("gpu xid", "skip", f"kernel log not readable ({log['error']})")
        return
    if not log.get("kernel"):
        j.add("gpu xid", "skip", "the journal holds no kernel message of this boot (a container?)")
        return
    since = max(j.facts["time"] - j.t["xid_window_s"], j.facts.get("boot_time") or 0)
    by_pci = {_pci_key(g["pci"]): g["index"] for g in gpus}
    fatal, other = {}, {}
    for when, pci, xid, text in xid_events(parse_log(log.get("text") or "")):
        if when < since:
            continue
        index = by_pci.get(_pci_key(pci))
        who = f"GPU {index}" if index is not None else f"GPU at PCI {pci}"
        target = fatal if xid in j.t["xids"] else other
        target.setdefault((who, xid), text)
    hours = j.t["xid_window_s"] / 3600
    if fatal:
        j.add("gpu xid", "fail", "; ".join(f"{who}: XID {xid} ({text[:80]})" for (who, xid), text in fatal.items()))
    elif other:
        j.add("gpu xid", "pass", "XIDs not in the list (reported): "
              + ", ".join(f"{who}: XID {xid}" for who, xid in other) + f" in {hours:g} h")  # fmt: skip
    else:
        j.add("gpu xid", "pass", f"no XID in the kernel log in {hours:g} h (this boot)")


def _ecc(j: Judge, g):
    if g["ecc_mode"] == "Disabled":
        return "warn", "ECC disabled"
    vol, agg = g["ecc"]["volatile"] or {}, g["ecc"]["aggregate"] or {}
    if not any(v is not None for v in [*vol.values(), *agg.values()]):
        return None
    unc = sum(vol.get(k) or 0 for k in ("sram_uncorrectable", "dram_uncorrectable"))
    if unc > j.t["ecc_uncorrectable_volatile_max"]:
        return "fail", f"{unc} uncorrectable ECC error(s) since the driver loaded"
    if (agg.get("sram_uncorrectable") or 0) > 0:
        return "fail", f"{agg['sram_uncorrectable']} uncorrectable SRAM ECC error(s) in its lifetime"
    sram = max(vol.get("sram_correctable") or 0, agg.get("sram_correctable") or 0)
    if sram > j.t["ecc_sram_correctable_max"]:
        return "fail", f"{sram} correctable SRAM ECC errors (> {j.t['ecc_sram_correctable_max']})"
    dram = max((block.get(k) or 0) for block in (vol, agg) for k in ("dram_correctable", "dram_uncorrectable"))
    if dram > j.t["ecc_dram_max"]:
        return "fail", f"{dram} DRAM ECC errors (> {j.t['ecc_dram_max']})"
    return "pass", "no uncorrectable ECC error"


def _remap(j: Judge, g):
    r = g["remap"]
    if r is None:
        return None
    if r["pending"]:
        return "fail", "row remapping pending (reset the GPU)"
    if r["failure"]:
        return "fail", "row remapping failed (replace the GPU)"
    if (r["uncorrectable"] or 0) > j.t["row_remap_uncorrectable_max"]:
        limit = j.t["row_remap_uncorrectable_max"]
        return "fail", f"{r['uncorrectable']} rows remapped for uncorrectable errors (> {limit})"
    return "pass", "no pending or failed row remapping"


def _retired(j: Judge, g):
    r = g["retired"]
    if r is None:
        return None
    total = r["single_bit"] + r["double_bit"]
    if r["pending"]:
        return "fail", f"page retirement pending ({total} retired; reset the GPU)"
    if total > j.t["retired_pages_max"]:
        return "fail", f"{total} retired pages (> {j.t['retired_pages_max']})"
    return "pass", f"{total} retired page(s)"


THROTTLE_FAIL = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}


def _throttle(j: Judge, g):
    th = g["throttle"]
    if all(v is None for v in th.values()):
        return None
    hard = [text for key, text in THROTTLE_FAIL.items() if th.get(key)]
    if hard:
        return "fail", ", ".join(hard) + " active (clocks cut)"
    if th.get("sw_thermal_slowdown"):
        return "warn", "SW thermal slowdown active"
    if th.get("sw_power_cap"):
        return ("warn" if j.t["sw_power_cap"] == "warn" else "pass"), "SW power cap active (at its power limit)"
    return "pass", "no clock slowdown"


def _pcie(j: Judge, g):
    p = g["pcie"]
    if p["width"] is None or p["max_width"] is None:
        return None
    link = f"PCIe Gen{p['gen']} x{p['width']} of Gen{p['max_gen']} x{p['max_width']}"
    # nvidia-smi(1): the current link generation and width "may be reduced when the GPU is not in use".
    idle = g["idle"] is not False
    if p["width"] < p["max_width"]:
        return ("warn" if idle else "fail"), link + (" (idle GPU: may be power saving)" if idle else "")
    if p["gen"] is not None and p["max_gen"] is not None and p["gen"] < p["max_gen"] and not idle:
        return "fail", link
    return "pass", link + (" (idle)" if idle and p["gen"] != p["max_gen"] else "")


def _persistence(j: Judge, g):
    if g["persistence"] not in ("Enabled", "Disabled"):
        return None
    if g["persistence"] == "Disabled":
        return ("warn" if j.t["persistence_mode"] == "warn" else "pass"), "persistence mode disabled"
    return "pass", "persistence mode enabled"


def _gpu_smi_checks(j: Judge, gpus):
    _per_gpu(j, "gpu ecc", gpus, lambda g: _ecc(j, g), "ECC")
    _per_gpu(j, "gpu row remap", gpus, lambda g: _remap(j, g), "row remapping")
    _per_gpu(j, "gpu retired pages", gpus, lambda g: _retired(j, g), "page retirement")
    _per_gpu(j, "gpu throttle", gpus, lambda g: _throttle(j, g), "clock event reasons")
    _per_gpu(j, "gpu pcie", gpus, lambda g: _pcie(j, g), "PCIe link")
    _per_gpu(j, "gpu persistence", gpus, lambda g: _persistence(j, g), "persistence mode")
    raw = j.facts.get("nvlink")
    links = parse_nvlink_status((raw or {}).get("out") or "") if raw and raw["rc"] == 0 else {}
    if not any(links.values()):
        j.add("nvlink", "skip", "no NVLink on these GPUs" if raw and raw["rc"] == 0 else "nvidia-smi nvlink -s failed")
        return
    down = [f"GPU {gpu}: NVLink {n} inactive" for gpu, ls in links.items() for n, s in ls.items() if "inactive" in s]
    if down:
        j.add("nvlink", "fail", "; ".join(down))
    else:
        j.add("nvlink", "pass", f"{sum(len(ls) for ls in links.values())} NVLinks active on {len(links)} GPU(s)")


def _dcgm_check(j: Judge):
    level = j.t["dcgm_level"]
    if not level:
        j.add("dcgm diag", "skip", "dcgmi diag off (dcgm_level 0)")
        return
    raw = j.facts.get("dcgm")
    if raw is None:
        j.add("dcgm diag", "skip", "dcgmi not installed")
        return
    tests = parse_dcgmi_diag(raw.get("out") or "")
    if not tests:
        j.add("dcgm diag", "warn", f"dcgmi diag -r {level} gave no result ({_last_line(raw)})")
        return
    for status, word in (("fail", "failed"), ("warn", "warning")):
        bad = sorted({f"{t['name']} {word}" + (f" (GPU {t['gpus']})" if t["gpus"] not in (None, "") else "")
                      for t in tests if t["status"] == status})  # fmt: skip
        if bad:
            j.add("dcgm diag", status, f"dcgmi diag -r {level}: " + "; ".join(bad))
            return
    j.add("dcgm diag", "pass", f"dcgmi diag -r {level}: {len(tests)} results, none failed")


# ---- NIC counters and link flaps


def counter_checks(j: Judge, previous: dict | None):
    """Port error counters must not grow between two readings (this one and the last one kept in the state dir);
    the mlx5 hw_counters and the no-drop priority's ethtool pause counters are reported."""
    ports = j.facts.get("counters") or {}
    prio = j.t["nodrop_priority"]
    pause = {}
    for ifname, raw in (j.facts.get("ethtool") or {}).items():
        stats = parse_ethtool_stats((raw or {}).get("out") or "") if raw and raw["rc"] == 0 else {}
        pause[ifname] = {k: v for k, v in stats.items() if re.fullmatch(PAUSE_COUNTER.format(prio=prio), k)}
    j.reading = {"time": j.facts["time"], "boot_time": j.facts.get("boot_time"), "ports": ports, "pause": pause}
    j.deltas = {}
    prev_ok = (
        previous is not None
        and previous.get("schema") == STATE_SCHEMA
        and previous.get("boot_time") == j.facts.get("boot_time")
    )
    if not ports:
        j.add("port counters", "skip", "no RDMA port counters (no RDMA device)")
    elif not prev_ok:
        why = "first reading" if previous is None else "the last reading is from another boot or another format"
        j.add("port counters", "skip", f"{why}: {len(ports)} port(s) read, kept for the next run")
    else:
        grew, reset = [], []
        for port, now_counters in ports.items():
            old = (previous.get("ports") or {}).get(port)
            if old is None:
                continue
            delta = {}
            for group in ("counters", "hw_counters"):
                for name, value in now_counters.get(group, {}).items():
                    before = old.get(group, {}).get(name)
                    if before is None:
                        continue
                    if value < before:
                        reset.append(f"{port} {name}")
                        continue
                    if group == "counters" and name in j.t["error_counters"] and value > before:
                        grew.append(f"{port.replace(':', ' port ')}: {name} +{value - before}")
                    if (group == "counters" and name in j.t["error_counters"]) or name in j.t["report_counters"]:
                        delta[name] = value - before
            j.deltas[port] = delta
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(previous.get("time") or 0))
        if grew:
            j.add("port counters", "fail", "; ".join(grew) + f" (since {since})")
        elif reset:
            j.add("port counters", "skip", f"counters went back (reset?) on {', '.join(reset[:3])}: reading kept")
        else:
            reported = ", ".join(
                f"{p} {k} +{v}" for p, d in j.deltas.items() for k, v in d.items() if k in j.t["report_counters"] and v
            )
            j.add("port counters", "pass", f"no error counter grew on {len(ports)} port(s) since {since}"
                  + (f" (reported: {reported})" if reported else ""))  # fmt: skip
    exposed = {i: p for i, p in pause.items() if p}
    if not j.facts.get("ethtool"):
        j.add("pause counters", "skip", "no fabric interface to read")
    elif all(v is None for v in (j.facts.get("ethtool") or {}).values()):
        j.add("pause counters", "skip", "ethtool not installed")
    elif not exposed:
        j.add("pause counters", "skip", f"no per-priority pause counters for priority {prio} (driver or PFC off)")
    else:
        old = (previous.get("pause") or {}) if prev_ok else {}
        parts = []
        for ifname, values in exposed.items():
            base = old.get(ifname) or {}
            grown = {k: f" (+{v - base[k]})" if k in base and v >= base[k] else "" for k, v in values.items()}
            parts.append(ifname + " " + ", ".join(f"{k} {v}{grown[k]}" for k, v in values.items()))
        j.add("pause counters", "pass", "reported: " + "; ".join(parts))


def flap_checks(j: Judge):
    log = j.facts.get("log") or {}
    if "error" in log:
        j.add("link flaps", "skip", f"kernel log not readable ({log['error']})")
        return
    if not log.get("kernel"):
        j.add("link flaps", "skip", "the journal holds no kernel message of this boot (a container?)")
        return
    now = j.facts["time"]
    since = max(now - j.t["flap_window_s"], j.facts.get("boot_time") or 0)
    names = {i["name"] for i in j.config["interfaces"]} | {d["name"] for d in j.facts.get("rdma") or []}
    events = [e for e in link_events(parse_log(log.get("text") or ""), names) if e[0] >= since]
    hours = j.t["flap_window_s"] / 3600
    fail, warn = [], []
    for link, seen in sorted(outages(events, now).items()):
        longest = max((s for _, s, _ in seen["outages"]), default=0)
        if longest >= j.t["outage_max_s"]:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(seen["outages"], key=lambda o: o[1])[0]))
            ongoing = any(o for _, s, o in seen["outages"] if s == longest)
            fail.append(f"{link}: down {longest:.0f} s from {when}" + (" (still down)" if ongoing else ""))
        elif seen["flaps"] >= j.t["flap_max"]:
            fail.append(f"{link}: {seen['flaps']} link flaps in {hours:g} h")
        elif seen["flaps"]:
            warn.append(f"{link}: {seen['flaps']} short link flap(s) in {hours:g} h (longest {longest:.0f} s)")
    if fail:
        j.add("link flaps", "fail", "; ".join(fail + warn))
    elif warn:
        j.add("link flaps", "warn", "; ".join(warn))
    else:
        j.add("link flaps", "pass", f"no link flap in {hours:g} h on {', '.join(sorted(names))}")


def stack_checks(j: Judge):
    """The node's stack against the fleet's when it passed the ladder (baseline `stack`): each key that differs is
    one check at thresholds.stack_mismatch; without a baseline, what the node runs is reported."""
    now, base = j.facts.get("stack") or {}, (j.config.get("baseline") or {}).get("stack") or {}
    if not now:
        j.add("stack", "skip", "no version readable (no /proc/sys/kernel/osrelease, /etc/os-release or tools)")
        return
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


# --------------------------------------------------------------------------------------------- run


def evaluate(facts: dict, config: dict, previous: dict | None = None) -> Judge:
    j = Judge(facts, config)
    groups = facts.get("groups") or GROUPS
    if "fabric" in groups:
        fabric_checks(j)
    if "gpu" in groups:
        gpu_checks(j)
    if "counters" in groups:
        counter_checks(j, previous)
    if "flaps" in groups:
        flap_checks(j)
    if "stack" in groups:
        stack_checks(j)
    return j


def summary(checks: list[dict]) -> tuple[str, str]:
    """(status, one-line reason): the failing checks' details, else the warnings', else a count."""
    for status in ("fail", "warn"):
        bad = [c["detail"] for c in checks if c["status"] == status]
        if bad:
            reason = "; ".join(bad)
            return status, reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 3] + "..."
    passed = sum(c["status"] == "pass" for c in checks)
    skipped = sum(c["status"] == "skip" for c in checks)
    return "pass", f"{passed} checks passed" + (f", {skipped} skipped" if skipped else "")


def load_state(state_dir) -> dict | None:
    if not state_dir:
        return None
    try:
        return json.loads((Path(state_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def save_state(state_dir, reading: dict) -> str | None:
    """Keep this reading for the next run (atomic rename). Returns why not, or None."""
    path = Path(state_dir) / STATE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"schema": STATE_SCHEMA, **reading}))
        os.replace(tmp, path)
    except OSError as exc:
        return f"state dir {state_dir} not writable: {exc.strerror or exc}"
    return None


def run(config: dict, root="/", state_dir=None, only=None, tools=None, now=None, write_state=True) -> dict:
    """Check this node against `config`; the result (SCHEMA) with its status, exit code and one-line reason."""
    config = resolve(config)
    groups = tuple(only or GROUPS)
    bad = sorted(set(groups) - set(GROUPS))
    if bad:
        raise ConfigError(f"unknown check group(s) {', '.join(bad)} (known: {', '.join(GROUPS)})")
    facts = collect(config, root, tools, now, groups)
    previous = load_state(state_dir) if "counters" in groups else None
    j = evaluate(facts, config, previous)
    if j.reading is not None and state_dir and write_state:
        why = save_state(state_dir, j.reading)
        if why:
            j.notes.append(why)
    status, reason = summary(j.checks)
    devices = facts.get("rdma") or []
    rates = dict(j.rates)
    return {
        "schema": SCHEMA,
        "host": config.get("host") or socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(facts["time"])),
        "status": status,
        "exit": EXIT[status],
        "reason": reason,
        "groups": list(groups),
        "checks": j.checks,
        "notes": j.notes,
        "rail_speeds": rates,
        "speed": min((r for r in rates.values() if r is not None), default=None),
        # The fabric NICs' MACs: lldpd's default LLDP port id, which the ladder's cabling rung matches.
        "macs": {n: f["address"] for n, f in (facts.get("nic") or {}).items() if f.get("address")},
        "rdma": {"state": "present" if devices else "none", "devices": devices},
        "stack": facts.get("stack") or {},
        "counters": {
            "ports": (j.reading or {}).get("ports") or {},
            "deltas": j.deltas,
            "pause": (j.reading or {}).get("pause") or {},
        },
    }


# --------------------------------------------------------------------------------------------- Slurm

# The prefix of the drain reasons this command sets: only a node drained with it is resumed by it (a node an
# operator drained keeps its reason and its state).
SLURM_REASON = "rdma-node-check: "


def parse_scontrol_node(text: str) -> dict:
    """`scontrol show node NAME --oneliner` -> {"state": "IDLE+DRAIN", "reason": "maintenance by hand",
    "reason_set": "root@2026-11-26T11:48:04"} (who set the reason and when, Slurm's `[user@time]` suffix; None
    without). The slurm role reads the same line (module_utils/slurm/conf.py node_state)."""
    state = re.search(r"\bState=(\S+)", text or "")
    found = re.search(r"\bReason=(.*?)(?=\s+[A-Za-z]+=|$)", text or "")
    reason = found.group(1).strip() if found else ""
    by = re.fullmatch(r"(.*?)\s*\[([^\]\s]+@[^\]\s]+)\]", reason)
    return {
        "state": state.group(1) if state else "",
        "reason": by.group(1) if by else reason,
        "reason_set": by.group(2) if by else None,
    }


def slurm_action(result: dict, node: dict) -> tuple[str, str] | None:
    """What Slurm's health check does with this node's result: ("drain", reason), ("resume", why) or None.

    A failing node is drained with the failing checks as the reason (updated when the reason changed); a node this
    command drained is resumed once it passes (a warning passes); a node drained or down for another reason, a
    result that is an error (the check could not run), or a node already as it should be: nothing."""
    state, reason = (node.get("state") or "").upper(), node.get("reason") or ""
    ours = reason.startswith(SLURM_REASON)
    drained = "DRAIN" in state or "DOWN" in state or "FAIL" in state
    if result.get("status") == "fail":
        want = (SLURM_REASON + str(result.get("reason") or "failed"))[:REASON_MAX]
        if drained and not ours:
            return None
        return None if drained and reason == want else ("drain", want)
    if result.get("status") in ("pass", "warn") and ours and "DRAIN" in state:
        return ("resume", f"passes again ({result.get('status')}: {result.get('reason')})")
    return None


def prolog_exit(result: dict) -> int:
    """Slurm's Prolog exit status: non-zero keeps the job off this node (slurmd fails the launch, slurmctld requeues
    the job and drains the node, a no-op once slurm_apply drained it with the failing checks, so the health check
    resumes it later); only a failing node does that, not a warning nor a check that could not run."""
    return EXIT["fail"] if result.get("status") == "fail" else 0


def slurm_apply(tools: Tools, node_name: str, result: dict) -> str:
    """Read the node's state from slurmctld, drain or resume it (slurm_action); one line saying what was done."""
    shown = tools.run(["scontrol", "show", "node", "-o", node_name])
    if shown is None or shown["rc"] != 0:
        return f"slurm: node {node_name} not read ({_last_line(shown) if shown else 'scontrol not installed'})"
    action = slurm_action(result, parse_scontrol_node(shown["out"]))
    if action is None:
        return f"slurm: {node_name} left as it is"
    verb, text = action
    argv = ["scontrol", "update", f"NodeName={node_name}"]
    argv += ["State=DRAIN", f"Reason={text}"] if verb == "drain" else ["State=RESUME"]
    done = tools.run(argv)
    if done is None or done["rc"] != 0:
        return f"slurm: {verb} {node_name} failed ({_last_line(done) if done else 'scontrol not installed'})"
    return f"slurm: {'drained' if verb == 'drain' else 'resumed'} {node_name}: {text}"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 3, never 2 (2 means "this node failed")
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="rdma-node-check", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="/etc/rdma-llm/node-check.json", help="thresholds file (node_health role)")
    ap.add_argument("--root", default="/", help="where /sys and /proc are (a fake tree in tests)")
    ap.add_argument("--state-dir", default="/var/lib/rdma-llm", help="where the last counter reading is kept")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"check groups, comma-separated: {','.join(GROUPS)}")
    ap.add_argument("--dcgm-level", type=int, choices=range(5), help="dcgmi diag level (0 off), over the config's")
    ap.add_argument("--brief", action="store_true", help="print `<status>: <reason>` instead of the JSON")
    slurm = "as Slurm's HealthCheckProgram: drain this node on fail, resume it when it passes again"
    ap.add_argument("--slurm", action="store_true", help=slurm)
    prolog = (
        "as Slurm's Prolog: as --slurm, and exit 0 unless the node fails (a warning or a check that cannot run "
        "lets the job start)"
    )
    ap.add_argument("--slurm-prolog", action="store_true", help=prolog)
    ap.add_argument("--slurm-node", default="", help="the node's Slurm NodeName (default: the short hostname)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_config(args.config)
        if args.dcgm_level is not None:
            config["thresholds"]["dcgm_level"] = args.dcgm_level
        result = run(config, args.root, args.state_dir, [g for g in args.only.split(",") if g])
    except ConfigError as exc:
        error = {"schema": SCHEMA, "status": "error", "exit": EXIT_ERROR, "reason": str(exc)}
        print(f"error: {exc}" if args.brief else json.dumps(error))
        return prolog_exit(error) if args.slurm_prolog else EXIT_ERROR
    print(f"{result['status']}: {result['reason']}" if args.brief else json.dumps(result))
    if args.slurm or args.slurm_prolog:
        print(slurm_apply(Tools(), args.slurm_node or socket.gethostname().split(".")[0], result), file=sys.stderr)
    return prolog_exit(result) if args.slurm_prolog else result["exit"]


if __name__ == "__main__":
    raise SystemExit(main())
