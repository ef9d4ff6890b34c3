"""The GPU checks: count and driver, peer memory, XIDs in the kernel log, ECC, row remapping, retired pages, clock
slowdowns, PCIe link, persistence mode, NVLink, each GPU's distance to its nearest fabric NIC, PCIe ACS, dcgmi diag.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import parse_log, xid_events
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import (
    parse_dcgmi_diag,
    parse_nvidia_smi,
    parse_nvlink_status,
    pci_key,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.pci import ACS_REDIRECT, PCI_LEVELS, pci_distance
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import last_line

NO_GPU = "no GPU"


def _gpus(j: Judge):
    """(parsed nvidia-smi or None, why not) — the GPUs nvidia-smi reports."""
    raw = j.facts.get("nvidia_smi")
    if raw is None:
        return None, "nvidia-smi not installed"
    if raw["rc"] != 0:
        return None, f"nvidia-smi -q -x failed: {last_line(raw)}"
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
    by_pci = {pci_key(g["pci"]): g["index"] for g in gpus}
    fatal, other = {}, {}
    for when, pci, xid, text in xid_events(parse_log(log.get("text") or "")):
        if when < since:
            continue
        index = by_pci.get(pci_key(pci))
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
        j.add("dcgm diag", "warn", f"dcgmi diag -r {level} gave no result ({last_line(raw)})")
        return
    for status, word in (("fail", "failed"), ("warn", "warning")):
        bad = sorted({f"{t['name']} {word}" + (f" (GPU {t['gpus']})" if t["gpus"] not in (None, "") else "")
                      for t in tests if t["status"] == status})  # fmt: skip
        if bad:
            j.add("dcgm diag", status, f"dcgmi diag -r {level}: " + "; ".join(bad))
            return
    j.add("dcgm diag", "pass", f"dcgmi diag -r {level}: {len(tests)} results, none failed")
