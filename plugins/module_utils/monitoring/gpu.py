"""The GPUs' readings as metrics: utilisation, memory, temperature, power, SM clock, ECC errors and remapped rows,
one reading per GPU as NVML/nvidia-smi gives it (readings(): `nvidia-smi -q -x`, whose health fields node/parsers.py
already reads; the rest are read here from the same XML).

A host without a GPU says so, `rdma_llm_gpu_present 0`, and has no other GPU series; a field the driver reports as
N/A (a MIG GPU's utilisation, remapped rows before Ampere) is no sample, never a 0.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_nvidia_smi

SMI = "nvidia-smi -q -x"
METRICS = table(
    Metric("rdma_llm_gpu_present", "gauge", "", (), "1 when the host has a GPU nvidia-smi reads, 0 when not", SMI),
    Metric("rdma_llm_gpu_info", "gauge", "", ("gpu", "name", "pci", "driver"),
           "One per GPU, value 1: its product name, PCI bus id and driver", SMI),
    Metric("rdma_llm_gpu_utilization_ratio", "gauge", "ratio", ("gpu",),
           "Share of the last sample period a kernel ran on the GPU (0-1)", f"{SMI}: utilization/gpu_util"),
    Metric("rdma_llm_gpu_memory_used_bytes", "gauge", "bytes", ("gpu",),
           "Frame buffer memory in use", f"{SMI}: fb_memory_usage/used"),
    Metric("rdma_llm_gpu_memory_total_bytes", "gauge", "bytes", ("gpu",),
           "Frame buffer memory", f"{SMI}: fb_memory_usage/total"),
    Metric("rdma_llm_gpu_temperature_celsius", "gauge", "celsius", ("gpu",),
           "GPU core temperature", f"{SMI}: temperature/gpu_temp"),
    Metric("rdma_llm_gpu_power_watts", "gauge", "watts", ("gpu",),
           "Power draw (instant where the driver reports it, else its power_draw)",
           f"{SMI}: gpu_power_readings/instant_power_draw or power_readings/power_draw"),
    Metric("rdma_llm_gpu_sm_clock_hertz", "gauge", "hertz", ("gpu",), "SM clock", f"{SMI}: clocks/sm_clock"),
    Metric("rdma_llm_gpu_ecc_corrected_errors_total", "counter", "", ("gpu", "scope"),
           "Corrected ECC errors, SRAM and DRAM; scope volatile (since the driver loaded) or aggregate (lifetime)",
           f"{SMI}: ecc_errors/<scope>/*_correctable"),
    Metric("rdma_llm_gpu_ecc_uncorrected_errors_total", "counter", "", ("gpu", "scope"),
           "Uncorrected ECC errors, SRAM and DRAM; scope volatile or aggregate",
           f"{SMI}: ecc_errors/<scope>/*_uncorrectable*"),
    Metric("rdma_llm_gpu_remapped_rows", "gauge", "", ("gpu", "cause"),
           "Memory rows remapped, by the error that caused it (correctable, uncorrectable)",
           f"{SMI}: remapped_rows/remapped_row_corr, remapped_row_unc"),
    Metric("rdma_llm_gpu_remapped_rows_pending", "gauge", "", ("gpu",),
           "1 when a row remapping waits for a GPU reset", f"{SMI}: remapped_rows/remapped_row_pending"),
    Metric("rdma_llm_gpu_remapped_rows_failure", "gauge", "", ("gpu",),
           "1 when a row remapping failed (the GPU needs service)", f"{SMI}: remapped_rows/remapped_row_failure"),
)  # fmt: skip
# Where the driver puts the board's power draw: v13 (driver 570+) instant, v12 gpu_power_readings, v11 and before.
POWER = ("gpu_power_readings/instant_power_draw", "gpu_power_readings/power_draw", "power_readings/power_draw")
_SCALE = {"%": 0.01, "MiB": 2**20, "C": 1, "W": 1, "MHz": 1e6}


def quantity(text, unit: str):
    """`143771 MiB`, `35 C`, `80.99 W`, `345 MHz`, `7 %` in base units (bytes, celsius, watts, hertz, ratio);
    None for N/A, `[N/A]`, `Not Supported` or another unit."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(\S+)\s*", str(text or ""))
    if not m or m.group(2) != unit:
        return None
    value = round(float(m.group(1)) * _SCALE[unit], 6)
    return int(value) if value.is_integer() else value


