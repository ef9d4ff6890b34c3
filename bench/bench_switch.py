"""Switch role timings: full policy apply and no-change run, on 1 switch and on a fabric of N switches.

  .venv/bin/python bench/bench_switch.py [--fabric 8] [--repeat 1] [--profile 8] [--cpu]

Each switch is a lab.nxos_emu process on loopback (the lab's switch, with the lab inventory's
group_vars: network_cli over libssh, 2 RoCE ports per switch); playbooks/switch.yml runs against a
factory config (full apply: read, plan, checkpoint, push, post-check, save, delete) and then again
(no change: one batched read, no configuration command). The 1-switch and N-switch runs are measured
side by side in one run, so their ratio is the parallel cost (forks) on this machine. The emulators
are started by this script and stopped by their PID. Prints one table; docs/benchmarks.md records it.

--cpu adds where the CPU of each run went, in CPU seconds (user + system): the ansible-playbook process
itself, its forked workers (one per task and switch), the `ansible-connection` starts (ansible-core runs
one new Python process per task that uses a persistent connection), the persistent connection processes
they leave behind (login, prompts, commands) and the emulators. The bench becomes the child subreaper
(Linux prctl) so the daemonised connection processes are its children: their CPU is read from /proc
before they are stopped by PID; a `sitecustomize` probe (a temporary directory on PYTHONPATH, for these
runs only) records os.times() at exit of ansible-playbook and of each connection start.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster  # noqa: E402  (needs the sys.path line above)

# Written to a temporary directory on the runs' PYTHONPATH with --cpu: every Python process of the run
# that exits normally appends its pid, argv and os.times() (self and waited children) to the log.
CPU_PROBE = """
import atexit, json, os, sys
_log, _start_pid = os.environ.get("BENCH_SWITCH_CPU_LOG"), os.getpid()

def _bench_switch_cpu():
    t = os.times()
    record = {"pid": os.getpid(), "start_pid": _start_pid, "argv": sys.argv[:1],
              "self": t.user + t.system, "children": t.children_user + t.children_system}
    with open(_log, "a") as fh:
        fh.write(json.dumps(record) + "\\n")

if _log:
    atexit.register(_bench_switch_cpu)
"""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live or zombie process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def own_children() -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        out |= {int(pid) for pid in (task / "children").read_text().split()}
    return out


class CpuMeter:
    """The CPU split of one ansible-playbook run (see --cpu in the docstring)."""

    def __init__(self, workdir: Path):
        # Orphans (the double-forked ansible-connection processes) become children of this process.
        if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            raise SystemExit("--cpu needs Linux (prctl PR_SET_CHILD_SUBREAPER)")
        self.site = workdir / "cpu_probe"
        self.site.mkdir()
        (self.site / "sitecustomize.py").write_text(CPU_PROBE)
        self.count = 0

    def env(self) -> dict:
        self.count += 1
        self.log = self.site.parent / f"cpu-{self.count}.jsonl"
        return {"PYTHONPATH": str(self.site), "BENCH_SWITCH_CPU_LOG": str(self.log)}

    def start(self, emulators) -> None:
        self.before = own_children()
        self.emulators = {proc.pid: proc_cpu(proc.pid) for proc, _, _ in emulators}

    def finish(self, playbook_pid: int) -> dict:
        """Reads the lingering connection processes' CPU, stops them (SIGTERM by PID) and reaps them."""
        emulators = sum(proc_cpu(pid) - cpu for pid, cpu in self.emulators.items())
        connections = 0.0
        leftover = own_children() - self.before - {playbook_pid}
        for pid in leftover:
            try:
                connections += proc_cpu(pid)
                os.kill(pid, signal.SIGTERM)
            except (FileNotFoundError, ProcessLookupError):
                pass
        for pid in leftover:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        records = [json.loads(line) for line in self.log.read_text().splitlines()]
        main = next(r for r in records if r["argv"][0].endswith("ansible-playbook"))
        starts = [r for r in records if "ansible_connection" in r["argv"][0] and r["pid"] == r["start_pid"]]
        start_cpu = sum(r["self"] + r["children"] for r in starts)
        split = {
            "ansible-playbook": main["self"],
            "workers": main["children"] - start_cpu,
            "connection starts": start_cpu,
            "connection processes": connections,
            "emulators": emulators,
        }
        split["total"] = sum(split.values())
        split["starts"] = len(starts)
        return split


