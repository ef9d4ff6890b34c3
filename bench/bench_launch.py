"""Launch overhead of playbooks/train.yml on 2 and 4 lab hosts, and of its two job engines, side by side in one run.

  .venv/bin/python bench/bench_launch.py [--hosts 2 4] [--steps 50] [--schedulers systemd slurm] [--repeat 1]

For each size: a fresh lab, site.yml (not timed here, see docs/lab.md), then DDP launches of the tiny preset, one
per job engine (systemd units or one Slurm job), alternated `--repeat` times; reports playbook start -> launch
(the job submitted or the units started), launch -> first logged step, and playbook start -> end, taken from the
run's manifest and report. Leaves no lab behind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster, podman, vault  # noqa: E402
from lab.cli import demo_corpus  # noqa: E402


def playbook(*args: str) -> None:
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        ANSIBLE_VAULT_IDENTITY_LIST=vault.identity_list(os.environ.get("ANSIBLE_VAULT_IDENTITY_LIST")),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--schedulers", nargs="+", choices=["systemd", "slurm"], default=["systemd"])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    rows = []
    try:
        for n in args.hosts:
            cluster.down()
            cluster.up(n)
            playbook("playbooks/site.yml")
            for _ in range(args.repeat):
                for scheduler in args.schedulers:
                    rows.append((n, scheduler, *launch(n, scheduler, args.steps)))
    finally:
        cluster.down()
    print("hosts  engine   start->launch s  launch->first step s  launch->end s  start->end s  tokens/s")
    for row in rows:
        print("{:>5}  {:<7}  {:>15.1f}  {:>20.1f}  {:>13.1f}  {:>12.1f}  {:>8.0f}".format(*row))
    return 0


def launch(n: int, scheduler: str, steps: int) -> tuple[float, ...]:
    """One launch; its timings from the run's manifest and report."""
    run_id = f"bench-launch-{n}-{scheduler}-{int(time.time())}"
    payload = {"train_launch_payload": {"batch_size": 8, "block_size": 128, "log_interval": 5}}
    playbook(
        "playbooks/train.yml",
        *("-e", f"data={demo_corpus()}", "-e", f"run_id={run_id}", "-e", f"steps={steps}"),
        *("-e", f"scheduler={scheduler}", "-e", json.dumps(payload)),
    )
    run = ROOT / "artifacts" / run_id
    m = json.loads((run / "manifest.json").read_text())
    r = json.loads((run / "report.json").read_text())
    t = {k: float(v) for k, v in m["timings"].items()}
    return (
        t["launched_epoch"] - t["started_epoch"],
        r["launch_to_first_step_s"],
        r["launch_to_end_s"],
        r["total_s"],
        r["tokens_per_s_median"],
    )


if __name__ == "__main__":
    raise SystemExit(main())
