"""What rdma-llm-metrics reads on one host, collector by collector, each rendered by this package's module of the
same name: the node check's last result (node_health), the RDMA ports' hw_counters and the fabric interfaces'
`ethtool -S` (rdma), `nvidia-smi -q -x` (gpu), slurmctld's view on the controller (slurm), the training runs of
this host (training). Switches are not read here: the controller reads them (monitoring/switch.py).

Every path starts at `root` (a fake tree in tests) and every tool runs through `run(argv, timeout)` (run_command
here, recorded outputs in tests), with a timeout: a hung nvidia-smi or scontrol must not hold the timer. A
collector returns its file's text and what it could not read ([] when it read everything); where the library has
an up or absent metric, a failed read says it (`rdma_llm_slurm_up 0`, `rdma_llm_gpu_present 0`,
`rdma_llm_node_check_verdict 3`) and nothing is made up from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import controller_error
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import gpu, node_health, rdma, slurm, training
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import render
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import RESULT_FILE, SCHEMA
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import boot_time, port_counters, read
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import SYSTEM_PATH, last_line

# Seconds a killed tool gets to go before it is left behind: a process in uninterruptible sleep (nvidia-smi inside a
# hung driver) cannot die until the kernel lets it, and waiting for it would hang the collector with it.
KILL_WAIT_S = 5
# The commands of the Slurm collector, as monitoring/slurm.py names them in its metrics' sources.
SLURM_NODES, SLURM_QUEUE, SLURM_SDIAG = shlex.split(slurm.NODES), shlex.split(slurm.SQUEUE), shlex.split(slurm.SDIAG)
JOB_SERIES = ("rdma_llm_slurm_jobs", "rdma_llm_slurm_pending_jobs")


def run_command(argv: list, timeout: float, path: str | None = None) -> dict | None:
    """Run a tool found on `path` (PATH, else node/tools.py SYSTEM_PATH): {"rc", "out", "err"}, None when it is
    not installed. Past `timeout` seconds its process group is killed and rc is 124 (coreutils timeout's); the
    tool is waited for KILL_WAIT_S more at most, then left behind."""
    exe = shutil.which(argv[0], path=path or os.environ.get("PATH") or SYSTEM_PATH)
    if exe is None:
        return None
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a child it started is killed with it
        )
    except OSError as exc:
        return {"rc": 126, "out": "", "err": f"{argv[0]}: {exc.strerror or exc}"}
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=KILL_WAIT_S)
        return {"rc": 124, "out": "", "err": f"{argv[0]} did not finish within {timeout:g} s"}
    return {"rc": proc.returncode, "out": out, "err": err}


class Host(NamedTuple):
    """What a collector reads through: the tree's root, the tool runner `run(argv, timeout)`, its timeout and the
    time of this pass (Unix time)."""

    root: Path
    run: Callable
    timeout: float
    now: float

    def path(self, path: str) -> Path:
        return self.root / str(path).lstrip("/")

    def tool(self, argv: list) -> dict | None:
        return self.run(list(argv), self.timeout)


def _said(argv: list, res: dict) -> str:
    return f"{' '.join(argv)}: {last_line(res)}"


# ------------------------------------------------------------------------------------------------ node_health
def read_node_health(options: dict, host: Host) -> tuple:
    """rdma-node-check's last result, `<state_dir>/node-check-result.json` (node/cli.py writes it at every run):
    its samples, the file's time standing in for a result that has none (the command's error). No file, or no
    result in it: verdict 3 (could not check) and no timestamp (there is no reading)."""
    path = host.path(options["state_dir"]) / RESULT_FILE
    try:
        text, when = path.read_text(errors="replace"), path.stat().st_mtime
    except FileNotFoundError:
        return _no_verdict(), [f"no result in {path} (rdma-node-check has not run with this state dir)"]
    except OSError as exc:
        return _no_verdict(), [f"cannot read {path}: {exc.strerror or exc}"]
    result = node_health.parse_result(text) or _whole(text)
    if result is None:
        return _no_verdict(), [f"{path} holds no result of rdma-node-check"]
    return node_health.textfile(result, now=when), []


def _whole(text: str) -> dict | None:
    """The file as one JSON document (node/cli.py writes one line; a result saved pretty-printed is read too)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def _no_verdict() -> str:
    return render(node_health.METRICS, [("rdma_llm_node_check_verdict", {}, node_health.NOT_CHECKED)])


