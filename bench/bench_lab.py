"""Lab timings: `lab up` for 2 and 8 hosts from nothing, then site.yml's first and second run on 2 hosts.

  .venv/bin/python bench/bench_lab.py [--site-hosts 2] [--skip-site]
  .venv/bin/python bench/bench_lab.py --scale 2 4 8 [--logs DIR]

--scale: one lab of the largest size, site.yml's first run on all of it, then the second run (changed=0,
checked from the recap) limited to the first 2, 4, 8 hosts (and the switch) in one session, side by side,
with the node plays' strategy host_linear as shipped (Mitogen), with Mitogen's CPU pinning forced on
(RDMA_LLM_CLUSTER_MITOGEN_PINNING=1) and as plain linear (RDMA_LLM_CLUSTER_MITOGEN=0), interleaved;
prints each size's time, its ratio to the smallest, the CPU seconds it cost the controller (ansible-playbook
and its ssh children) and the lab hosts (their containers' cgroups), a fit t = F + N*p over the sizes, and
the tasks whose time grew most (from profile_tasks). --logs keeps each run's output. --reuse measures on the
running lab when it has enough hosts and site.yml has run on it (skips the first run; the lab stays up).
--rounds N repeats the no-change runs N times, interleaved, and reports each one's median and each round's ratio.

Removes any running lab first and leaves none behind. The image must be built (`python -m lab image`);
its one-off build time is reported separately. Prints one table; docs/lab.md records the results.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster, podman, vault  # noqa: E402
from lab.image import ensure_image  # noqa: E402


def timed(fn, *args):
    t0 = time.monotonic()
    fn(*args)
    return time.monotonic() - t0


def hosts_cpu() -> float:
    """CPU seconds the running lab hosts have used so far (cgroup v1 cpuacct or v2 cpu.stat of each container)."""
    total = 0.0
    for c in cluster.containers():
        pid = podman.out("inspect", "--format", "{{.State.Pid}}", c["Id"])
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                total += int(Path(f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage").read_text()) / 1e9
                break
            if controllers == "" and Path(f"/sys/fs/cgroup{path}/cpu.stat").exists():
                stat = dict(x.split() for x in Path(f"/sys/fs/cgroup{path}/cpu.stat").read_text().splitlines())
                total += int(stat["usage_usec"]) / 1e6
                break
    return total


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass(frozen=True)
class Run:
    secs: float  # wall clock
    controller: float  # CPU seconds of ansible-playbook and its children (workers, ssh)
    hosts: float  # CPU seconds of the lab host containers


def site(*extra: str, log: Path | None = None, unchanged: bool = False, mode: dict[str, str] | None = None) -> Run:
    """One site.yml run; with unchanged, fail unless the recap says changed=0 everywhere."""
    env = dict(
        os.environ,
        **(mode or {}),
        CONTAINERS_CONF=str(podman.containers_conf()),
        ANSIBLE_VAULT_IDENTITY_LIST=vault.identity_list(os.environ.get("ANSIBLE_VAULT_IDENTITY_LIST")),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
    )
    ctl0, hosts0, t0 = children_cpu(), hosts_cpu(), time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", "playbooks/site.yml", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    run = Run(time.monotonic() - t0, children_cpu() - ctl0, hosts_cpu() - hosts0)
    if log:
        log.write_text(proc.stdout)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])
    if unchanged and re.search(r"changed=[1-9]", proc.stdout):
        sys.exit("a no-change run changed something:\n" + proc.stdout[proc.stdout.rfind("PLAY RECAP") :])
    return run


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares t = F + N*p."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    p = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - p * mx, p


TASK_TIME = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)


def task_times(text: str) -> dict[str, float]:
    """profile_tasks' closing table: task name -> seconds."""
    return {m[1].strip(): float(m[2]) for m in TASK_TIME.finditer(text)}


# host_linear as shipped, with Mitogen's CPU pinning forced on, and with Mitogen turned off
STRATEGIES = {
    "mitogen": {"RDMA_LLM_CLUSTER_MITOGEN": "1", "RDMA_LLM_CLUSTER_MITOGEN_PINNING": ""},
    "pinned": {"RDMA_LLM_CLUSTER_MITOGEN": "1", "RDMA_LLM_CLUSTER_MITOGEN_PINNING": "1"},
    "linear": {"RDMA_LLM_CLUSTER_MITOGEN": "0"},
}


def tasks_per_node(text: str, node: str) -> int:
    """Result lines (ok, changed, skipping; each loop item is a line) the run printed for one node."""
    return len(re.findall(rf"^(?:ok|changed|skipping): \[{re.escape(node)}\]", text, re.M))


