"""Lab timings: `lab up` for 2 and 8 hosts from nothing, then site.yml's first and second run on 2 hosts.

  .venv/bin/python bench/bench_lab.py [--site-hosts 2] [--skip-site]

Removes any running lab first and leaves none behind. The image must be built (`python -m lab image`);
its one-off build time is reported separately. Prints one table; docs/lab.md records the results.
"""

from __future__ import annotations

import argparse
import os
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


def site(*extra: str) -> float:
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", "playbooks/site.yml", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site-hosts", type=int, default=2)
    ap.add_argument("--skip-site", action="store_true")
    args = ap.parse_args()
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
