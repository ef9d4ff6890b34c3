"""The slurm role's host probe (plugins/module_utils/slurm/probe.py) on recorded outputs and fake host trees.

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.nodes import node_line
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.probe import (
    cgroup_state,
    cpu_topology,
    host_facts,
    memory_mb,
    munge_stale,
    parse_units,
)

from tests.unit.plugins.module_utils.slurm.samples import fixture

pytestmark = pytest.mark.lint


@pytest.mark.parametrize(
    ("sample", "mode", "usable", "why"),
    [
        ("mountinfo_host_hybrid.txt", "hybrid", True, ""),
        ("mountinfo_lab_privileged.txt", "hybrid", True, ""),
        (
            "mountinfo_podman_unprivileged.txt",
            "v1",
            False,
            "cgroup v1 controller(s) freezer, cpuset, memory, devices mounted read-only",
        ),
        ("mountinfo_v1_legacy.txt", "v1", True, ""),
        ("mountinfo_v2_unified.txt", "v2", True, ""),
    ],
)
def test_cgroup_mode_from_recorded_mountinfo(sample: str, mode: str, usable: bool, why: str) -> None:
    assert cgroup_state(fixture(sample)) == {"mode": mode, "usable": usable, "why": why}


def test_cgroup_mode_without_cgroups_or_with_a_read_only_v2() -> None:
    assert cgroup_state("") == {"mode": "none", "usable": False, "why": "no cgroup file system on /sys/fs/cgroup"}
    ro = fixture("mountinfo_v2_unified.txt").replace(" rw,nosuid", " ro,nosuid", 1)
    assert cgroup_state(ro) == {
        "mode": "v2",
        "usable": False,
        "why": "/sys/fs/cgroup (cgroup v2) is mounted read-only",
    }
    # A controller the plugins need, missing: named.
    no_freezer = "".join(line for line in fixture("mountinfo_v1_legacy.txt").splitlines(True) if "freezer" not in line)
    assert cgroup_state(no_freezer)["why"] == "cgroup v1 controller(s) freezer not mounted"


def test_cpus_and_memory_as_slurmd_counts_them() -> None:
    """The same machine's `slurmd -C` (recorded): CPUs=2 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
    RealMemory=24105."""
    recorded = dict(part.split("=", 1) for part in fixture("slurmd_C_lab.txt").split() if "=" in part)
    shape = cpu_topology(fixture("cpuinfo_lab.txt"))
    assert shape == {"cpus": 2, "sockets": 1, "cores_per_socket": 2, "threads_per_core": 1}
    assert (shape["cpus"], shape["cores_per_socket"], shape["threads_per_core"]) == (
        int(recorded["CPUs"]),
        int(recorded["CoresPerSocket"]),
        int(recorded["ThreadsPerCore"]),
    )
    assert memory_mb(fixture("meminfo_lab.txt")) == int(recorded["RealMemory"])
    assert memory_mb("MemTotal:        1048575 kB\n") == 1023  # rounded down, as slurmd does


def test_cpu_shape_unknown_where_cpuinfo_does_not_say() -> None:
    """ARM's /proc/cpuinfo has no physical id / core id: CPUs only (slurmd then counts the shape itself)."""
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n"
    assert cpu_topology(arm) == {"cpus": 2, "sockets": None, "cores_per_socket": None, "threads_per_core": None}
    assert node_line("n1", "10.0.0.1", {"cpus": 2, "sockets": None, "memory_mb": 100}, 0) == (
        "NodeName=n1 NodeAddr=10.0.0.1 CPUs=2 RealMemory=100 State=UNKNOWN"
    )


def fake_host(root: Path, gpus: int = 0, nvml: bool = False, slurm_nvml: bool = False, box: str = "") -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(fixture("cpuinfo_lab.txt"))
    (root / "proc/meminfo").write_text(fixture("meminfo_lab.txt"))
    (root / "proc/self/mountinfo").write_text(fixture("mountinfo_lab_privileged.txt"))
    (root / "dev").mkdir()
    for i in range(gpus):
        (root / f"proc/driver/nvidia/gpus/0000:{i + 0x18:02x}:00.0").mkdir(parents=True)
        (root / f"dev/nvidia{i}").touch()
    for extra in ("nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (root / "dev" / extra).touch()
    if nvml:
        (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
        (root / "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").touch()
    if slurm_nvml:
        (root / "usr/lib/x86_64-linux-gnu/slurm-wlm").mkdir(parents=True)
        (root / "usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so").touch()
    if box:
        (root / "run/systemd").mkdir(parents=True)
        (root / "run/systemd/container").write_text(box + "\n")
    return root


def test_host_facts_of_a_lab_host(tmp_path: Path) -> None:
    got = host_facts(str(fake_host(tmp_path, box="podman")), "lab-node1.lab", {"munge": "active"})
    assert got == {
        "hostname": "lab-node1",
        "cpus": 2,
        "sockets": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "memory_mb": 24105,
        "cgroup": {"mode": "hybrid", "usable": True, "why": ""},
        "container": "podman",
        "gpus": 0,
        "gpu_devices": [],
        "nvml": False,
        "slurm_nvml": False,
        "units": {"munge": "active"},
        "munge_key_stale": False,
    }


def test_host_facts_of_a_gpu_host(tmp_path: Path) -> None:
    """GPUs from /proc/driver/nvidia/gpus, device files in numeric order (nvidia10 after nvidia9), control nodes
    (nvidiactl, nvidia-uvm) left out, NVML and the Slurm build's plugin found where they are."""
    got = host_facts(str(fake_host(tmp_path, gpus=11, nvml=True, slurm_nvml=True)), "gpu1")
    assert got["gpus"] == 11 and got["nvml"] and got["slurm_nvml"] and got["container"] == ""
    assert got["gpu_devices"] == [f"/dev/nvidia{i}" for i in range(11)]


def test_the_daemons_from_one_systemctl_show() -> None:
    units = parse_units(fixture("systemctl_show_units_lab.txt"))
    assert units == {
        "munge": {"state": "active", "since": 916.795076},
        "slurmdbd": {"state": "inactive", "since": 0.0},
        "slurmctld": {"state": "inactive", "since": 0.0},
        "slurmd": {"state": "failed", "since": 953.120095},
    }
    # No answer at all (systemctl missing): nothing is taken for running.
    assert {u["state"] for u in parse_units("").values()} == {"unknown"}


def test_a_munge_key_written_after_munged_started_is_stale(tmp_path: Path) -> None:
    """A run that wrote the key and stopped before it restarted munged leaves munged on the old key: the next run
    must restart it even though the key file no longer changes."""
    key = tmp_path / "etc/munge/munge.key"
    key.parent.mkdir(parents=True)
    key.write_text("k" * 32)
    mtime = key.stat().st_mtime
    offset = mtime - 1000.0  # the key was written at monotonic second 1000
    assert munge_stale(str(tmp_path), {"state": "active", "since": 999.0}, offset)
    assert not munge_stale(str(tmp_path), {"state": "active", "since": 1001.0}, offset)
    assert not munge_stale(str(tmp_path), {"state": "inactive", "since": 0.0}, offset)
    assert not munge_stale(str(tmp_path / "none"), {"state": "active", "since": 999.0}, offset)
    assert host_facts(str(tmp_path), "h", {}, True)["munge_key_stale"] is True
