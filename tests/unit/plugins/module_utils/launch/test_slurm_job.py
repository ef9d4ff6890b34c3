"""The launch's Slurm engine (plugins/module_utils/launch/slurm_job.py) on recorded Slurm outputs, and its two scripts
run for real by bash: the batch script's syntax and options, and the step script's environment, records and
signal hand-over (a stand-in torchrun that traps SIGTERM as the payload does).

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import grp
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as S
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import train as T

from tests.conftest import ROOT

pytestmark = pytest.mark.lint

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def share(job_fixture: str, step: str = "") -> dict[str, str]:
    """A node's share as the watch reads it: its step record and `scontrol show job`."""
    return S.share_props(f"@@step\n{step}@@job\n{fixture(job_fixture)}")


START = "host=lab-node1\nnode=mol-slurm-1\njob=3\nstart=1764162463.5\n"


# ------------------------------------------------------------------------------------------- what Slurm says


@pytest.mark.parametrize(
    ("sample", "state", "reason"),
    [
        ("scontrol_show_job_pending.txt", "PENDING", "Resources"),
        ("scontrol_show_job_running.txt", "RUNNING", "None"),
        ("scontrol_show_job_completed.txt", "COMPLETED", "None"),
        ("scontrol_show_job_cancelled.txt", "CANCELLED", "None"),
        ("scontrol_show_job_failed.txt", "FAILED", "NonZeroExitCode"),
        ("scontrol_show_job_timeout.txt", "TIMEOUT", "TimeLimit"),
        ("scontrol_show_job_requeued_held.txt", "PENDING", "launch_failed_requeued_held"),
    ],
)
def test_parse_job_reads_the_recorded_records(sample, state, reason) -> None:
    job = S.parse_job(fixture(sample))
    assert (job["JobState"], job["Reason"]) == (state, reason)
    # Keys with `:` and `/` are keys, and a value runs to the next key.
    assert job["AllocNode:Sid"].startswith("mol-slurm-ctl:") and job["CPUs/Task"] == "1"
    assert job["Partition"] == "train" and job["StdIn"] == "/dev/null"


def test_a_forgotten_job_is_no_record() -> None:
    assert S.parse_job(fixture("scontrol_show_job_invalid.txt")) == {}
    assert S.parse_job("") == {}


def test_a_nodes_reason_keeps_its_words_to_the_end_of_the_line() -> None:
    node = S.parse_fields(fixture("scontrol_show_node_drained_by_check.txt").strip())
    assert node["NodeName"] == "mol-slurm-2" and node["State"] == "IDLE+DRAIN"
    assert node["Reason"] == "rdma-node-check: test failure [root@2026-11-26T13:06:53]"


@pytest.mark.parametrize(("stdout", "job_id"), [("12\n", "12"), ("12;lab\n", "12"), ("sbatch: warning: x\n57\n", "57")])
def test_sbatch_job_id(stdout, job_id) -> None:
    assert S.sbatch_job_id(stdout) == job_id


def test_sbatch_without_a_job_id_is_an_error() -> None:
    with pytest.raises(RuleError, match="sbatch did not print a job id: 'Submitted batch job'"):
        S.sbatch_job_id("Submitted batch job")


def test_parse_queue() -> None:
    assert S.parse_queue(fixture("squeue_name.txt")) == [
        {"id": "7", "state": "PENDING", "reason": "Resources", "start": "N/A", "nodes": ""},
        {"id": "6", "state": "RUNNING", "reason": "None", "start": "2026-11-26T13:09:16", "nodes": "mol-slurm-[1-2]"},
    ]


def test_a_second_launch_of_a_run_still_queued_is_refused_naming_the_job() -> None:
    problems = S.queue_problems(S.parse_queue(fixture("squeue_name.txt")), "run1")
    assert problems[0] == (
        "Slurm job 7 of run run1 is still PENDING (Resources): stop it first (playbooks/train_stop.yml -e run_id=run1)"
    )
    assert len(problems) == 2 and S.queue_problems([], "run1") == []


# ------------------------------------------------------------------------------------------- one node's share


