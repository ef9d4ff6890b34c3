"""What the node package's tests share: recorded tool outputs (tests/fixtures/node_check/, see its README; the
ladder's ibv_devinfo and sminfo in tests/fixtures/validate/), tools that print them, a node's facts judged, fake roots
(the recorded H100 node's sysfs, a lab node) and the counters read between two runs; and the command line's cases
on recorded nodes (CASES), which test_build.py runs through the built command and through main() in this process.
Each fault a test makes is a real recording with one fact changed. The launch's fabric tests use the fake roots too
(launch/test_fabric.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import resolve
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import evaluate, run, summary
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.units import roce_gid_of

ROOT = Path(__file__).resolve().parents[5]
FIX = ROOT / "tests" / "fixtures" / "node_check"
VALIDATE = ROOT / "tests" / "fixtures" / "validate"
SLURM = ROOT / "tests" / "fixtures" / "slurm"
NOW = 1763366800.0  # 2025-11-17T08:06:40Z, after every line of journal_links_xid.txt
BOOT = NOW - 30 * 86400


def fixture(name: str) -> str:
    return (FIX / name).read_text() if (FIX / name).exists() else (VALIDATE / name).read_text()


class FakeTools:
    """The node's tools as recordings: {"nvidia-smi -q": text | {"rc", "out", "err"}}, matched on the command's
    first two words, then its first; a tool not listed is not installed."""

    def __init__(self, outputs: dict):
        self.outputs, self.calls = outputs, []

    def run(self, argv, timeout=60):
        self.calls.append(argv)
        for key in (" ".join(argv[:2]), argv[0]):
            if key in self.outputs:
                out = self.outputs[key]
                return {"rc": 0, "out": out, "err": ""} if isinstance(out, str) else dict(out)
        return None


def config(**kw) -> dict:
    base = {
        "host": "n1",
        "link_layer": "ethernet",
        "interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}],
        "modules": ["ib_core"],
    }
    return resolve(base | kw)


def nic(**kw) -> dict:
    base = {"exists": True, "operstate": "up", "carrier": 1, "mtu": 9000, "speed_mbps": None, "virtual": True}
    return base | kw


def judge(facts: dict, cfg: dict | None = None, previous=None) -> Judge:
    facts = {"time": NOW, "boot_time": BOOT, "groups": ["fabric"]} | facts
    return evaluate(facts, cfg or config(), previous)


def checks(j: Judge, name: str) -> list[dict]:
    return [c for c in j.checks if c["check"] == name]


def one(j: Judge, name: str) -> dict:
    (found,) = checks(j, name)
    return found


def status(j: Judge) -> str:
    return summary(j.checks)[0]


def roce_facts(gid_type="RoCE v2", state="4: ACTIVE", devinfo="ibv_devinfo_roce.txt", name="mlx5_0", rate="25"):
    gid = roce_gid_of("10.77.250.11")
    port = {"port": 1, "state": state, "link_layer": "Ethernet", "rate": f"{rate} Gb/sec (1X EDR)",
            "gids": [{"index": 3, "gid": gid, "type": gid_type, "netdev": "rdma0"}]}  # fmt: skip
    return {
        "nic": {"rdma0": nic(speed_mbps=25000, virtual=False)},
        "rdma": [{"name": name, "ports": [port]}],
        "ibv_devinfo": {"rc": 0, "out": fixture(devinfo).replace("mlx5_0", name), "err": ""},
        "modules": ["ib_core", "mlx5_ib"],
    }


def fake_root(tmp_path: Path, boot: float = BOOT) -> Path:
    """The recorded H100 node's /sys/class/infiniband (mlx5_0 InfiniBand, mlx5_bond_0 RoCE) under a fake root."""
    root = tmp_path / "root"
    shutil.copytree(FIX / "sysfs_h100", root / "sys/class/infiniband")
    write(root / "proc/stat", f"cpu  1 2 3 4\nbtime {int(boot)}\n")
    return root


