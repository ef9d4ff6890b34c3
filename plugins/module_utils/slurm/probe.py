"""The slurm role's host probe: what Slurm must know of one host, read from its /proc, /sys and /dev.

Plain Python (stdlib only): the host module rdma_llm.cluster.slurm_host runs it on each Slurm host; pytest checks it on
recorded outputs and fake host trees (tests/unit/plugins/module_utils/slurm/test_probe.py). CPUs and memory as slurmd
counts them, the cgroup mode (from /proc/self/mountinfo) and whether Slurm may create cgroups there, GPUs, NVML and
the Slurm build's NVML plugin, the daemons' units and whether munged runs with an older key than its file.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping

# The cgroup v1 controllers Slurm's cgroup plugins write to: freezer (proctrack/cgroup), cpuset (ConstrainCores),
# memory (ConstrainRAMSpace, jobacct_gather/cgroup), devices (ConstrainDevices, GPUs).
CGROUP_V1_NEEDED = ("freezer", "cpuset", "memory", "devices")
# Where a driver install puts NVML (what Slurm's gpu/nvml plugin dlopen()s); CUDA's stubs/ directory does not count.
NVML_GLOBS = (
    "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "usr/lib64/libnvidia-ml.so.1",
    "usr/lib/libnvidia-ml.so.1",
)
# The Slurm build's NVML plugin: Debian/Ubuntu (slurm-wlm) and RPM layouts. Debian 12's 22.05.8 ships none.
SLURM_NVML_GLOBS = ("usr/lib/*/slurm-wlm/gpu_nvml.so", "usr/lib64/slurm/gpu_nvml.so", "usr/lib/slurm/gpu_nvml.so")
UNITS = ("munge", "slurmdbd", "slurmctld", "slurmd")
# What the module asks systemd of each unit, in one `systemctl show` (its blocks come in the units' order).
UNIT_PROPERTIES = ("ActiveState", "ActiveEnterTimestampMonotonic")
MUNGE_KEY = "etc/munge/munge.key"


def parse_units(text: str, names: tuple[str, ...] = UNITS) -> dict[str, dict]:
    """`systemctl show -p ActiveState -p ActiveEnterTimestampMonotonic <names>` -> name -> {state, since}: the
    unit's state (a unit systemd does not know is `inactive`) and the CLOCK_MONOTONIC seconds it last became active
    (0: never)."""
    blocks = ((text or "").strip().split("\n\n") + [""] * len(names))[: len(names)]
    out = {}
    for name, block in zip(names, blocks, strict=True):
        props = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        since = props.get("ActiveEnterTimestampMonotonic", "0")
        out[name] = {
            "state": props.get("ActiveState") or "unknown",
            "since": int(since) / 1e6 if since.isdigit() else 0.0,
        }
    return out


def munge_stale(root: str, munge: Mapping, wall_minus_monotonic: float) -> bool:
    """munged runs with an older key than the file's: a run wrote the key and stopped before it restarted munged (it
    reads the key only at start), so every credential this host makes fails elsewhere (`Protocol authentication
    error`). wall_minus_monotonic: time.time() - time.monotonic() on the host, to put the file's mtime on
    systemd's clock."""
    if munge.get("state") != "active" or not munge.get("since"):
        return False
    try:
        mtime = os.stat(os.path.join(root, MUNGE_KEY)).st_mtime
    except OSError:
        return False
    return mtime - wall_minus_monotonic > float(munge["since"])


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def parse_mountinfo(text: str) -> list[dict]:
    """proc(5) /proc/self/mountinfo: one dict per mount with its point, per-mount options, type and super options."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(after) < 3:
            continue
        mounts.append(
            {
                "point": fields[4],
                "options": fields[5].split(","),
                "fstype": after[0],
                "super": after[2].split(","),
            }
        )
    return mounts


def cgroup_state(mountinfo: str) -> dict:
    """The host's cgroup mode and whether Slurm's cgroup plugins can create its cgroups there.

    mode: `v2` (cgroup2 on /sys/fs/cgroup), `hybrid` (v1 controllers and cgroup2 on /sys/fs/cgroup/unified, as on
    this project's machines), `v1` or `none`. usable: the controllers Slurm writes to are mounted read-write (a
    container that may not create cgroups mounts them read-only: podman's non-privileged systemd mode).
    """
    mounts = {}  # the last mount on a point hides the earlier ones
    for m in parse_mountinfo(mountinfo):
        if m["point"] == "/sys/fs/cgroup" or m["point"].startswith("/sys/fs/cgroup/"):
            mounts[m["point"]] = m
    root = mounts.get("/sys/fs/cgroup")
    if root is not None and root["fstype"] == "cgroup2":
        usable = "rw" in root["options"]
        why = "" if usable else "/sys/fs/cgroup (cgroup v2) is mounted read-only"
        return {"mode": "v2", "usable": usable, "why": why}
    v1 = {}
    for m in mounts.values():
        if m["fstype"] == "cgroup":
            for ctrl in m["super"]:
                v1[ctrl] = m
    if not v1:
        return {"mode": "none", "usable": False, "why": "no cgroup file system on /sys/fs/cgroup"}
    unified = mounts.get("/sys/fs/cgroup/unified")
    mode = "hybrid" if unified is not None and unified["fstype"] == "cgroup2" else "v1"
    missing = [c for c in CGROUP_V1_NEEDED if c not in v1]
    readonly = [c for c in CGROUP_V1_NEEDED if c in v1 and "rw" not in v1[c]["options"]]
    why = "; ".join(
        part
        for part in (
            f"cgroup v1 controller(s) {', '.join(readonly)} mounted read-only" if readonly else "",
            f"cgroup v1 controller(s) {', '.join(missing)} not mounted" if missing else "",
        )
        if part
    )
    return {"mode": mode, "usable": not why, "why": why}


def cpu_topology(cpuinfo: str) -> dict:
    """CPUs, sockets, cores per socket and threads per core from /proc/cpuinfo, as slurmd -C counts them on x86;
    the three shape fields are None where cpuinfo does not say (ARM) or does not add up."""
    cpus, sockets, cores = 0, set(), set()
    phys = None
    for line in cpuinfo.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            cpus += 1
            phys = None
        elif key == "physical id":
            phys = value
            sockets.add(value)
        elif key == "core id":
            cores.add((phys, value))
    shape: dict[str, int | None] = {"sockets": None, "cores_per_socket": None, "threads_per_core": None}
    if sockets and cores and cpus % len(cores) == 0 and len(cores) % len(sockets) == 0:
        shape = {
            "sockets": len(sockets),
            "cores_per_socket": len(cores) // len(sockets),
            "threads_per_core": cpus // len(cores),
        }
    return {"cpus": cpus, **shape}


def memory_mb(meminfo: str) -> int:
    """MemTotal in MiB, rounded down: the RealMemory slurmd reports (slurmd -C)."""
    match = re.search(r"^MemTotal:\s+(\d+)\s+kB", meminfo, re.M)
    return int(match.group(1)) // 1024 if match else 0


def container(root: str = "/") -> str:
    """The container manager systemd detected (/run/systemd/container: podman, docker, lxc ...), else ''."""
    named = (_read(os.path.join(root, "run/systemd/container")) or "").strip()
    if named:
        return named
    for marker, name in ((".containerenv", "podman"), (".dockerenv", "docker")):
        if os.path.exists(os.path.join(root, marker)):
            return name
    return ""


def host_facts(
    root: str = "/", hostname: str = "", units: Mapping[str, str] | None = None, stale_key: bool = False
) -> dict:
    """What the role needs to know of one host. Every path starts at `root` (tests use fake trees)."""
    gpu_dir = os.path.join(root, "proc/driver/nvidia/gpus")
    gpus = len(os.listdir(gpu_dir)) if os.path.isdir(gpu_dir) else 0
    devices = sorted(
        (p for p in glob.glob(os.path.join(root, "dev/nvidia*")) if re.fullmatch(r"nvidia\d+", os.path.basename(p))),
        key=lambda p: int(os.path.basename(p)[6:]),
    )
    return {
        "hostname": hostname.split(".")[0],
        **cpu_topology(_read(os.path.join(root, "proc/cpuinfo")) or ""),
        "memory_mb": memory_mb(_read(os.path.join(root, "proc/meminfo")) or ""),
        "cgroup": cgroup_state(_read(os.path.join(root, "proc/self/mountinfo")) or ""),
        "container": container(root),
        "gpus": gpus,
        "gpu_devices": ["/" + os.path.relpath(p, root) for p in devices],
        "nvml": any(glob.glob(os.path.join(root, g)) for g in NVML_GLOBS),
        "slurm_nvml": any(glob.glob(os.path.join(root, g)) for g in SLURM_NVML_GLOBS),
        "units": dict(units or {}),
        "munge_key_stale": stale_key,
    }
