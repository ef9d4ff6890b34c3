"""GPUs and fabric NICs on PCI (plugins/module_utils/node/pci.py): each GPU's distance to its nearest fabric NIC
and the ACS control of the PCIe switch ports above them, on fake sysfs trees; as the GPU checks judge them."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.collect import collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.pci import (
    ACS_BITS,
    PCI_LEVELS,
    acs_control,
    pci_bdf,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import evaluate

from tests.unit.plugins.module_utils.node.helpers import FIX, NOW, FakeTools, checks, config, one

# ------------------------------------------------------------------------------------ GPU <-> NIC affinity


def pci_tree(tmp_path: Path, gpus: dict[str, tuple[str, int]], nic: tuple[str, int]) -> Path:
    """A fake sysfs: each device a directory under sys/devices at its path (host bridge first) with its numa_node,
    linked from sys/bus/pci/devices/<bdf> as the kernel links it (relative); the NIC also from
    sys/class/net/rdma0/device; the GPUs registered with the driver (/proc/driver/nvidia/gpus/<bdf>)."""
    root = tmp_path / "root"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/class/net/rdma0").mkdir(parents=True)
    for path, numa in [*gpus.values(), nic]:
        device = root / "sys/devices" / path
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{numa}\n")
        (root / "sys/bus/pci/devices" / device.name).symlink_to(Path("../../../devices") / path)
    (root / "sys/class/net/rdma0/device").symlink_to(Path("../../../devices") / nic[0])
    for bdf in gpus:
        (root / "proc/driver/nvidia/gpus" / bdf).mkdir(parents=True)
    return root


def test_each_gpu_against_its_nearest_fabric_nic(tmp_path: Path) -> None:
    switch = "pci0000:17/0000:17:01.0/0000:18:00.0"  # a root port and a PCIe switch's upstream port
    gpus = {
        "0000:1a:00.0": (f"{switch}/0000:19:00.0/0000:1a:00.0", 0),  # the NIC's switch, another downstream port
        "0000:1e:00.0": (f"{switch}/0000:19:02.0/0000:1c:00.0/0000:1d:00.0/0000:1e:00.0", 0),  # a switch below it
        "0000:2a:00.0": ("pci0000:17/0000:17:02.0/0000:2a:00.0", 0),  # another root port of the host bridge
        "0000:81:00.0": ("pci0000:80/0000:80:01.0/0000:81:00.0", 0),  # another host bridge, same NUMA node
        "0000:c1:00.0": ("pci0000:c0/0000:c0:01.0/0000:c1:00.0", 1),  # the other socket
    }
    root = pci_tree(tmp_path, gpus, (f"{switch}/0000:19:01.0/0000:1b:00.0", 0))
    facts = collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    j = evaluate(facts, config())
    got = [(c["status"], c["value"]) for c in checks(j, "gpu nic affinity")]
    assert got == [("pass", "PIX"), ("pass", "PXB"), ("warn", "PHB"), ("warn", "NODE"), ("fail", "SYS")], got
    assert checks(j, "gpu nic affinity")[4]["detail"] == (
        "GPU 4 (0000:c1:00.0): nearest fabric NIC rdma0 at SYS, beyond NODE: give each GPU a NIC on its side"
    )
    phb = checks(j, "gpu nic affinity")[2]["detail"]
    assert "NCCL's default NCCL_NET_GDR_LEVEL (PXB) leaves GPUDirect RDMA off" in phb, phb
    # Thresholds move the lines: PHB accepted, anything beyond PIX failed.
    loose = config(thresholds={"gpu_nic_warn_above": "PHB"})
    assert [c["status"] for c in checks(evaluate(facts, loose), "gpu nic affinity")][2] == "pass"
    strict = config(thresholds={"gpu_nic_fail_above": "PIX"})
    assert [c["status"] for c in checks(evaluate(facts, strict), "gpu nic affinity")][:2] == ["pass", "fail"]


def test_affinity_levels_are_nvidia_smis_own() -> None:
    """The levels the affinity check names are those `nvidia-smi topo -m` prints in its legend (the H200 recording),
    in its order from farthest to nearest, so a warning reads as the tool an operator checks it with."""
    legend = re.findall(r"^  (\S+) += Connection", (FIX / "nvidia_smi_topo_h200_1gpu.txt").read_text(), re.M)
    assert [level for level in legend if level != "NV#"] == list(reversed(PCI_LEVELS)), legend


def test_affinity_skips_without_pci_places(tmp_path: Path) -> None:
    # The lab: a veth is no PCI device; nvidia-smi's address in its own form is found in sysfs's.
    assert pci_bdf("00000000:18:00.0") == "0000:18:00.0" and pci_bdf("0000:C1:00.0") == "0000:c1:00.0"
    root = pci_tree(tmp_path, {"0000:1a:00.0": ("pci0000:17/0000:17:01.0/0000:1a:00.0", 0)}, ("virtual/net", -1))
    j = evaluate(collect(config(), root, FakeTools({}), NOW, groups=("gpu",)), config())
    assert one(j, "gpu nic affinity")["status"] == "skip"
    assert one(j, "gpu nic affinity")["detail"] == "no fabric NIC on PCI (a virtual interface has no PCI place)"


# ------------------------------------------------------------------------------------ PCIe ACS


def acs_config(control: int | None, before: int = 0x0001) -> bytes:
    """4096 bytes of PCIe config space (what root reads from sysfs `config`): at 0x100 an extended capability of
    ID `before` (AER, 0x0001) pointing to 0x148, there the ACS capability (0x000D, version 1, last) with the
    control register `control` at +6; no ACS capability at all where control is None."""
    space = bytearray(4096)
    if control is None:
        space[0x100:0x104] = (before | 1 << 16).to_bytes(4, "little")
        return bytes(space)
    space[0x100:0x104] = (before | 1 << 16 | 0x148 << 20).to_bytes(4, "little")
    space[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")
    space[0x14C:0x14E] = (0x007F).to_bytes(2, "little")  # ACS capability: every feature there
    space[0x14E:0x150] = control.to_bytes(2, "little")
    return bytes(space)


def test_acs_control_read_from_config_space() -> None:
    # lspci's `ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmplRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-` is 0x001D.
    got = acs_control(acs_config(0x001D))
    assert got == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmplRedir": True, "UpstreamFwd": True,
                   "EgressCtrl": False, "DirectTrans": False}  # fmt: skip
    assert acs_control(acs_config(0)) == dict.fromkeys(ACS_BITS, False)
    assert acs_control(acs_config(None)) is None  # no ACS capability
    assert acs_control(acs_config(0x1D)[:64]) is None  # read as non-root: the header only
    loop = bytearray(acs_config(None))
    loop[0x100:0x104] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # a capability pointing to itself
    assert acs_control(bytes(loop)) is None


def test_acs_redirect_on_a_switch_port_above_a_gpu_warns(tmp_path: Path) -> None:
    switch = "pci0000:17/0000:17:01.0/0000:18:00.0"  # a root port and a PCIe switch's upstream port
    gpus = {"0000:1a:00.0": (f"{switch}/0000:19:00.0/0000:1a:00.0", 0)}
    root = pci_tree(tmp_path, gpus, (f"{switch}/0000:19:01.0/0000:1b:00.0", 0))
    ports = {"0000:18:00.0": 0, "0000:19:00.0": 0x001D, "0000:19:01.0": 0x0001}
    for bdf, control in ports.items():
        (root / "sys/bus/pci/devices" / bdf).resolve().mkdir(parents=True, exist_ok=True)
        if not (root / "sys/bus/pci/devices" / bdf).exists():
            path = next(p for p in (root / "sys/devices").rglob(bdf))
            (root / "sys/bus/pci/devices" / bdf).symlink_to(path)
        (root / "sys/bus/pci/devices" / bdf / "config").write_bytes(acs_config(control))
    facts = collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert sorted(facts["pci_acs"]) == sorted(ports)  # the switch's ports; not the root port 0000:17:01.0
    acs = checks(evaluate(facts, config()), "pcie acs")
    assert [(c["status"], c["detail"].split(":")[0:4]) for c in acs] == [
        ("warn", ["0000", "19", "00.0", " ACS ReqRedir+ CmplRedir+"])
    ]
    assert "setpci -s 0000:19:00.0 ECAP_ACS+0x6.w=0000" in acs[0]["detail"]
    assert [c["status"] for c in checks(evaluate(facts, config(thresholds={"pcie_acs": "fail"})), "pcie acs")] == [
        "fail"
    ]
    assert [c["status"] for c in checks(evaluate(facts, config(thresholds={"pcie_acs": "report"})), "pcie acs")] == [
        "pass"
    ]
    # Redirect off everywhere: one pass line; config space unreadable (not root): skipped, said why.
    (root / "sys/bus/pci/devices/0000:19:00.0/config").write_bytes(acs_config(0x0011))
    facts = collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert [(c["status"], c["detail"]) for c in checks(evaluate(facts, config()), "pcie acs")] == [
        ("pass", "no ACS redirect on the 3 PCIe switch port(s) above the GPUs and NICs")
    ]
    for bdf in ports:
        (root / "sys/bus/pci/devices" / bdf / "config").write_bytes(acs_config(0x001D)[:64])
    facts = collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert [(c["status"], c["detail"]) for c in checks(evaluate(facts, config()), "pcie acs")] == [
        ("skip", "the PCIe extended config space is unreadable (not root?)")
    ]
