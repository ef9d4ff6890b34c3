"""The tools' outputs parsed (plugins/module_utils/node/parsers.py), on real recordings."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import (
    parse_ethtool_info,
    parse_nvidia_smi,
    parse_os_release,
)

from tests.unit.plugins.module_utils.node.helpers import fixture


def test_parse_nvidia_smi_across_driver_generations() -> None:
    a100 = parse_nvidia_smi(fixture("nvidia_smi_a100_mig.xml"))
    assert a100["driver"] == "535.54.03" and len(a100["gpus"]) == 1
    gpu = a100["gpus"][0]
    assert (gpu["name"], gpu["pci"], gpu["idle"], gpu["persistence"]) == ("NVIDIA A100-SXM4-80GB", "00000000:01:00.0",
                                                                        False, "Disabled")  # fmt: skip
    assert gpu["pcie"] == {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16}
    assert gpu["remap"] is None and gpu["ecc"]["volatile"]["sram_uncorrectable"] == 0  # MIG: remapped rows N/A
    t4 = parse_nvidia_smi(fixture("nvidia_smi_t4.xml"))["gpus"][0]  # v11: clocks_throttle_reasons
    assert (
        t4["retired"] == {"single_bit": 0, "double_bit": 0, "pending": False} and t4["throttle"]["hw_slowdown"] is False
    )
    a10g = parse_nvidia_smi(fixture("nvidia_smi_a10g_idle.xml"))["gpus"][0]
    assert a10g["idle"] is True and a10g["remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False,
                                                      "failure": False}  # fmt: skip
    ada = parse_nvidia_smi(fixture("nvidia_smi_rtx4000_v13.xml"))["gpus"][0]  # v13: SRAM parity/SECDED, all N/A
    assert ada["ecc"]["volatile"]["sram_uncorrectable"] is None and ada["ecc_mode"] == "Disabled"
    assert parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver") is None


def test_ethtool_info_and_os_release_parse_real_outputs() -> None:
    mlx5 = parse_ethtool_info(fixture("ethtool_i_mlx5_cx4lx.txt"))
    assert mlx5 == {"driver": "mlx5_core", "version": "3.0-1 (January 2015)", "firmware": "14.23.1020"}
    assert parse_ethtool_info(fixture("ethtool_i_i40e.txt"))["firmware"] == "6.00 0x800036cb 1.1747.0"
    assert parse_ethtool_info("driver: veth\nversion: 1.0\nfirmware-version: \n")["firmware"] is None
    # Debian 12's /etc/os-release (this machine's), and one with NAME and VERSION_ID only.
    debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
    assert parse_os_release(debian) == "Debian GNU/Linux 12 (bookworm)"
    assert parse_os_release('NAME="Ubuntu"\nVERSION_ID="24.04"\n') == "Ubuntu 24.04"