def _first(gpu, unit: str, *paths):
    for path in paths:
        value = quantity(gpu.findtext(path), unit)
        if value is not None:
            return value
    return None


def _sum(block: dict | None, *keys):
    """The sum of an ECC block's counters; None when any is N/A (a partial sum would read as a count)."""
    if not block:
        return None
    values = [block.get(k) for k in keys]
    return None if None in values else sum(values)


def readings(text: str) -> list | None:
    """`nvidia-smi -q -x` -> one dict per GPU (nvidia-smi's order, the index parse_nvidia_smi gives it); None when
    the XML does not parse. parse_nvidia_smi reads the health fields, the gauges come from the same <gpu>."""
    parsed = parse_nvidia_smi(text)
    if parsed is None:
        return None
    nodes = ET.fromstring(str(text).strip()).findall("gpu")
    out = []
    for g in parsed["gpus"]:
        node = nodes[g["index"]]
        ecc = g.get("ecc") or {}
        remap = g.get("remap")
        out.append(
            {
                "index": g["index"],
                "name": g["name"],
                "pci": g["pci"],
                "driver": parsed.get("driver") or "",
                "utilization_ratio": _first(node, "%", "utilization/gpu_util"),
                "memory_used_bytes": _first(node, "MiB", "fb_memory_usage/used"),
                "memory_total_bytes": _first(node, "MiB", "fb_memory_usage/total"),
                "temperature_celsius": _first(node, "C", "temperature/gpu_temp"),
                "power_watts": _first(node, "W", *POWER),
                "sm_clock_hertz": _first(node, "MHz", "clocks/sm_clock"),
                "ecc_corrected": {
                    s: _sum(ecc.get(s), "sram_correctable", "dram_correctable") for s in ("volatile", "aggregate")
                },
                "ecc_uncorrected": {
                    s: _sum(ecc.get(s), "sram_uncorrectable", "dram_uncorrectable") for s in ("volatile", "aggregate")
                },
                "remap": remap,
            }
        )
    return out


GAUGES = ("utilization_ratio", "memory_used_bytes", "memory_total_bytes", "temperature_celsius", "power_watts",
          "sm_clock_hertz")  # fmt: skip


def samples(gpus: list | None) -> list:
    """The samples of readings() (or dicts of the same keys, from NVML); no GPU (None or []): present 0 only."""
    if not gpus:
        return [("rdma_llm_gpu_present", {}, 0)]
    out = [("rdma_llm_gpu_present", {}, 1)]
    for g in gpus:
        gpu = {"gpu": str(g["index"])}
        info = {**gpu, "name": g.get("name") or "", "pci": g.get("pci") or "", "driver": g.get("driver") or ""}
        out.append(("rdma_llm_gpu_info", info, 1))
        out += [(f"rdma_llm_gpu_{k}", gpu, g[k]) for k in GAUGES if g.get(k) is not None]
        for kind in ("corrected", "uncorrected"):
            for scope, value in (g.get(f"ecc_{kind}") or {}).items():
                if value is not None:
                    out.append((f"rdma_llm_gpu_ecc_{kind}_errors_total", {**gpu, "scope": scope}, value))
        remap = g.get("remap")
        if remap:
            for cause in ("correctable", "uncorrectable"):
                if remap.get(cause) is not None:
                    out.append(("rdma_llm_gpu_remapped_rows", {**gpu, "cause": cause}, remap[cause]))
            out.append(("rdma_llm_gpu_remapped_rows_pending", gpu, int(bool(remap.get("pending")))))
            out.append(("rdma_llm_gpu_remapped_rows_failure", gpu, int(bool(remap.get("failure")))))
    return out


def textfile(gpus: list | None) -> str:
    return render(METRICS, samples(gpus))