@pytest.mark.parametrize(
    ("sample", "step", "state", "why"),
    [
        ("scontrol_show_job_pending.txt", "", "pending", ""),
        ("scontrol_show_job_running.txt", "", "running", ""),  # the step has not started on this node yet
        ("scontrol_show_job_running.txt", START, "running", ""),
        ("scontrol_show_job_completed.txt", START + "end=1764162480.1\nrc=0\nsignal=\n", "completed", ""),
        ("scontrol_show_job_cancelled.txt", START + "end=1764162459.0\nrc=143\nsignal=TERM\n", "stopped", ""),
        ("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=1\nsignal=\n", "failed", ""),
        (
            "scontrol_show_job_timeout.txt",
            START + "end=1764162692.0\nrc=143\nsignal=TERM\n",
            "failed",
            "Slurm job 8 reached its time limit (TIMEOUT)",
        ),
        (
            "scontrol_show_job_requeued_held.txt",
            "",
            "failed",
            "Slurm job 1 cannot start: PENDING (launch_failed_requeued_held), requeued after its launch failed "
            "(a node's prolog failed: see the nodes' drain reasons)",
        ),
        (
            "scontrol_show_job_cancelled.txt",
            START,
            "stopped",
            "Slurm job 4 ended CANCELLED before this node's step recorded its end (killed: SIGKILL after KillWait)",
        ),
        ("scontrol_show_job_invalid.txt", "", "missing", ""),
    ],
)
def test_share_state(sample, step, state, why) -> None:
    props = S.share_props(f"@@step\n{step}@@job\n{fixture(sample)}")
    assert S.share_state(props) == state
    assert props.get("Why", "") == why
    # The watch's outcome rules read both engines through one function.
    assert T.unit_state(props) == state


def test_a_share_reads_as_the_systemd_engines_unit_properties() -> None:
    props = share("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=1\nsignal=\n")
    assert props["Engine"] == "slurm" and props["JobId"] == "5" and props["ExitCode"] == "143:0"
    assert props["ExecMainStartTimestamp"] == "@1764162463.5" and props["ExecMainExitTimestamp"] == "@1764162544.0"
    assert (props["ExecMainCode"], props["ExecMainStatus"], props["Result"]) == ("exited", "1", "exit-code")
    assert T.systemd_time(props["ExecMainStartTimestamp"]) == 1764162463.5


def test_a_torchrun_ended_by_a_signal_reads_as_killed() -> None:
    props = share("scontrol_show_job_failed.txt", START + "end=1764162544.0\nrc=137\nsignal=\n")
    assert (props["ExecMainCode"], props["ExecMainStatus"], props["Result"]) == ("killed", "9", "signal")
    assert S.share_state(props) == "failed"


