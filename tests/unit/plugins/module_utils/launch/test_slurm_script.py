"""The Slurm engine's job (plugins/module_utils/launch/slurm_script.py) and its two scripts run for real by bash:
the time limit and the request's problems, the batch script's syntax and options, and the step script's
environment, records and signal hand-over (a stand-in torchrun that traps SIGTERM as the payload does).

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import grp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_script as S
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_state as Q

from tests.unit.plugins.module_utils.launch.slurm_samples import fixture

pytestmark = pytest.mark.lint

# ------------------------------------------------------------------------------------------- the request


def test_time_limit_is_past_the_deadline_and_the_grace() -> None:
    assert S.time_limit(3600, 30) == 62  # 60.5 min rounded up, and one more
    assert S.time_limit(60, 0) == 2


def test_request_problems() -> None:
    assert S.request_problems("systemd", {"elastic": True, "min_nodes": 1}, "junk", -1) == []
    assert S.request_problems("slurm", {"elastic": False}, [], 0) == []
    assert S.request_problems("slurm", {"elastic": True, "min_nodes": 1}, ["--qos=high", "--nodes=4"], "x") == [
        "train_launch_slurm_options: '--nodes=4' is set by the launch itself (train_launch_* variables)",
        "train_launch_min_nodes=1 (going on without lost nodes) is not offered through Slurm: Slurm ends the whole "
        "job when one of its nodes fails; use train_launch_scheduler=systemd",
        "train_launch_slurm_queue_timeout='x' must be 0 (no limit) or more seconds",
    ]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ("--qos=high", "must be a list of sbatch options"),
        (["--account=ml\n#SBATCH --uid=0"], "is not one sbatch option"),
        (["account=ml"], "is not one sbatch option"),
        (["-p", "x"], "is set by the launch itself"),
        (["--time=5"], "is set by the launch itself"),
    ],
)
def test_options_problems(options, problem) -> None:
    assert problem in S.options_problems(options)[0]


# ------------------------------------------------------------------------------------------- the batch script


def test_the_batch_script(tmp_path: Path) -> None:
    text = S.batch_script(
        "run1", "L1", "/var/lib/rdma-llm/runs/run1", ["mol-slurm-1", "mol-slurm-2"], 63, "train", "gpu:8", True,
        ["--account=ml", "--mem=0"],
    )  # fmt: skip
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch == [
        "#SBATCH --job-name=train-run1",
        "#SBATCH --nodes=2",
        "#SBATCH --nodelist=mol-slurm-1,mol-slurm-2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        "#SBATCH --time=63",
        "#SBATCH --partition=train",
        "#SBATCH --gres=gpu:8",
        "#SBATCH --propagate=NONE",
        "#SBATCH --output=/var/lib/rdma-llm/runs/run1/logs/slurm-%j.out",
        "#SBATCH --chdir=/var/lib/rdma-llm/runs/run1",
        "#SBATCH --comment=rdma-llm:run1:L1",
        "#SBATCH --account=ml",
        "#SBATCH --mem=0",
    ]
    assert (
        "srun --nodes=2 --ntasks-per-node=1 --whole --kill-on-bad-exit=1 /var/lib/rdma-llm/runs/run1/slurm-step.sh"
        in text.splitlines()
    )
    script = tmp_path / "batch.sh"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    # Neither --exclusive nor the empty partition and gres when not asked for.
    plain = S.batch_script("run1", "L1", "/r", ["n1"], 5, exclusive=False)
    assert "--exclusive" not in plain and "--partition" not in plain and "--gres" not in plain


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"partition": "train\nsrun rm"}, "train_launch_slurm_partition="),
        ({"gres": "gpu:8 --uid=0"}, "train_launch_slurm_gres="),
        ({"options": ["--nodelist=evil"]}, "is set by the launch itself"),
        ({"nodenames": []}, "needs at least one node"),
    ],
)
def test_the_batch_script_refuses_what_would_change_its_meaning(kwargs, error) -> None:
    args = {"run_id": "run1", "launch_id": "L1", "run_dir": "/r", "nodenames": ["n1"], "minutes": 5} | kwargs
    with pytest.raises(RuleError, match=error):
        S.batch_script(**args)


# ------------------------------------------------------------------------------------------- the step script

# A stand-in torchrun: says it started, reports the environment it got, and on SIGTERM saves (as the payload's
# handler does) and exits 143; with STANDIN_RC it exits at once with that code.
STANDIN = f"""#!{sys.executable}
import os, signal, sys, time
print("standin", sys.argv[1:], os.environ.get("NCCL_SOCKET_IFNAME"), os.environ.get("ODD"), flush=True)
print("gids", os.getgid(), os.getegid(), flush=True)
if os.environ.get("STANDIN_RC"):
    sys.exit(int(os.environ["STANDIN_RC"]))
