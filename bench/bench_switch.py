"""Switch role timings: full policy apply and no-change run, on 1 switch and on a fabric of N switches.

  .venv/bin/python bench/bench_switch.py [--fabric 8] [--repeat 1] [--profile 8]

Each switch is a lab.nxos_emu process on loopback (the lab's switch, with the lab inventory's
group_vars: network_cli over libssh, 2 RoCE ports per switch); playbooks/switch.yml runs against a
factory config (full apply: read, plan, checkpoint, push, post-check, save, delete) and then again
(no change: one batched read, no configuration command). The 1-switch and N-switch runs are measured
side by side in one run, so their ratio is the parallel cost (forks) on this machine. The emulators
are started by this script and stopped by their PID. Prints one table; docs/benchmarks.md records it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster  # noqa: E402  (needs the sys.path line above)


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
    directory = workdir / f"inventory-{len(emulators)}"
    directory.mkdir()
    switches = {
        f"leaf{i}": {"ansible_host": "127.0.0.1", "ansible_port": port} for i, (_, _, port) in enumerate(emulators, 1)
    }
    hosts = {
        "all": {
            "children": {
                "rdma_nodes": {"hosts": {"lab-node1": None, "lab-node2": None}},
                "switches": {"hosts": switches},
            }
        }
    }
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (directory / "group_vars").symlink_to(ROOT / "inventory" / "lab" / "group_vars")
    return directory / "hosts.yml"


def playbook(inv: Path, render: Path) -> tuple[float, dict]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_DEPRECATION_WARNINGS="False")
    cmd = [
        "ansible-playbook",
        "-i",
        str(inv),
        "playbooks/switch.yml",
        "-e",
        json.dumps({"nxos_roce_qos_render_dir": str(render)}),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-4000:] + proc.stderr[-2000:])
    data = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n") :])[0]
    return elapsed, data["stats"], task_times(data)


def task_times(data: dict) -> list[tuple[str, float]]:
    """(task name, wall seconds) of every task in the run, from the json callback's task durations."""
    out = []
    for play in data.get("plays", []):
        for task in play.get("tasks", []):
            duration = task["task"].get("duration", {})
            start, end = duration.get("start"), duration.get("end")
            if start and end:
                seconds = (_iso(end) - _iso(start)).total_seconds()
                out.append((task["task"]["name"].removeprefix("nxos_roce_qos : "), seconds))
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
    args = ap.parse_args()
    import paramiko

    rows = []
    profile = {}
    with tempfile.TemporaryDirectory(prefix="bench_switch_") as tmp:
        workdir = Path(tmp)
        paramiko.RSAKey.generate(2048).write_private_key_file(str(workdir / "host_key"))
        for size in (1, args.fabric):
            best = None
            for attempt in range(args.repeat):
                run_dir = workdir / f"{size}-{attempt}"
                run_dir.mkdir()
                emulators = start_emulators(run_dir, size, workdir / "host_key")
                try:
                    inv = inventory(run_dir, emulators)
                    apply_s, stats, apply_tasks = playbook(inv, run_dir / "render")
                    assert all(s["changed"] > 0 for s in stats.values()), stats
                    mark = offsets(emulators)
                    again_s, stats, again_tasks = playbook(inv, run_dir / "render")
                    assert all(s["changed"] == 0 for s in stats.values()), stats
                    execs, configs = commands_sent(emulators, mark)
                finally:
                    stop(emulators)
                result = (apply_s, again_s, execs // size, configs)
                if best is None or result[0] + result[1] < best[0] + best[1]:
                    best = result
                    profile[size] = (apply_tasks, again_tasks)
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
    one, fabric = rows[0], rows[-1]
    print(
        f"ratio {fabric[0]} switches / 1 switch: full apply {fabric[1] / one[1]:.2f}x, "
        f"no-change {fabric[2] / one[2]:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
