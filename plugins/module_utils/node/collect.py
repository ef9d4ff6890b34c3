"""Read the node for the check groups asked: sysfs and /proc under `root` and the tools' raw outputs (the checks
parse and judge them)."""

from __future__ import annotations

import time
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import GROUPS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import read_kernel_log
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_nvidia_smi
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.pci import pci_acs, pci_bdf, pci_places
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.stack import stack
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import (
    boot_time,
    gpus_proc,
    modules,
    nic,
    peermem,
    port_counters,
    rdma_devices,
    rdma_drivers,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import Tools


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
