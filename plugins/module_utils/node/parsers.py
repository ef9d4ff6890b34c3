"""The node's tools' outputs parsed: ibv_devinfo, sminfo, nvidia-smi -q -x, nvidia-smi nvlink -s, dcgmi diag -j,
ethtool -S and -i, /etc/os-release, dpkg's status file. Each on the tool's own format, tested on recordings
(tests/fixtures/node_check/; dpkg's in tests/unit/plugins/module_utils/gpu/test_node.py).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import number


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
                port[key] = number(value.split()[0])
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


def pci_key(text):
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


def parse_dpkg_status(text: str) -> tuple[dict[str, str], list[str]]:
    """({package: version} installed, [packages held]) from dpkg's status file (stanzas of `Field: value`;
    Status is `<want> <flag> <state>`: `hold ok installed` is installed and held)."""
    installed, held = {}, []
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name, status = fields.get("Package"), fields.get("Status", "").split()
        if not name or len(status) != 3:
            continue
        arch = fields.get("Architecture", "")
        name = name if arch in ("", "all", "amd64", "arm64") else f"{name}:{arch}"
        if status[2] == "installed":
            installed[name] = fields.get("Version", "")
        if status[0] == "hold":
            held.append(name)
    return installed, sorted(set(held))


def upstream(version: str) -> str:
    """A Debian version's upstream part (Debian Policy 5.6.12): `1:580.95.05-0ubuntu1` -> `580.95.05`."""
    version = version.partition(":")[2] if ":" in version else version
    return version.rpartition("-")[0] if "-" in version else version