def test_the_poll_of_a_slurm_share_splits_as_the_systemd_one(tmp_path: Path) -> None:
    """poll_script's Slurm head run by sh with a stand-in scontrol that prints a recorded record: the watch's
    parse_poll gets the share, the link state, the metrics and the worker failures."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "out").mkdir()
    (run_dir / "logs" / "step-3.state").write_text(START)
    (run_dir / "out" / "metrics.jsonl").write_text('{"rank": 0, "step": 4, "loss": 3.5}\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        f"#!/bin/sh\ncat {shlex.quote(str(FIXTURES / 'scontrol_show_job_running.txt'))}\n"
    )
    (bin_dir / "scontrol").chmod(0o755)
    script = T.poll_script("train-run1", str(run_dir), "lo", "L1", "slurm", "3")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props, link, metrics, failures = T.parse_poll(out)
    assert props["JobId"] == "3" and props["ExecMainStartTimestamp"] == "@1764162463.5"
    assert T.unit_state(props) == "running"
    assert link == "unknown" and metrics == {"rank": 0, "step": 4, "loss": 3.5} and failures == []
    # Once Slurm forgot the job, the copy collect saved beside the logs answers.
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\n")
    (run_dir / "logs" / "slurm-job-3.show").write_text(fixture("scontrol_show_job_completed.txt"))
    with (run_dir / "logs" / "step-3.state").open("a") as f:
        f.write("end=1764162480.1\nrc=0\nsignal=\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props = T.parse_poll(out)[0]
    assert props["JobState"] == "COMPLETED" and T.unit_state(props) == "completed"


def test_the_queued_line() -> None:
    props = share("scontrol_show_job_pending.txt")
    assert S.queued_line(42.4, props) == "[   42 s] queued: Slurm job 7 PENDING (Resources)"


# ------------------------------------------------------------------------------------------- the outcome


def test_a_job_waiting_in_the_queue_is_pending_not_running() -> None:
    props = share("scontrol_show_job_pending.txt")
    jobs = {h: {"state": "pending", "unit": props} for h in ("n1", "n2")}
    got = T.job_outcome(jobs, False, ["n1", "n2"])
    assert got["outcome"] == "pending"
    assert got["message"] == "Slurm job 7 waits in the queue (PENDING, Resources)"


def test_a_cancelled_slurm_job_says_scancel() -> None:
    props = share("scontrol_show_job_cancelled.txt", START + "end=1764162459.0\nrc=143\nsignal=TERM\n")
    jobs = {"n1": {"state": "stopped", "unit": props, "ended": 1764162459.0}, "n2": {"state": "running", "unit": {}}}
    got = T.job_outcome(jobs, False, ["n1", "n2"])
    assert got["outcome"] == "failed"
    assert "n1: its Slurm job was cancelled (train_stop.yml or scancel)" in got["message"]


def test_a_slurm_cause_is_the_message() -> None:
    props = share("scontrol_show_job_timeout.txt", START + "end=1764162692.0\nrc=143\nsignal=TERM\n")
    jobs = {"n1": {"state": "failed", "unit": props, "ended": 1764162692.0, "why": props["Why"]}}
    assert "Slurm job 8 reached its time limit (TIMEOUT)" in T.job_outcome(jobs, False, ["n1"])["message"]


# ------------------------------------------------------------------------------------------- the nodes

ALIASES = {"lab-node1": ["mol-slurm-1", "10.0.0.1"], "lab-node2": ["lab-node2", "mol-slurm-2"]}


def test_node_map_finds_each_host_by_any_of_its_names() -> None:
    found = S.node_map(fixture("scontrol_show_nodes_idle.txt"), ALIASES)
    assert {h: n["NodeName"] for h, n in found.items()} == {"lab-node1": "mol-slurm-1", "lab-node2": "mol-slurm-2"}
    assert S.node_problems(sorted(ALIASES), found, ALIASES) == []
    assert S.node_problems(sorted(ALIASES), found, ALIASES, partition="train") == []


def test_node_problems_name_the_host_and_the_drain_reason() -> None:
    nodes = (
        fixture("scontrol_show_nodes_idle.txt").splitlines()[0]
        + "\n"
        + fixture("scontrol_show_node_drained_by_check.txt")
    )
    aliases = {**ALIASES, "lab-node3": ["lab-node3", "10.0.0.3"]}
    found = S.node_map(nodes, aliases)
    assert S.node_problems(["lab-node1", "lab-node2", "lab-node3"], found, aliases, partition="gpu") == [
        "lab-node1: Slurm node mol-slurm-1 is not in partition gpu (its partitions: train)",
        "lab-node2: Slurm node mol-slurm-2 is not in partition gpu (its partitions: train)",
        "lab-node2: Slurm node mol-slurm-2 is IDLE+DRAIN: rdma-node-check: test failure [root@2026-11-26T13:06:53]"
        " (the job would wait until it returns)",
        "lab-node3: not a Slurm node (no NodeName, NodeHostName or NodeAddr is one of lab-node3, 10.0.0.3)",
    ]


@pytest.mark.parametrize(
    ("state", "words"),
    [("IDLE", ["IDLE"]), ("IDLE+DRAIN", ["IDLE", "DRAIN"]), ("DOWN*", ["DOWN", "NOT_RESPONDING"])],
)
def test_node_words(state, words) -> None:
    assert S.node_words({"State": state}) == words


def test_aliases_are_the_names_slurm_may_know_a_host_by() -> None:
    hostvars = {
        "lab-node1.example": {
            "__train_launch_reg_hostname": {"stdout": "node1\n"},
            "ansible_host": "192.0.2.1",
            "__train_launch_fabric_ip": "10.0.0.1",
        }
    }
    assert S.aliases(["lab-node1.example"], hostvars) == {
        "lab-node1.example": ["node1", "lab-node1.example", "lab-node1", "192.0.2.1", "10.0.0.1"]
    }


# ------------------------------------------------------------------------------------------- the topology


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("mol-slurm-[1-2]", ["mol-slurm-1", "mol-slurm-2"]),
        ("n[01-03,7],login", ["n01", "n02", "n03", "n7", "login"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("", []),
    ],
)
def test_expand_hostlist(text, names) -> None:
    assert S.expand_hostlist(text) == names


def test_the_topology_slurm_reports_against_the_inventorys() -> None:
    reported = fixture("scontrol_show_topology_leaf_spine.txt")
    assert S.parse_topology(reported) == {
        "lab-leaf1": {"nodes": ["mol-slurm-1"], "switches": []},
        "lab-leaf2": {"nodes": ["mol-slurm-2"], "switches": []},
        "lab-spine1": {"nodes": [], "switches": ["lab-leaf1", "lab-leaf2"]},
    }
    conf = [
        "SwitchName=lab-leaf1 Nodes=mol-slurm-1",
        "SwitchName=lab-leaf2 Nodes=mol-slurm-2",
        "SwitchName=lab-spine1 Switches=lab-leaf[1-2]",
    ]
    assert S.topology_differences(conf, reported) == []
    moved = ["SwitchName=lab-leaf1 Nodes=mol-slurm-[1-2]", "SwitchName=lab-spine1 Switches=lab-leaf1"]
    assert S.topology_differences(moved, reported) == [
        "lab-leaf1: nodes mol-slurm-1 in Slurm, mol-slurm-1,mol-slurm-2 from the inventory",
        "Slurm has switch lab-leaf2, which the inventory's switches do not give",
        "lab-spine1: switches lab-leaf1,lab-leaf2 in Slurm, lab-leaf1 from the inventory",
    ]
    assert S.topology_differences(conf, fixture("scontrol_show_topology_none.txt")) == [
        f"switch {sw} is missing in Slurm's topology" for sw in ("lab-leaf1", "lab-leaf2", "lab-spine1")
    ]


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
    record = S.parse_step((run_dir / "logs" / "step-41.state").read_text())
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
    record = S.parse_step((run_dir / "logs" / "step-41.state").read_text())
    assert record["rc"] == 143 and record["signal"] == "TERM"
    props = S.share_props(
        f"@@step\n{(run_dir / 'logs' / 'step-41.state').read_text()}@@job\n{fixture('scontrol_show_job_cancelled.txt')}"
    )
    assert S.share_state(props) == "stopped"


def test_the_step_script_refuses_an_environment_name_that_is_not_a_shell_name() -> None:
    with pytest.raises(RuleError, match=r"lab-node1: environment names must be shell names, got \['A B'\]"):
        S.step_script("lab-node1", "n1", 0, "run1", "/r", {"A B": "1"}, ["torchrun"])


# ------------------------------------------------------------------------------------------- the submit host's commands


class FakeSlurm:
    """sbatch/scontrol/scancel on the submit host: the job's state follows a script of recorded records."""

    def __init__(self, states: list[str]):
        self.states, self.calls = list(states), []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(" ".join(argv))
        if argv[0] == "scontrol":
            name = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return 0, fixture(f"scontrol_show_job_{name}.txt"), ""
        return 0, "", ""


