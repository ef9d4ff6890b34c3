"""A rolling change against the same change made plainly, side by side on one lab.

  .venv/bin/python bench/bench_rolling.py [--hosts 8] [--batch 2] [--rounds 1] [--logs DIR] [--reuse]

One lab of --hosts hosts (site.yml's first run on it, unless --reuse finds it converged), then per round, in turn:
the change as a plain `site.yml --tags node_health` on every node, and the same change through rolling.yml in
batches of --batch (each batch drained, changed alone, proven by the ladder against a node in service, resumed).
The change rewrites one node-check threshold (`xid_window_s`), a new value each run, so every run changes every
node. Prints each run's wall clock and the controller's CPU seconds (ansible-playbook and everything it ran), the
ratio of the rolling run to the plain one, and the rolling run's batches (seconds each, from its report.json).
Removes the lab it made at the end (with --reuse the lab stays). docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_lab import children_cpu  # noqa: E402

from lab import cluster, podman, vault  # noqa: E402

REPORTS = ROOT / "artifacts" / "rolling"


def playbook(*args: str, log: Path) -> tuple[float, float, str]:
    """One ansible-playbook run on the lab: (seconds, controller CPU seconds, output); exits when it fails."""
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        ANSIBLE_VAULT_IDENTITY_LIST=vault.identity_list(os.environ.get("ANSIBLE_VAULT_IDENTITY_LIST")),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    cpu0, t0 = children_cpu(), time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", "inventory/lab", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True)  # fmt: skip
    secs, cpu = time.monotonic() - t0, children_cpu() - cpu0
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:1])} failed (log {log}):\n{proc.stdout[-3000:]}")
    return secs, cpu, proc.stdout


def print_rows(rows: list[tuple[str, float, float]], what: str) -> None:
    """The runs' table: the machine's load at the end, then each run's seconds and controller CPU seconds."""
    width = max(len(name) for name, _, _ in rows)
    print(f"load average at the end {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; {what}")
    print(f"{'run'.ljust(width)}  seconds  controller CPU s")
    for name, secs, cpu in rows:
        print(f"{name.ljust(width)}  {secs:7.1f}  {cpu:9.1f}")


def change(window: int) -> list[str]:
    return ["--tags", "node_health", "-e", json.dumps({"node_health_thresholds": {"xid_window_s": window}})]


def changed_everywhere(out: str, hosts: list[str]) -> bool:
    recap = out.rsplit("PLAY RECAP", 1)[-1]
    found = dict(re.findall(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", recap, re.M))
    return all(int(found.get(h, 0)) > 0 for h in hosts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--logs", type=Path, default=ROOT / "artifacts" / "bench-rolling")
    ap.add_argument("--reuse", action="store_true", help="measure on the running, converged lab")
    args = ap.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    hosts = [cluster.Node(i).name for i in range(1, args.hosts + 1)]
    rows: list[tuple[str, float, float]] = []
    batches: list[list[tuple[list[str], float]]] = []
    try:
        if not args.reuse:
            cluster.down()
            cluster.up(args.hosts)
            secs, cpu, _ = playbook("playbooks/site.yml", log=args.logs / "site-first.log")
            rows.append((f"site.yml first run, {args.hosts} hosts", secs, cpu))
        window = 3600
        for r in range(1, args.rounds + 1):
            window += 60
            secs, cpu, out = playbook("playbooks/site.yml", *change(window), log=args.logs / f"plain-{r}.log")
            if not changed_everywhere(out, hosts):
                sys.exit(f"the plain change did not change every node (log {args.logs / f'plain-{r}.log'})")
            rows.append((f"plain: site.yml --tags node_health, round {r}", secs, cpu))
            window += 60
            before = {p.name for p in REPORTS.iterdir()} if REPORTS.exists() else set()
            roll = [
                "playbooks/rolling.yml", "-e", f"rolling_change=bench-{window}", "-e", f"rolling_batch={args.batch}",
                "-e", json.dumps({"rolling_args": change(window)}), "-e", "rolling_proof_pair_seconds=1",
                "-e", "rolling_poll_interval=2",
            ]  # fmt: skip
            secs, cpu, out = playbook(*roll, log=args.logs / f"rolling-{r}.log")
            rows.append((f"rolling: batches of {args.batch}, round {r}", secs, cpu))
            new = sorted(p for p in REPORTS.iterdir() if p.name not in before)
            report = json.loads((new[-1] / "report.json").read_text())
            if report["status"] != "passed":
                sys.exit(f"the rollout did not pass: {report['verdict']}")
            batches.append([(b["hosts"], b["seconds"]) for b in report["batches"]])
    finally:
        if not args.reuse:
            cluster.down()
    print_rows(rows, f"{args.hosts} hosts")
    plain = [s for n, s, _ in rows if n.startswith("plain")]
    rolled = [s for n, s, _ in rows if n.startswith("rolling")]
    print("rolling / plain, each round: " + ", ".join(f"{b / a:.1f}x" for a, b in zip(plain, rolled, strict=True)))
    for r, each in enumerate(batches, 1):
        print(f"round {r} batches: " + "; ".join(f"{','.join(h)} {s:.0f} s" for h, s in each))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
