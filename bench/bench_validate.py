"""Wall time of the validation ladder (playbooks/validate.yml) on 2, 4 and 8 lab hosts, in one run.

  flock /tmp/rdma-llm-lab.lock .venv/bin/python bench/bench_validate.py [--hosts 2 4 8] [--pair-seconds 2]

The lab comes up once at the largest size and site.yml converges it (not timed); the ladder then runs on the
first N hosts (`--limit`, the ladder validates only the play's hosts), smallest N first, with short stress
durations. Reports the ladder's wall time, the pair rounds (N-1 for even N, N for odd N) and where the time
went (from each rung's `at` in the verdict: the steps before the pair tests, the cabling rung's LLDP reads, the
pair rounds, the collectives (all-reduce, all-gather, reduce-scatter, all-to-all: one probe run), the rest),
with the machine's cores and load average around each run. Leaves no lab behind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cluster, podman, vault  # noqa: E402

VALIDATE = ROOT / "artifacts" / "validate"


def playbook(*args: str, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(
        os.environ,
        CONTAINERS_CONF=str(podman.containers_conf()),
        ANSIBLE_VAULT_IDENTITY_LIST=vault.identity_list(os.environ.get("ANSIBLE_VAULT_IDENTITY_LIST")),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventory/lab", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        sys.exit(proc.stdout[-3000:])
    return time.monotonic() - t0, proc


def spans(verdict: dict) -> dict[str, float]:
    """Seconds per phase of the ladder, from the rungs' decision times."""
    at = {r["name"]: datetime.fromisoformat(r["at"]) for r in verdict["rungs"] if r.get("at")}
    start, end = datetime.fromisoformat(verdict["started"]), datetime.fromisoformat(verdict["finished"])

    def between(a: datetime | None, b: datetime | None) -> float | None:
        return round((b - a).total_seconds(), 1) if a and b else None

    return {
        "to_path_mtu_s": between(start, at.get("path_mtu")),
        # The cabling rung (LLDP reads) sits between path_mtu and the pair rounds where the ladder has it.
        "cabling_s": between(at.get("path_mtu"), at.get("cabling")),
        "pairs_s": between(at.get("cabling") or at.get("path_mtu"), at.get("tcp_bw")),
        # The all-reduce and the other collectives are one probe run: both rungs are its time.
        "allreduce_s": between(at.get("tcp_bw"), at.get("collectives") or at.get("allreduce")),
        "rest_s": between(at.get("collectives") or at.get("allreduce"), end),
    }


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--pair-seconds", type=int, default=2)
    args = ap.parse_args()
    rows = []
    try:
        cluster.down()
        hosts = cluster.up(max(args.hosts))["hosts"]
        playbook("playbooks/site.yml")
        for n in sorted(args.hosts):
            before = {p.name for p in VALIDATE.iterdir()} if VALIDATE.exists() else set()
            load_before = load()
            took, _ = playbook(
                "playbooks/validate.yml", "--limit", ",".join(hosts[:n]), "-e", f"pair_seconds={args.pair_seconds}",
                check=False,
            )  # fmt: skip
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
                    **spans(verdict),
                    "load_before": load_before,
                    "load_after": load(),
                    "tcp_bw_min_gbps": next((r["value"] for r in verdict["rungs"] if r["name"] == "tcp_bw"), None),
                    "allreduce_busbw_gbps": next(
                        (r["value"] for r in verdict["rungs"] if r["name"] == "allreduce"), None
                    ),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.down()
    cpu = platform.processor() or platform.machine()
    print(f"\nmachine: {os.cpu_count()} cores, {cpu}, pair tests {args.pair_seconds} s")
    print(
        "\n| hosts | pairs | rounds | verdict | validate.yml wall s | to path_mtu s | cabling s | pair rounds s "
        "| s per round | collectives s | rest s | min TCP pair Gb/s | all-reduce busbw Gb/s | load avg before → after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per_round = round(r["pairs_s"] / r["rounds"], 1) if r["pairs_s"] else None
        print(
            f"| {r['hosts']} | {r['pairs']} | {r['rounds']} | {r['status']} | {r['playbook_s']} | {r['to_path_mtu_s']} "
            f"| {r['cabling_s']} | {r['pairs_s']} | {per_round} | {r['allreduce_s']} | {r['rest_s']} "
            f"| {r['tcp_bw_min_gbps']} | {r['allreduce_busbw_gbps']} | {r['load_before']} → {r['load_after']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
