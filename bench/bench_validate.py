"""Wall time of the validation ladder (playbooks/validate.yml) on 2, 4 and 8 lab hosts, in one run.

  flock /tmp/rdma-llm-lab.lock .venv/bin/python bench/bench_validate.py [--hosts 2 4 8] [--pair-seconds 2]

The lab grows between sizes (lab up N adds hosts; site.yml converges only what is new, not timed here), then
the ladder runs once per size with short stress durations. Reports the ladder's wall time, the pair rounds
(N-1 for even N) and each rung's share, read from the verdict. Leaves no lab behind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster, podman  # noqa: E402

VALIDATE = ROOT / "artifacts" / "validate"


def playbook(*args: str, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])
    return time.monotonic() - t0, proc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--pair-seconds", type=int, default=2)
    args = ap.parse_args()
    rows = []
    try:
        cluster.down()
        for n in sorted(args.hosts):
            cluster.up(n)
            playbook("playbooks/site.yml")
            before = {p.name for p in VALIDATE.iterdir()} if VALIDATE.exists() else set()
            took, _ = playbook("playbooks/validate.yml", "-e", f"pair_seconds={args.pair_seconds}", check=False)
            new = sorted(p for p in VALIDATE.iterdir() if p.name not in before)
            verdict = json.loads((new[-1] / "verdict.json").read_text())
            span = datetime.fromisoformat(verdict["finished"]) - datetime.fromisoformat(verdict["started"])
            rows.append(
                {
                    "hosts": n,
                    "rounds": n - 1 if n % 2 == 0 else n,
                    "pairs": n * (n - 1) // 2,
                    "status": verdict["status"],
                    "playbook_s": round(took, 1),
                    "ladder_s": span.total_seconds(),
                    "tcp_bw_min_gbps": next((r["value"] for r in verdict["rungs"] if r["name"] == "tcp_bw"), None),
                    "allreduce_busbw_gbps": next(
                        (r["value"] for r in verdict["rungs"] if r["name"] == "allreduce"), None
                    ),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.down()
    print("\n| hosts | pairs | rounds | verdict | validate.yml wall s | min TCP pair Gb/s | all-reduce busbw Gb/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['hosts']} | {r['pairs']} | {r['rounds']} | {r['status']} | {r['playbook_s']} "
            f"| {r['tcp_bw_min_gbps']} | {r['allreduce_busbw_gbps']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