def bump(root: Path, dev: str, group: str, name: str, by: int) -> None:
    path = root / "sys/class/infiniband" / dev / "ports/1" / group / name
    path.write_text(f"{int(path.read_text()) + by}\n")


def counters_run(root: Path, state: Path, tools=None, now=NOW) -> dict:
    cfg = {"host": "n1", "interfaces": [{"name": "ib0", "address": "10.0.0.1", "mtu": 4092}]}
    return run(cfg, root, state, ["counters"], tools or FakeTools({}), now)


def line(t: float, msg: str, ident: str = "kernel") -> str:
    return f"{t:.6f} gpu-node-1 {ident}: {msg}\n"


def lab_root(tmp_path: Path) -> Path:
    """A lab node: a veth fabric interface, no RDMA, no GPU, no /proc/modules."""
    root = tmp_path / "lab"
    net(root, "rdma0", uevent="INTERFACE=rdma0")
    return root


def write_config(tmp_path: Path, file: str = "node-check.json", **kw) -> Path:
    path = tmp_path / file
    path.write_text(json.dumps({"interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}]} | kw))
    return path


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def net(root: Path, ifname: str, physical: bool = False, **values: str) -> None:
    """A network interface in sysfs: up, carrier, MTU 9000 unless `values` say otherwise; a device behind it when
    `physical` (else it reads as virtual, as a veth)."""
    base = root / "sys/class/net" / ifname
    base.mkdir(parents=True)
    for name, value in ({"operstate": "up", "carrier": "1", "mtu": "9000"} | values).items():
        (base / name).write_text(value + "\n")
    if physical:
        (base / "device").mkdir()


# ------------------------------------------------------------------------------------ the command line's cases
# Each case lays out a fake root from the recordings, a config and a PATH of tools that print recordings, then runs
# the command a few times (with changes between runs, as a node's counters move). A step is the command's arguments
# (a list) or a change to the node between two runs (a callable).
Step = list[str] | Callable[[], None]


def config_file(base: Path, file: str = "node-check.json", **kw) -> str:
    """A config file for the command: host n1, rdma0 at 10.77.250.11, MTU 9000, unless `kw` says otherwise."""
    return str(write_config(base, file, **({"host": "n1"} | kw)))


def env(base: Path) -> dict[str, str]:
    """The command's whole environment: the case's tools only, UTC, a fixed width for --help."""
    return {"PATH": str(base / "tools"), "TZ": "UTC", "COLUMNS": "100", "LC_ALL": "C.UTF-8"}


def tool(base: Path, name: str, script: str) -> None:
    path = base / "tools" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def prints(base: Path, name: str, text: str) -> None:
    """A tool that prints a recording, whatever its arguments."""
    out = base / "tools" / f"{name}.out"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    tool(base, name, f"exec /bin/cat '{out}'\n")


def case_lab(base: Path) -> list[Step]:
    """A lab node (lab_root), no tools."""
    root = lab_root(base)
    (base / "tools").mkdir()
    args = ["--config", config_file(base), "--root", str(root), "--state-dir", ""]
    return [args, [*args, "--brief"], [*args, "--only", "fabric,stack", "--brief"]]


def case_h100_roce(base: Path) -> list[Step]:
    """The H100 node on an Ethernet inventory whose interface no RDMA port is bound to (the role test's node), its
    counters read twice with a counter grown between."""
    root = fake_root(base)
    net(root, "lo", operstate="unknown", mtu="65536")
    prints(base, "ibv_devinfo", (VALIDATE / "ibv_devinfo_ib.txt").read_text())
    lo = {"name": "lo", "address": "10.99.0.2", "mtu": 9000}
    cfg = config_file(
        base, host="here", interfaces=[lo], devices=["mlx5_0"], baseline={"rail_gbps": {"mlx5_0:1": 400.0}}
    )
    args = ["--config", cfg, "--root", str(root), "--state-dir", str(base / "state")]
    return [
        args,
        [*args, "--brief"],
        partial(bump, root, "mlx5_0", "counters", "link_downed", 1),
        [*args, "--only", "counters", "--brief"],
        [*args, "--only", "counters"],
        [*args, "--only", "everything"],
    ]


def case_h100_ib(base: Path) -> list[Step]:
    """The H100 node on an InfiniBand inventory: ib0 at 400 Gb/s, the ladder's ibv_devinfo and a master SM."""
    root = fake_root(base)
    net(root, "ib0", physical=True, mtu="4092", speed="400000")
    write(root / "proc/modules", "mlx5_ib 466944 0 - Live 0x0\nib_core 458752 8 mlx5_ib, Live 0x0\n")
    prints(base, "ibv_devinfo", (VALIDATE / "ibv_devinfo_ib.txt").read_text())
    prints(base, "sminfo", (VALIDATE / "sminfo_master.txt").read_text())
    ib0 = {"name": "ib0", "address": "10.0.0.1", "mtu": 4092}
    modules = ["ib_core", "mlx5_ib", "rdma_cm"]
    cfg = config_file(base, link_layer="infiniband", interfaces=[ib0], modules=modules, line_rate_gbps=400)
    args = ["--config", cfg, "--root", str(root), "--state-dir", "", "--only", "fabric"]
    return [args, [*args, "--brief"]]


def case_gpu_h200(base: Path) -> list[Step]:
    """The recorded H200 (nvidia-smi -q -x), a kernel log with an XID 119 and a link flap, dcgmi diag -r 1."""
    root = base / "root"
    write(root / "proc/stat", f"btime {int(BOOT)}\n")
    net(root, "rdma0")
    (base / "tools").mkdir()
    (base / "tools/smi.xml").write_text((FIX / "nvidia_smi_h200.xml").read_text())
    tool(base, "nvidia-smi", f"case \"$1\" in -q) exec /bin/cat '{base / 'tools/smi.xml'}';; esac\n")
    prints(base, "journalctl", (FIX / "journal_links_xid.txt").read_text())
    prints(base, "dcgmi", (FIX / "dcgmi_diag_r1_dcgm31.txt").read_text())
    args = ["--config", config_file(base, gpus=1), "--root", str(root), "--state-dir", "", "--only", "gpu"]
    return [args, [*args, "--brief"], [*args, "--dcgm-level", "0", "--brief"], [*args, "--only", "gpu,flaps"]]


def case_flaps(base: Path) -> list[Step]:
    """The recorded journal: eth4 down 7 s (a short flap: warn), networkd's lines not counted."""
    root = base / "root"
    write(root / "proc/stat", f"btime {int(BOOT)}\n")
    net(root, "eth4")
    net(root, "enp1s0")
    prints(base, "journalctl", (FIX / "journal_links_xid.txt").read_text())
    cfg = config_file(base, interfaces=[{"name": "eth4"}, {"name": "enp1s0"}])
    args = ["--config", cfg, "--root", str(root), "--state-dir", "", "--only", "flaps"]
    return [args, [*args, "--brief"]]


def case_stack(base: Path) -> list[Step]:
    """A ConnectX-4 Lx fabric NIC (ethtool -i recorded), an H200's nvidia-smi, rdma-core's package and a venv;
    then against a baseline whose firmware differs."""
    root = base / "root"
    write(root / "proc/sys/kernel/osrelease", "6.8.0-90-generic\n")
    write(root / "etc/os-release", 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\n')
    net(root, "rdma0")
    site = root / "opt/venv/lib/python3.12/site-packages"
    for name in ("torch-2.9.1+cu128", "nvidia_nccl_cu12-2.27.3", "numpy-2.3.1"):
        (site / f"{name}.dist-info").mkdir(parents=True)
    write(root / "opt/venv/.pins.sha256", "0123456789abcdef0123\n")
    prints(base, "ethtool", (FIX / "ethtool_i_mlx5_cx4lx.txt").read_text())
    prints(base, "dpkg-query", "50.0-2ubuntu0.2")
    prints(base, "nvidia-smi", (FIX / "nvidia_smi_h200.xml").read_text())
    args = ["--root", str(root), "--state-dir", "", "--only", "stack"]
    fleet = {"kernel": "6.8.0-90-generic", "nic firmware": "14.32.1010", "torch": "2.9.1+cu128"}
    alone = config_file(base, venv="/opt/venv")
    against = config_file(base, "fleet.json", venv="/opt/venv", baseline={"stack": fleet})
    return [["--config", alone, *args], ["--config", against, *args], ["--config", against, *args, "--brief"]]


def case_counters(base: Path) -> list[Step]:
    """The H100 node's port counters and ib0's pause counters of priority 3 (ethtool -S recorded), read three
    times: first reading, a congestion counter grown (reported), an error counter grown (fail)."""
    root = fake_root(base)
    net(root, "ib0", mtu="4092")
    prints(base, "ethtool", (FIX / "ethtool_mlx5_pfc_prio3.txt").read_text())
    cfg = config_file(base, interfaces=[{"name": "ib0", "address": "10.0.0.1", "mtu": 4092}])
    args = ["--config", cfg, "--root", str(root), "--state-dir", str(base / "state"), "--only", "counters"]
    return [
        args,
        partial(bump, root, "mlx5_bond_0", "hw_counters", "out_of_buffer", 3),
        args,
        partial(bump, root, "mlx5_0", "counters", "symbol_error", 3),
        [*args, "--brief"],
        [*args, "--brief"],
    ]


def case_slurm(base: Path) -> list[Step]:
    """Slurm's health check and prolog on a lab node whose link went down: scontrol reads the node idle and
    drains it; once the link is back, the node this command drained is resumed."""
    root = base / "root"
    net(root, "rdma0", carrier="0")
    (base / "tools").mkdir()
    node = base / "tools/node.txt"
    node.write_text((SLURM / "scontrol_show_node_idle.txt").read_text())
    tool(base, "scontrol", f"case \"$1\" in show) exec /bin/cat '{node}';; update) exit 0;; esac\n")
    args = ["--config", config_file(base), "--root", str(root), "--state-dir", "", "--brief"]
    args += ["--slurm-node", "mol-slurm-1"]

    def link_back() -> None:
        (root / "sys/class/net/rdma0/carrier").write_text("1\n")
        node.write_text((SLURM / "scontrol_show_node_drained_by_check.txt").read_text())

    return [[*args, "--slurm"], [*args, "--slurm-prolog"], link_back, [*args, "--slurm"], [*args, "--slurm-prolog"]]


def case_errors(base: Path) -> list[Step]:
    """What the command cannot check against: exit 3 (usage errors on stderr), never the 2 of a failed node."""
    bad = base / "bad.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"interfaces": []}')
    unknown = config_file(base, "unknown.json", thresholds={"xid_window": 1})
    (base / "tools").mkdir()
    return [
        ["--help"],
        ["--config", str(bad), "--brief"],
        ["--config", str(bad), "--brief", "--slurm-prolog"],
        ["--config", str(base / "none.json")],
        ["--config", unknown, "--root", str(base), "--state-dir", ""],
        ["--no-such-option"],
        ["--dcgm-level", "7"],
        ["--config", config_file(base), "--root", str(base), "--state-dir", "", "--only", "gpu,bogus"],
    ]


CASES: dict[str, Callable[[Path], list[Step]]] = {
    "lab": case_lab,
    "h100_roce": case_h100_roce,
    "h100_ib": case_h100_ib,
    "gpu_h200": case_gpu_h200,
    "flaps": case_flaps,
    "stack": case_stack,
    "counters": case_counters,
    "slurm": case_slurm,
    "errors": case_errors,
}

# The command with the clock at NOW: the kernel log's windows and the result's time are then the recordings'.
FROZEN = (
    "import runpy, sys, time\n"
    f"time.time = lambda: {NOW!r}\n"
    "target = sys.argv[1]\n"
    "sys.argv = ['rdma-node-check', *sys.argv[2:]]\n"
    "runpy.run_path(target, run_name='__main__')\n"
)
