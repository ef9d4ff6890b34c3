"""The PCI bus read from sysfs with no driver: the guide's HGX recordings, the CI VM's own bus, a one-GPU VM."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import pci

from .helpers import from_lspci, from_nvidia_smi, from_sysfs_listing, function


def test_hgx_h100_has_eight_gpus_and_four_nvswitches(tmp_path):
    inv = pci.inventory(pci.read(from_lspci(tmp_path, "lspci_hgx_h100.txt")))
    assert [g["device"] for g in inv["gpus"]] == ["2330"] * 8
    assert [s["device"] for s in inv["nvswitches"]] == ["22a3"] * 4
    assert inv["nics"] == []
    assert inv["gpus"][0] == {"address": "0000:1b:00.0", "vendor": "10de", "device": "2330", "class": "0302",
                              "driver": ""}  # fmt: skip


def test_hgx_a100_nvswitches_are_bridges(tmp_path):
    inv = pci.inventory(pci.read(from_lspci(tmp_path, "lspci_hgx_a100.txt")))
    assert (len(inv["gpus"]), len(inv["nvswitches"])) == (8, 6)


def test_hgx_b200_shows_gpus_and_connectx7_but_no_nvswitch(tmp_path):
    inv = pci.inventory(pci.read(from_lspci(tmp_path, "lspci_hgx_b200.txt")))
    assert (len(inv["gpus"]), len(inv["nvswitches"]), len(inv["nics"])) == (8, 0, 4)
    assert {n["device"] for n in inv["nics"]} == {"1021"}


def test_ci_vm_has_no_nvidia_device(tmp_path):
    devices = pci.read(from_sysfs_listing(tmp_path))
    assert len(devices) == 6
    assert pci.inventory(devices) == {"gpus": [], "nvswitches": [], "nics": []}


def test_one_gpu_vm_reads_the_bound_driver(tmp_path):
    inv = pci.inventory(pci.read(from_nvidia_smi(tmp_path)))
    assert [(g["address"], g["device"], g["driver"]) for g in inv["gpus"]] == [("0000:00:06.0", "2335", "nvidia")]


def test_other_vendors_and_classes_are_not_this_stack(tmp_path):
    function(tmp_path, "0000:01:00.0", "0x10de", "0x228e", "0x040300")  # an NVIDIA GPU's HDMI audio function
    function(tmp_path, "0000:02:00.0", "0x8086", "0x1593", "0x020000")  # an Intel NIC
    function(tmp_path, "0000:03:00.0", "0x15b3", "0xa2dc", "0x080000")  # a BlueField's management function
    assert pci.inventory(pci.read(tmp_path)) == {"gpus": [], "nvswitches": [], "nics": []}


def test_no_bus_and_a_function_without_its_files(tmp_path):
    assert pci.read(tmp_path) == []
    (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:00:01.0").mkdir(parents=True)
    assert pci.read(tmp_path) == []
