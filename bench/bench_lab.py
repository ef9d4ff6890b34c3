"""Lab timings: `lab up` for 2 and 8 hosts from nothing, then site.yml's first and second run on 2 hosts.

  .venv/bin/python bench/bench_lab.py [--site-hosts 2] [--skip-site]
  .venv/bin/python bench/bench_lab.py --scale 2 4 8 [--logs DIR]

--scale: one lab of the largest size, site.yml's first run on all of it, then the second run (changed=0)
limited to the first 2, 4, 8 hosts (and the switch) in one session, side by side; prints each size's time,
its ratio to the smallest, and the tasks whose time grew most (from profile_tasks). --logs keeps each run's output.

Removes any running lab first and leaves none behind. The image must be built (`python -m lab image`);
its one-off build time is reported separately. Prints one table; docs/lab.md records the results.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster, podman  # noqa: E402
from lab.image import ensure_image  # noqa: E402


def timed(fn, *args):
    t0 = time.monotonic()
    fn(*args)
    return time.monotonic() - t0


def site(*extra: str, log: Path | None = None) -> float:
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", "playbooks/site.yml", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if log:
        log.write_text(proc.stdout)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])
    return time.monotonic() - t0


TASK_TIME = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)


def task_times(text: str) -> dict[str, float]:
    """profile_tasks' closing table: task name -> seconds."""
    return {m[1].strip(): float(m[2]) for m in TASK_TIME.finditer(text)}


def scale(sizes: list[int], logs: Path) -> int:
    logs.mkdir(parents=True, exist_ok=True)
    big = max(sizes)
    rows, profiles = [], {}
    try:
        cluster.down()
        cluster.up(big)
        rows.append((f"site.yml first run, {big} hosts", site(log=logs / f"first-{big}.log")))
        for n in sorted(sizes):
            hosts = ",".join(cluster.Node(i).name for i in range(1, n + 1))
            log = logs / f"second-{n}.log"
            rows.append((f"site.yml second run (changed=0), {n} hosts", site("--limit", f"{hosts},switches", log=log)))
            profiles[n] = task_times(log.read_text())
    finally:
        cluster.down()
    width = max(len(r[0]) for r in rows)
    base = rows[1][1]
    print(f"{'step'.ljust(width)}  seconds  vs {min(sizes)} hosts")
    for name, secs in rows:
        ratio = f"{secs / base:5.2f}x" if "second" in name else ""
        print(f"{name.ljust(width)}  {secs:7.1f}  {ratio}")
    small, large = profiles[min(sizes)], profiles[big]
    growth = sorted(((large[t] - small.get(t, 0.0), t) for t in large), reverse=True)[:10]
    print(f"\ntasks that grew most from {min(sizes)} to {big} hosts (profile_tasks, seconds):")
    for delta, task in growth:
        print(f"  +{delta:6.1f}  {small.get(task, 0.0):6.1f} -> {large[task]:6.1f}  {task}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site-hosts", type=int, default=2)
    ap.add_argument("--skip-site", action="store_true")
    ap.add_argument("--scale", type=int, nargs="+", metavar="N")
    ap.add_argument("--logs", type=Path, default=ROOT / "artifacts" / "bench_lab")
    args = ap.parse_args()
    if args.scale:
        return scale(args.scale, args.logs)
    rows = [("image (cached after the first build)", timed(ensure_image, lambda *_: None))]
    try:
        for n in (2, 8):
            cluster.down()
            rows.append((f"lab up, {n} hosts, from nothing", timed(cluster.up, n)))
        rows.append(("lab down, 8 hosts", timed(cluster.down)))
        if not args.skip_site:
            cluster.up(args.site_hosts)
            rows.append((f"site.yml first run, {args.site_hosts} hosts", site()))
            rows.append((f"site.yml second run (changed=0), {args.site_hosts} hosts", site()))
    finally:
        cluster.down()
    width = max(len(r[0]) for r in rows)
    print(f"{'step'.ljust(width)}  seconds")
    for name, secs in rows:
        print(f"{name.ljust(width)}  {secs:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