def start_emulators(workdir: Path, count: int, host_key: Path) -> list[tuple[subprocess.Popen, Path, int]]:
    """`count` emulators sharing one pre-made host key (left to themselves, they would race to create
    the same key file). On a start failure the ones already started are stopped."""
    started = []
    for index in range(1, count + 1):
        state = workdir / f"leaf{index}"
        state.mkdir()
        cmd = [
            *cluster.emulator_cmd(state, f"leaf{index}", "admin", "rdma-lab"),
            "--host-key",
            str(host_key),
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append((proc, state, 0))
    ready = []
    deadline = time.monotonic() + 60
    for proc, state, _ in started:
        while not (state / "port").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(started)
                raise SystemExit(f"emulator in {state} did not start")
            time.sleep(0.05)
        ready.append((proc, state, int((state / "port").read_text())))
    return ready


def stop(emulators) -> None:
    for proc, _, _ in emulators:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc, _, _ in emulators:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)


def inventory(workdir: Path, emulators) -> Path:
    switches = {
        f"leaf{i}": {"ansible_host": "127.0.0.1", "ansible_port": port} for i, (_, _, port) in enumerate(emulators, 1)
    }
    return cluster.switch_inventory(workdir / f"inventory-{len(emulators)}", switches)


def playbook(inv: Path, render: Path, meter: CpuMeter | None = None, emulators=()) -> tuple:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_DEPRECATION_WARNINGS="False")
    if meter is not None:
        env.update(meter.env())
        meter.start(emulators)
    cmd = [
        "ansible-playbook",
        "-i",
        str(inv),
        "playbooks/switch.yml",
        "-e",
        json.dumps({"nxos_roce_qos_render_dir": str(render)}),
    ]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    elapsed = time.monotonic() - t0
    split = meter.finish(proc.pid) if meter is not None else None
    if proc.returncode != 0:
        raise SystemExit(stdout[-4000:] + stderr[-2000:])
    data = json.JSONDecoder().raw_decode(stdout[stdout.index("{\n") :])[0]
    return elapsed, data["stats"], task_times(data), split


def task_times(data: dict) -> list[tuple[str, float]]:
    """(task name, wall seconds) of every task in the run, from the json callback's task durations."""
    out = []
    for play in data.get("plays", []):
        for task in play.get("tasks", []):
            duration = task["task"].get("duration", {})
            start, end = duration.get("start"), duration.get("end")
            if start and end:
                seconds = (_iso(end) - _iso(start)).total_seconds()
                out.append((task["task"]["name"].removeprefix("rdma_llm.cluster.nxos_roce_qos : "), seconds))
    return out


def _iso(text: str):
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def commands_sent(emulators, since: dict) -> tuple[int, int]:
    """(exec lines, config lines) received by all switches since the offsets in `since`."""
    execs = configs = 0
    for _, state, _ in emulators:
        log = (state / "state.json.commands.jsonl").read_text().splitlines()
        for line in log[since.get(state, 0) :]:
            entry = json.loads(line)
            if entry["mode"] == "exec":
                execs += 1
            else:
                configs += 1
    return execs, configs


