"""rdma-node-check's schemas, exit codes, check groups and thresholds (every one with its source), and its config
checked against them: what the command, the ladder's module and the controller's config filter (node/health.py)
share. Thresholds and their sources: DEFAULTS below and roles/node_health/README.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

SCHEMA = "rdma-llm-cluster/node-check/1"
CONFIG_SCHEMA = "rdma-llm-cluster/node-check-config/1"
STATE_SCHEMA = "rdma-llm-cluster/node-check-state/1"
STATE_FILE = "node-check-state.json"
# The last result the command printed, kept in its state dir for the metrics collector (monitoring/collect.py).
RESULT_FILE = "node-check-result.json"
STATUSES = ("pass", "warn", "fail", "skip")
EXIT = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}
EXIT_ERROR = 3  # the check could not run (Nagios' UNKNOWN): never read as "fail" by a scheduler
GROUPS = ("fabric", "gpu", "counters", "flaps", "stack")
REASON_MAX = 240

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
    # The lowest firmware each RDMA device model may run, by its sysfs hca_type (MT4129 is a ConnectX-7):
    # {"MT4129": "28.39.1002"}; a device below fails. None by default: the minimum is the driver's (each DOCA-OFED
    # and WinOF-2 release lists the firmware it supports per NIC), so the inventory pins it with the driver.
    "firmware_minimum": {},
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
FIRMWARE = re.compile(r"^\d+\.\d+\.\d+$")
# The no-drop priority's PFC counters as mlx5 names them (en_stats.c, pport_per_prio_pfc_stats_desc), reported
# here and sampled by the training watch (train_launch.poll_tail).
PAUSE_COUNTER = "(rx|tx)_prio{prio}_pause(_duration)?"


class ConfigError(ValueError):
    """A config the command cannot check against (exit 3)."""


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
    minimum = thresholds["firmware_minimum"]
    if not isinstance(minimum, dict) or not all(isinstance(v, str) and FIRMWARE.match(v) for v in minimum.values()):
        raise ConfigError("config: thresholds.firmware_minimum must map an hca_type to a firmware like 28.39.1002")
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
