"""Adding one node to a running lab two ways, side by side on one lab: the run limited to the new node, the
controller and the switches (then the peers' /etc/hosts), against a plain site.yml over the whole grown cluster.

  .venv/bin/python bench/bench_add_node.py [--hosts 8] [--leaves 2 --spines 1] [--logs DIR] [--reuse]

(8 hosts + 1 need two leaves: one lab switch has 8 host ports.)

One lab of --hosts hosts, converged by site.yml's first run (unless --reuse finds it converged), then:

1. limited: host --hosts+1 started fresh, joined by `site.yml --limit <new>,<controller>,switches`, then
   `common.yml` on every host (the fabric block of /etc/hosts naming the new node: the other nodes' one change);
2. full: that host's container replaced by a fresh one, joined by a plain `site.yml` over all --hosts+1 hosts;
3. a no-change site.yml on the grown cluster (what each later run costs).

Prints each run's wall clock and the controller's CPU seconds (ansible-playbook and everything it ran), the ratio of
the limited join to the full one, and whether any old node's slurmd changed its PID (configless Slurm: none must).
Removes the lab it made at the end (with --reuse the lab stays). docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_rolling import playbook, print_rows  # noqa: E402

from lab import cluster  # noqa: E402


def slurmd_pids(hosts: list[str]) -> dict[str, str]:
    out = {}
    for host in hosts:
        ip = cluster.Node(int(host.removeprefix("lab-node"))).mgmt_ip
        cmd = cluster.ssh_cmd(ip, "systemctl", "show", "--property=MainPID", "--value", "slurmd")
        out[host] = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--logs", type=Path, default=ROOT / "artifacts" / "bench-add-node")
    ap.add_argument("--leaves", type=int, default=1, help="a leaf-spine fabric (one switch has 8 host ports)")
    ap.add_argument("--spines", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="start from the running, converged lab of --hosts hosts")
    args = ap.parse_args()
    shape = {"leaves": args.leaves, "spines": args.spines}
    args.logs.mkdir(parents=True, exist_ok=True)
    old = [cluster.Node(i).name for i in range(1, args.hosts + 1)]
    new, controller = cluster.Node(args.hosts + 1).name, old[0]
    rows: list[tuple[str, float, float]] = []
    restarted: dict[str, list[str]] = {}
    try:
        if not args.reuse:
            cluster.down()
            cluster.up(args.hosts, **shape)
            secs, cpu, _ = playbook("playbooks/site.yml", log=args.logs / "site-first.log")
            rows.append((f"site.yml first run, {args.hosts} hosts", secs, cpu))
        before = slurmd_pids(old[1:])
        cluster.up(args.hosts + 1, **shape)
        limit = f"--limit={new},{controller},switches"
        secs, cpu, _ = playbook("playbooks/site.yml", limit, log=args.logs / "add-limited.log")
        secs2, cpu2, _ = playbook("playbooks/common.yml", log=args.logs / "add-limited-hosts.log")
        rows.append((f"limited: site.yml {limit} + common.yml", secs + secs2, cpu + cpu2))
        restarted["limited"] = [h for h, pid in slurmd_pids(old[1:]).items() if pid != before[h]]
        # The same node once more, fresh: its container replaced, the rest as they are.
        cluster.up(args.hosts, **shape)
        cluster.up(args.hosts + 1, **shape)
        before = slurmd_pids(old[1:])
        secs, cpu, _ = playbook("playbooks/site.yml", log=args.logs / "add-full.log")
        rows.append((f"full: site.yml, {args.hosts + 1} hosts", secs, cpu))
        restarted["full"] = [h for h, pid in slurmd_pids(old[1:]).items() if pid != before[h]]
        secs, cpu, _ = playbook("playbooks/site.yml", log=args.logs / "no-change.log")
        rows.append((f"no-change site.yml, {args.hosts + 1} hosts", secs, cpu))
    finally:
        if not args.reuse:
            cluster.down()
    print_rows(rows, f"{args.hosts} hosts + {new}")
    limited = next(s for n, s, _ in rows if n.startswith("limited"))
    full = next(s for n, s, _ in rows if n.startswith("full"))
    print(f"limited / full: {limited / full:.2f}x")
    for how, hosts in restarted.items():
        print(f"{how}: slurmd restarted on the old nodes: {', '.join(hosts) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