def offsets(emulators) -> dict:
    out = {}
    for _, state, _ in emulators:
        log = state / "state.json.commands.jsonl"
        out[state] = len(log.read_text().splitlines()) if log.exists() else 0
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabric", type=int, default=8, help="switches in the fabric run (default 8)")
    ap.add_argument("--repeat", type=int, default=1, help="measure each size this many times (best kept)")
    ap.add_argument("--profile", type=int, default=0, help="print the N slowest tasks of the 1-switch and fabric runs")
    ap.add_argument("--cpu", action="store_true", help="print where the CPU of each run went (see the docstring)")
    args = ap.parse_args()
    import paramiko

    rows = []
    profile = {}
    cpu = {}
    with tempfile.TemporaryDirectory(prefix="bench_switch_") as tmp:
        workdir = Path(tmp)
        meter = CpuMeter(workdir) if args.cpu else None
        paramiko.RSAKey.generate(2048).write_private_key_file(str(workdir / "host_key"))
        for size in (1, args.fabric):
            best = None
            for attempt in range(args.repeat):
                run_dir = workdir / f"{size}-{attempt}"
                run_dir.mkdir()
                emulators = start_emulators(run_dir, size, workdir / "host_key")
                try:
                    inv = inventory(run_dir, emulators)
                    apply_s, stats, apply_tasks, apply_cpu = playbook(inv, run_dir / "render", meter, emulators)
                    assert all(s["changed"] > 0 for s in stats.values()), stats
                    mark = offsets(emulators)
                    again_s, stats, again_tasks, again_cpu = playbook(inv, run_dir / "render", meter, emulators)
                    assert all(s["changed"] == 0 for s in stats.values()), stats
                    execs, configs = commands_sent(emulators, mark)
                finally:
                    stop(emulators)
                result = (apply_s, again_s, execs // size, configs)
                if best is None or result[0] + result[1] < best[0] + best[1]:
                    best = result
                    profile[size] = (apply_tasks, again_tasks)
                    cpu[size] = ((apply_s, apply_cpu), (again_s, again_cpu))
            rows.append((size, *best))
    print(
        f"{'switches':>8} {'full apply s':>13} {'no-change s':>12} "
        f"{'exec lines/switch (no-change)':>30} {'config lines':>13}"
    )
    for size, apply_s, again_s, execs, configs in rows:
        print(f"{size:>8} {apply_s:>13.1f} {again_s:>12.1f} {execs:>30} {configs:>13}")
    for size, runs in profile.items() if args.profile else ():
        for label, tasks in zip(("full apply", "no-change"), runs, strict=True):
            total = sum(t for _, t in tasks)
            print(f"\n{size} switch(es), {label}: {len(tasks)} tasks, {total:.1f} s in tasks; the slowest:")
            for name, seconds in sorted(tasks, key=lambda t: -t[1])[: args.profile]:
                print(f"  {seconds:6.2f} s  {name}")
    if args.cpu:
        print_cpu(cpu)
    one, fabric = rows[0], rows[-1]
    print(
        f"ratio {fabric[0]} switches / 1 switch: full apply {fabric[1] / one[1]:.2f}x, "
        f"no-change {fabric[2] / one[2]:.2f}x"
    )
    return 0


def print_cpu(cpu: dict) -> None:
    parts = ("ansible-playbook", "workers", "connection starts", "connection processes", "emulators")
    print("\nCPU seconds (user + system) of each run; per switch: all but ansible-playbook, divided by the switches")
    print(f"{'switches':>8} {'run':>10} {'wall s':>7} {'CPU s':>6} {'cores':>5} " + " ".join(f"{p:>20}" for p in parts))
    for size, runs in cpu.items():
        for label, (wall, split) in zip(("full apply", "no-change"), runs, strict=True):
            cells = [f"{split[p]:>20.2f}" for p in parts]
            cells[2] = f"{split['connection starts']:>14.2f} ({split['starts']:>2}x)"
            per_switch = (split["total"] - split["ansible-playbook"]) / size
            print(
                f"{size:>8} {label:>10} {wall:>7.1f} {split['total']:>6.2f} {split['total'] / wall:>5.2f} "
                + " ".join(cells)
                + f"   per switch {per_switch:.2f}"
            )


if __name__ == "__main__":
    sys.exit(main())