def median(runs: list[Run]) -> Run:
    """Each measure's median over the rounds (an even count: the upper of the two middle values)."""
    return Run(*(sorted(getattr(r, f) for r in runs)[len(runs) // 2] for f in ("secs", "controller", "hosts")))


def scale(sizes: list[int], logs: Path, reuse: bool = False, rounds: int = 1) -> int:
    logs.mkdir(parents=True, exist_ok=True)
    big, small_n = max(sizes), min(sizes)
    rows, profiles, all_runs = [], {}, {mode: {n: [] for n in sizes} for mode in STRATEGIES}
    running = {c["Names"][0] for c in cluster.containers() if c["State"] == "running"} if reuse else set()
    reuse = reuse and all(cluster.Node(i).name in running for i in range(1, big + 1))
    try:
        if not reuse:
            cluster.down()
            cluster.up(big)
            rows.append((f"site.yml first run, {big} hosts", site(log=logs / f"first-{big}.log")))
        # Rounds interleave every size and mode, so a slow spell of a shared machine hits all of them alike.
        for r in range(1, rounds + 1):
            for n in sorted(sizes):
                hosts = ",".join(cluster.Node(i).name for i in range(1, n + 1))
                for mode, env in STRATEGIES.items():
                    log = logs / f"second-{n}-{mode}-{r}.log"
                    all_runs[mode][n].append(site("--limit", f"{hosts},switches", log=log, unchanged=True, mode=env))
                    if mode == "mitogen" and r == 1:
                        profiles[n] = task_times(log.read_text())
        per_node = tasks_per_node((logs / f"second-{small_n}-mitogen-1.log").read_text(), cluster.Node(2).name)
    finally:
        if not reuse:
            cluster.down()
    runs = {mode: {n: median(rs) for n, rs in by_n.items()} for mode, by_n in all_runs.items()}
    label = f"median of {rounds}" if rounds > 1 else "changed=0"
    for n in sorted(sizes):
        for mode in STRATEGIES:
            rows.append((f"site.yml second run ({label}), {n} hosts, {mode}", runs[mode][n]))
    width = max(len(r[0]) for r in rows)
    print(f"load average at the end {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'step'.ljust(width)}  seconds  vs {small_n} hosts  CPU s: controller  lab hosts")
    for name, run in rows:
        mode = name.rsplit(", ", 1)[-1]
        ratio = f"{run.secs / runs[mode][small_n].secs:5.2f}x" if mode in runs else " " * 6
        print(f"{name.ljust(width)}  {run.secs:7.1f}  {ratio}          {run.controller:9.1f}  {run.hosts:9.1f}")
    print(f"\ntask results per node in a no-change run (lab-node2): {per_node}")
    if rounds > 1:
        for mode, by_n in all_runs.items():
            each = [f"{b.secs / s.secs:.2f}" for b, s in zip(by_n[big], by_n[small_n], strict=True)]
            print(f"{big} / {small_n} hosts, {mode}, each round: {', '.join(each)}x")
    for other in ("pinned", "linear"):
        print(
            f"mitogen / {other} wall clock: "
            + ", ".join(f"{n} hosts {runs['mitogen'][n].secs / runs[other][n].secs:.2f}" for n in sorted(sizes))
        )
    if len(sizes) > 1:
        for mode in STRATEGIES:
            print(f"\nfit t = F + N*p over the no-change runs, {mode} (seconds):")
            for what in ("secs", "controller", "hosts"):
                f, p = fit(sorted((n, getattr(r, what)) for n, r in runs[mode].items()))
                print(f"  {what:10}  F {f:6.1f}  p {p:5.1f} per host")
    small, large = profiles[small_n], profiles[big]
    growth = sorted(((large[t] - small.get(t, 0.0), t) for t in large), reverse=True)[:10]
    print(f"\ntasks that grew most from {small_n} to {big} hosts (mitogen, profile_tasks, seconds):")
    for delta, task in growth:
        print(f"  +{delta:6.1f}  {small.get(task, 0.0):6.1f} -> {large[task]:6.1f}  {task}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site-hosts", type=int, default=2)
    ap.add_argument("--skip-site", action="store_true")
    ap.add_argument("--scale", type=int, nargs="+", metavar="N")
    ap.add_argument("--logs", type=Path, default=ROOT / "artifacts" / "bench_lab")
    ap.add_argument("--reuse", action="store_true", help="--scale on the running lab, if it has the hosts")
    ap.add_argument("--rounds", type=int, default=1, help="--scale: interleaved rounds; medians are reported")
    args = ap.parse_args()
    if args.scale:
        return scale(args.scale, args.logs, args.reuse, args.rounds)
    rows = [("image (cached after the first build)", timed(ensure_image, lambda *_: None))]
    try:
        for n in (2, 8):
            cluster.down()
            rows.append((f"lab up, {n} hosts, from nothing", timed(cluster.up, n)))
        rows.append(("lab down, 8 hosts", timed(cluster.down)))
        if not args.skip_site:
            cluster.up(args.site_hosts)
            rows.append((f"site.yml first run, {args.site_hosts} hosts", site().secs))
            rows.append((f"site.yml second run (changed=0), {args.site_hosts} hosts", site(unchanged=True).secs))
    finally:
        cluster.down()
    width = max(len(r[0]) for r in rows)
    print(f"{'step'.ljust(width)}  seconds")
    for name, secs in rows:
        print(f"{name.ljust(width)}  {secs:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