# ------------------------------------------------------------------------------------------------------- rdma
def read_rdma(options: dict, host: Host) -> tuple:
    """Every RDMA port's hw_counters (sysfs under root) and each configured fabric interface's `ethtool -S`. A
    host without RDMA devices has no port series; an interface that is not there, or whose ethtool fails, is a
    failed read and has no series."""
    problems, outputs = [], {}
    for ifname in options["interfaces"]:
        if not host.path(f"/sys/class/net/{ifname}").exists():
            problems.append(f"{ifname}: no such network interface")
            continue
        argv = ["ethtool", "-S", ifname]
        res = host.tool(argv)
        if res is None:
            problems.append("ethtool is not installed")
            break
        if res["rc"] != 0:
            problems.append(_said(argv, res))
            continue
        outputs[ifname] = res["out"]
    return rdma.textfile(port_counters(host.root), rdma.ethtool_stats(outputs)), problems


# -------------------------------------------------------------------------------------------------------- gpu
def read_gpu(options: dict, host: Host) -> tuple:
    """`nvidia-smi -q -x`. No nvidia-smi on PATH: no GPU driver, `rdma_llm_gpu_present 0`. nvidia-smi that fails
    or prints no XML: present 0 too (no GPU it reads, as the metric says) and a failed read."""
    argv = gpu.SMI.split()
    res = host.tool(argv)
    if res is None:
        return gpu.textfile(None), []
    if res["rc"] != 0:
        return gpu.textfile(None), [_said(argv, res)]
    readings = gpu.readings(res["out"])
    if readings is None:
        return gpu.textfile(None), [f"{gpu.SMI}: its output is not nvidia-smi's XML"]
    return gpu.textfile(readings), []


# ------------------------------------------------------------------------------------------------------ slurm
def read_slurm(options: dict, host: Host) -> tuple:
    """slurmctld's nodes, queue and statistics. A controller that does not answer `scontrol show nodes`:
    `rdma_llm_slurm_up 0` alone. A failed squeue leaves the job series out (slurm.samples counts an empty queue's
    states as 0, which an unanswered query is not); a failed sdiag has no series of its own."""
    res = host.tool(SLURM_NODES)
    if res is None:
        return render(slurm.METRICS, [("rdma_llm_slurm_up", {}, 0)]), ["scontrol is not installed"]
    said = (res["out"] or "") + (res["err"] or "")
    why = controller_error(res["rc"], said)
    if why:
        return slurm.textfile(res["rc"], said), [f"{slurm.NODES}: {why}"]
    problems, texts = [], {}
    for key, argv in (("squeue", SLURM_QUEUE), ("sdiag", SLURM_SDIAG)):
        out = host.tool(argv)
        if out is not None and out["rc"] == 0:
            texts[key] = out["out"]
        else:
            problems.append(_said(argv, out) if out is not None else f"{argv[0]} is not installed")
    samples = slurm.samples(res["rc"], said, texts.get("squeue", ""), texts.get("sdiag", ""))
    if "squeue" not in texts:
        samples = [s for s in samples if s[0] not in JOB_SERIES]
    return render(slurm.METRICS, samples), problems


