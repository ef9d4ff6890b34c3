"""The sysfs and /proc readers (plugins/module_utils/node/sysfs.py) on fake trees and the recorded H100 node."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import (
    gpus_proc,
    modules,
    nic,
    rdma_devices,
    rdma_drivers,
)

from tests.unit.plugins.module_utils.node.helpers import FIX, lab_root


def test_node_readers_on_fake_trees(tmp_path: Path) -> None:
    # A physical SR-IOV VF on mlx5 with an RDMA device, modules and two GPUs.
    net = tmp_path / "sys/class/net/ens1f0v0"
    (net / "device").mkdir(parents=True)
    (tmp_path / "drivers/mlx5_core").mkdir(parents=True)
    (net / "device/driver").symlink_to(tmp_path / "drivers/mlx5_core")
    (net / "device/physfn").mkdir()
    for name, value in {"operstate": "up", "carrier": "1", "mtu": "9000", "speed": "100000"}.items():
        (net / name).write_text(value + "\n")
    ib = tmp_path / "sys/class/infiniband/mlx5_2/device"
    ib.mkdir(parents=True)
    (ib / "driver").symlink_to(tmp_path / "drivers/mlx5_core")
    (ib / "physfn").mkdir()
    (tmp_path / "proc/driver/nvidia/gpus/0000:17:00.0").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/gpus/0000:65:00.0").mkdir()
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    (tmp_path / "proc/modules").write_text("mlx5_ib 466944 0 - Live 0x0\nib_core 458752 8 mlx5_ib, Live 0x0\n")
    seen = nic(tmp_path, "ens1f0v0")
    assert seen["speed_mbps"] == 100000 and seen["driver"] == "mlx5_core" and seen["sriov_vf"] and not seen["virtual"]
    assert rdma_drivers(tmp_path) == {"mlx5_2": {"driver": "mlx5_core", "sriov_vf": True}}
    assert modules(tmp_path) == ["ib_core", "mlx5_ib"]
    assert gpus_proc(tmp_path)["count"] == 2 and "550.54.15" in gpus_proc(tmp_path)["driver"]
    # A veth (the lab): no device link, no readable speed, no /proc/modules.
    lab = lab_root(tmp_path)
    veth = nic(lab, "rdma0")
    assert veth["speed_mbps"] is None and veth["virtual"] and veth["kind"] == "virtual"
    assert modules(lab) is None and nic(lab, "ens192") == {"name": "ens192", "exists": False}
    # The recorded H100 node's ports, as the one sysfs reader returns them (rdma_stack records the same).
    h100 = rdma_devices(FIX / "sysfs_h100")
    assert [(d["name"], d["fw_ver"], d["ports"][0]["state"], d["ports"][0]["rate"]) for d in h100] == [
        ("mlx5_0", "28.41.1000", "4: ACTIVE", "400 Gb/sec (4X NDR)"),
        ("mlx5_bond_0", "32.38.3056", "4: ACTIVE", "200 Gb/sec (2X NDR)"),
    ]
