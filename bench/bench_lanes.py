"""The CPU a lab host gets beside the test suite's other lane: podman's parent group against the lab's own.

  .venv/bin/python bench/bench_lanes.py [--seconds 10] [--rounds 2]

Two lab-image containers stand for the lab's two training ranks (one counting loop each). Beside them, as the
rest's lane of `make test` does: four nice-10 counting processes on the machine (payload training, Molecule's
controller) and one loop in a third container (a Molecule instance in podman's default group). Three layouts,
interleaved each round:
  alone   the two lab loops and nothing else;
  podman  the lab's containers in podman's default parent group (how the lab ran before lab/cgroups.py);
  groups  the lab's containers in the lab's group (LAB_SHARES), the four processes in the rest's (REST_SHARES).
Prints each loop's count (thousands of iterations) and the lab loops' share of what they count alone. Needs the
lab image (`python -m lab image`) and a writable cgroup v1 cpu hierarchy; makes its own containers and groups
and removes them. docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import cgroups, podman  # noqa: E402
from lab.image import ensure_image  # noqa: E402

COUNT = """import sys, time
end = time.time() + float(sys.argv[1]); n = 0
while time.time() < end:
    for _ in range(10000):
        n += 1
print(n // 1000)
"""
PREFIX = "bench-lanes-"
LAB_GROUP, REST_GROUP = "rdma_llm_bench_lab", "rdma_llm_bench_rest"


def start(name: str, image: str, script: Path, parent: str | None) -> None:
    podman.run(
        "run", "-d", "--name", PREFIX + name, "--cpu-shares=8192", *([f"--cgroup-parent={parent}"] if parent else []),
        "-v", f"{script}:/count.py:ro", image, "sleep", "infinity",
    )  # fmt: skip


def layout(kind: str, seconds: float, script: Path) -> dict[str, list[int]]:
    lab = ["g1", "g2"] if kind == "groups" else ["p1", "p2"]
    procs: dict[str, list[subprocess.Popen]] = {"lab": [], "rest": [], "molecule": []}
    if kind != "alone":
        for _ in range(4):
            pre = f"echo $$ > /sys/fs/cgroup/cpu/{REST_GROUP}/cgroup.procs; " if kind == "groups" else ""
            cmd = f"{pre}exec nice -n 10 {sys.executable} {script} {seconds}"
            procs["rest"].append(subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, text=True))
        procs["molecule"].append(
            subprocess.Popen(podman_exec("m", seconds), stdout=subprocess.PIPE, text=True, env=podman.env())
        )
    for name in lab:
        procs["lab"].append(
            subprocess.Popen(podman_exec(name, seconds), stdout=subprocess.PIPE, text=True, env=podman.env())
        )
    return {role: [int(p.communicate()[0]) for p in ps] for role, ps in procs.items()}


def podman_exec(name: str, seconds: float) -> list[str]:
    return ["podman", "exec", PREFIX + name, "python3", "/count.py", str(seconds)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    lab_parent = cgroups.cpu_group(LAB_GROUP, cgroups.LAB_SHARES)
    if lab_parent is None or cgroups.cpu_group(REST_GROUP, cgroups.REST_SHARES) is None:
        print("skip: no writable cgroup v1 cpu hierarchy")
        return 0
    image = ensure_image(lambda m: print(m, file=sys.stderr))
    results: dict[str, list[dict[str, list[int]]]] = {"alone": [], "podman": [], "groups": []}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "count.py"
        script.write_text(COUNT)
        os.chmod(tmp, 0o755)
        try:
            for name in ("p1", "p2", "m"):
                start(name, image, script, None)
            for name in ("g1", "g2"):
                start(name, image, script, lab_parent)
            for r in range(args.rounds):
                order = list(results) if r % 2 == 0 else list(reversed(results))
                for kind in order:
                    results[kind].append(layout(kind, args.seconds, script))
        finally:
            names = [PREFIX + n for n in ("p1", "p2", "m", "g1", "g2")]
            podman.run("rm", "-f", "-t", "0", *names, check=False)
            cgroups.remove(LAB_GROUP)
            cgroups.remove(REST_GROUP)
    alone = statistics.median(sum(r["lab"]) for r in results["alone"])
    print(f"{'layout':<8} {'lab loops (k)':<24} {'rest x4 (k)':<30} {'molecule (k)':<14} lab share of alone")
    for kind, rounds in results.items():
        for r in rounds:
            share = sum(r["lab"]) / alone
            print(
                f"{kind:<8} {' '.join(map(str, r['lab'])):<24} {' '.join(map(str, r['rest'])) or '-':<30} "
                f"{' '.join(map(str, r['molecule'])) or '-':<14} {share:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