# --------------------------------------------------------------------------------------------------- training
def read_training(options: dict, host: Host) -> tuple:
    """The runs under `runs_dir` (the launch's train_launch_root: `<runs_dir>/<run_id>/out/metrics.jsonl`) whose
    ranks ran on this host (their latest start record names it: a shared out_dir holds every host's), each while it
    is active (a rank's process is alive) or for `recent_s` after it last wrote. Labels: run_id the directory's
    name, job_id the Slurm job of its ranks' latest start ("" under systemd)."""
    base = host.path(options["runs_dir"])
    if not base.is_dir():
        return "", []  # no run was launched on this host
    me = options["hostname"] or socket.gethostname()
    boot = boot_time(host.root)
    problems, samples = [], []
    for run in sorted(p for p in base.iterdir() if p.is_dir()):
        jsonl, result = run / "out" / "metrics.jsonl", run / "out" / "result.json"
        try:
            if not jsonl.is_file():
                continue
            last = max(p.stat().st_mtime for p in (jsonl, result) if p.exists())
            recent = host.now - last <= options["recent_s"]
            if result.exists() and not recent:
                continue  # ended (the payload's result.json) long ago, whatever holds its pids now: not read
            records = training.read_records(jsonl.read_text(errors="replace"))
        except OSError as exc:
            problems.append(f"{run.name}: {exc.strerror or exc}")
            continue
        starts = own_starts(records, me)
        # A run with its result.json ended: its ranks are not alive, whatever process holds their pids now.
        running = {
            rank: not result.exists() and alive(host.root, s.get("pid"), s["time"], boot) for rank, s in starts.items()
        }
        if not starts or not (recent or any(running.values())):
            continue
        mine = [r for r in records if r.get("rank") in starts]
        since = max(s["time"] for s in starts.values())
        samples += training.samples(mine, run.name, job_id(run / "logs", since), running)
    return render(training.METRICS, samples), problems


def own_starts(records: list, me: str) -> dict:
    """{rank: its latest start record} of the ranks whose latest start ran on host `me`."""
    latest = {}
    for record in records:
        if record.get("kind") == "start" and isinstance(record.get("time"), (int, float)):
            latest[record.get("rank")] = record
    return {rank: s for rank, s in latest.items() if s.get("hostname") == me}


def alive(root: Path, pid, since: float, boot: float | None) -> bool:
    """Whether the rank that wrote a start record at `since` still runs as `pid`: /proc/<pid> is there, not a
    zombie, and (where the boot time is known) started before the record, so not a later process that got its
    pid. proc(5): stat field 22, starttime, in clock ticks after boot; btime and the ticks are whole, so the start
    read is never later than the true one (a wall clock stepped forward since boot moves btime with it)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    stat = read(root / "proc" / str(pid) / "stat")
    if not stat or ") " not in stat:
        return False
    fields = stat.rsplit(") ", 1)[1].split()
    if not fields or fields[0] == "Z":
        return False
    if boot is None or len(fields) < 20 or not fields[19].isdigit():
        return True
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK") <= since


def job_id(logs: Path, since: float) -> str:
    """The Slurm job whose step ran when the ranks last started: of `logs/step-<job>.state` (slurm_script.py's
    step script writes job=, start=, and end= once it ends), the latest that started before `since` and had not
    ended by then; "" when none (the systemd engine, or a systemd launch after a Slurm one). The step script
    stamps its start before torchrun starts the ranks, on the same clock."""
    best = None
    for path in sorted(logs.glob("step-*.state")):
        fields = dict(re.findall(r"^(\w+)=(.*)$", read(path) or "", re.M))
        try:
            start = float(fields.get("start", ""))
        except ValueError:
            continue
        if start <= since and (best is None or start > best[0]):
            best = (start, fields)
    if best is None:
        return ""
    start, fields = best
    try:
        if float(fields["end"]) < since:
            return ""
    except (KeyError, ValueError):
        pass  # not ended: the step still runs
    return fields.get("job", "")


# What each collector reads, in the order they run, and what its file says when the collector itself failed.
COLLECTORS = {
    "node_health": read_node_health,
    "rdma": read_rdma,
    "gpu": read_gpu,
    "slurm": read_slurm,
    "training": read_training,
}
FALLBACK = {
    "node_health": _no_verdict,
    "rdma": lambda: "",
    "gpu": lambda: gpu.textfile(None),
    "slurm": lambda: render(slurm.METRICS, [("rdma_llm_slurm_up", {}, 0)]),
    "training": lambda: "",
}