def test_cancel_sends_sigterm_then_scancel_after_the_grace() -> None:
    run = FakeSlurm(["running"] * 5 + ["cancelled"])
    got = S.cancel(run, "3", grace=2, kill_wait=5, sleep=lambda s: None)
    assert got == {"changed": True, "state": "CANCELLED", "steps": ["scancel --signal=TERM", "scancel after 2 s"]}
    assert [c for c in run.calls if c.startswith("scancel")] == ["scancel --signal=TERM 3", "scancel 3"]


def test_cancel_after_the_payload_stopped_by_itself_sends_nothing_more() -> None:
    run = FakeSlurm(["running", "running", "cancelled"])
    got = S.cancel(run, "3", grace=30, kill_wait=5, sleep=lambda s: None)
    assert got["steps"] == ["scancel --signal=TERM"] and got["state"] == "CANCELLED"


def test_cancel_of_a_pending_job_and_of_an_ended_one() -> None:
    run = FakeSlurm(["pending", "cancelled"])
    assert S.cancel(run, "7", grace=30, sleep=lambda s: None)["steps"] == ["scancel (pending)"]
    run = FakeSlurm(["completed"])
    assert S.cancel(run, "7", grace=30, sleep=lambda s: None) == {"changed": False, "state": "COMPLETED", "steps": []}
    assert not [c for c in run.calls if c.startswith("scancel")]
    run = FakeSlurm(["invalid"])
    assert S.cancel(run, "7", grace=30, sleep=lambda s: None)["state"] == "gone"