def term(*_):
    print("standin got SIGTERM: checkpoint saved", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
open("ready", "w").close()
time.sleep(60)
"""


def _step(tmp_path: Path, env: dict[str, str], node: str = "mol-slurm-1", group: str = "") -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    standin = tmp_path / "torchrun"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    script = run_dir / S.STEP_SCRIPT
    script.write_text(
        S.step_script("lab-node1", node, 0, "run1", str(run_dir), env, [str(standin), "--nnodes=2", "train.py"], group)
    )
    script.chmod(0o755)
    return run_dir, script


def _slurm_env(job: str = "41", node: str = "mol-slurm-1") -> dict[str, str]:
    return {**os.environ, "SLURMD_NODENAME": node, "SLURM_JOB_ID": job}


def test_the_step_script_runs_this_nodes_share_and_records_it(tmp_path: Path) -> None:
    odd = 'it\'s $(touch pwned) `touch pwned2` "quoted"'
    run_dir, script = _step(tmp_path, {"NCCL_SOCKET_IFNAME": "fab0", "ODD": odd, "STANDIN_RC": "3"})
    proc = subprocess.run([str(script)], env=_slurm_env(), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3
    log = (run_dir / "logs" / "torchrun.log").read_text()
    assert f"standin ['--nnodes=2', 'train.py'] fab0 {odd}" in log
    assert not (run_dir / "pwned").exists() and not (run_dir / "pwned2").exists()
    record = Q.parse_step((run_dir / "logs" / "step-41.state").read_text())
    assert record["host"] == "lab-node1" and record["node"] == "mol-slurm-1" and record["job"] == "41"
    assert record["rc"] == 3 and record["signal"] == "" and record["end"] >= record["start"] > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="skip: setpriv --regid needs root (CAP_SETGID)")
def test_the_step_script_runs_torchrun_in_the_fabric_firewalls_group(tmp_path: Path) -> None:
    """The firewall's rule follows the training processes' group (roles/fabric_firewall): as the systemd engine's
    unit `Group=`, the step runs torchrun with that group as its real and effective one (here `daemon`, gid 1 on
    Debian); a group the node lacks leaves the job as it is and says so."""
    gid = grp.getgrnam("daemon").gr_gid
    run_dir, script = _step(tmp_path, {"STANDIN_RC": "0"}, group="daemon")
    assert subprocess.run([str(script)], env=_slurm_env(), timeout=30).returncode == 0
    assert f"gids {gid} {gid}" in (run_dir / "logs" / "torchrun.log").read_text()
    run_dir, script = _step(tmp_path / "other", {"STANDIN_RC": "0"}, group="no-such-group")
    assert subprocess.run([str(script)], env=_slurm_env(), timeout=30).returncode == 0
    log = (run_dir / "logs" / "torchrun.log").read_text()
    assert "lab-node1: the fabric firewall's rule for group no-such-group does not cover this job (uid 0)" in log
    assert f"gids {os.getgid()} {os.getegid()}" in log
    with pytest.raises(RuleError, match="'a;b' is not a group name"):
        S.step_script("lab-node1", "n1", 0, "run1", "/r", {}, ["torchrun"], "a;b")


def test_the_step_script_refuses_to_run_on_another_node(tmp_path: Path) -> None:
    run_dir, script = _step(tmp_path, {})
    proc = subprocess.run([str(script)], env=_slurm_env(node="mol-slurm-2"), capture_output=True, text=True)
    assert proc.returncode == 2
    assert "slurm-step.sh of lab-node1 (Slurm node mol-slurm-1) started on mol-slurm-2" in proc.stderr
    assert not (run_dir / "logs" / "step-41.state").exists()


def test_the_step_script_hands_sigterm_to_torchrun_and_records_it(tmp_path: Path) -> None:
    """`scancel --signal=TERM` reaches the step's task only (Slurm 22.05, proctrack/cgroup, recorded): the script
    must pass it on, wait for torchrun's own exit and record it."""
    run_dir, script = _step(tmp_path, {})
    proc = subprocess.Popen([str(script)], env=_slurm_env(), cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (run_dir / "ready").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the stand-in never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    assert "standin got SIGTERM: checkpoint saved" in (run_dir / "logs" / "torchrun.log").read_text()
    record = Q.parse_step((run_dir / "logs" / "step-41.state").read_text())
    assert record["rc"] == 143 and record["signal"] == "TERM"
    props = Q.share_props(
        f"@@step\n{(run_dir / 'logs' / 'step-41.state').read_text()}@@job\n{fixture('scontrol_show_job_cancelled.txt')}"
    )
    assert Q.share_state(props) == "stopped"


def test_the_step_script_refuses_an_environment_name_that_is_not_a_shell_name() -> None:
    with pytest.raises(RuleError, match=r"lab-node1: environment names must be shell names, got \['A B'\]"):
        S.step_script("lab-node1", "n1", 0, "run1", "/r", {"A B": "1"}, ["torchrun"])