def test_submit_returns_the_job_id_or_sbatchs_own_words() -> None:
    assert S.submit(lambda argv: (0, "12\n", ""), "/r/b.sh") == {"job_id": "12", "stdout": "12"}
    refusal = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    with pytest.raises(RuleError, match="sbatch refused the job: " + refusal):
        S.submit(lambda argv: (1, "", refusal + "\n"), "/r/b.sh")


class FakeAccounting:
    """scontrol and sacct on the submit host: scontrol answers one recorded record, sacct a script of recorded
    outputs (the last one repeats); rc 1 for sacct where `sacct_rc` says so (accounting off)."""

    def __init__(self, job: str, sacct: list[str], sacct_rc: int = 0):
        self.job, self.sacct, self.sacct_rc, self.calls = job, list(sacct), sacct_rc, []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv[0])
        if argv[0] == "scontrol":
            return 0, fixture(f"scontrol_show_job_{self.job}.txt"), ""
        if self.sacct_rc:
            return self.sacct_rc, "", "sacct: error: Problem talking to the database: Connection refused\n"
        name = self.sacct.pop(0) if len(self.sacct) > 1 else self.sacct[0]
        return 0, fixture(f"sacct_{name}.txt"), ""


def test_accounting_of_an_ended_job_waits_until_slurmdbd_shows_its_end() -> None:
    run, slept = FakeAccounting("completed", ["running", "running", "completed"]), []
    got = S.accounting(run, "7", "COMPLETED", wait=10, sleep=slept.append)
    assert got == fixture("sacct_completed.txt") and len(slept) == 2
    assert got.splitlines()[1].split("|")[2] == "COMPLETED"


def test_accounting_reads_an_active_job_once_and_gives_up_waiting_after_wait() -> None:
    run, slept = FakeAccounting("running", ["running"]), []
    assert S.accounting(run, "7", "RUNNING", wait=10, sleep=slept.append) == fixture("sacct_running.txt")
    assert slept == [] and run.calls == ["sacct"]
    run = FakeAccounting("completed", ["running"])
    assert S.accounting(run, "7", "COMPLETED", wait=3, sleep=slept.append) == fixture("sacct_running.txt")
    assert len(slept) == 2 and run.calls == ["sacct"] * 3


def test_accounting_is_empty_where_slurm_keeps_none() -> None:
    assert S.accounting(FakeAccounting("completed", ["completed"], sacct_rc=1), "7", "", sleep=lambda s: None) == ""


def test_record_writes_the_job_and_its_accounting_beside_the_logs(tmp_path) -> None:
    got = S.record(FakeAccounting("completed", ["completed"]), "7", str(tmp_path), sleep=lambda s: None)
    assert got == {"saved": True, "accounted": True}
    assert (tmp_path / "slurm-job-7.show").read_text().startswith("JobId=7 ")
    assert (tmp_path / "slurm-job-7.sacct").read_text() == fixture("sacct_completed.txt").strip() + "\n"
    # Slurm forgot the job (MinJobAge) and keeps no accounting: nothing to write.
    forgot = FakeAccounting("invalid", ["completed"], sacct_rc=1)
    assert S.record(forgot, "7", str(tmp_path / "none"), sleep=lambda s: None) == {"saved": False, "accounted": False}
