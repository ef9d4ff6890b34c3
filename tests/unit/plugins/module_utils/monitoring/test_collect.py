"""What rdma-llm-metrics reads, collector by collector (monitoring/collect.py), on fake trees under a root and with
the tools' recorded outputs (tests/fixtures/monitoring/README.md names each): the node check's kept result, the
H100 node's RDMA ports and an mlx5 `ethtool -S`, the H200's `nvidia-smi -q -x`, the lab's Slurm, training runs laid
out as the launch lays them out; and the tool runner's timeout on real processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.cli import main as node_check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import RESULT_FILE

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import fixture, names, parse, series, value
from tests.unit.plugins.module_utils.monitoring.test_slurm import SDIAG
from tests.unit.plugins.module_utils.monitoring.test_training import start, train
from tests.unit.plugins.module_utils.node.helpers import FakeTools, fake_root, lab_root, net, tool, write, write_config

NOW = 1795698900.0  # 2026-11-26T13:15:00Z
STATE = "/var/lib/rdma-llm"
SMI = fixture("node_check/nvidia_smi_h200.xml")
NODES = fixture("slurm/scontrol_show_nodes_idle.txt")
SQUEUE = fixture("slurm/squeue_name.txt")
UNREACHABLE = "slurm_load_node error: Unable to contact slurm controller (connect failure)"  # test_slurm.py's


def host(root: Path, outputs: dict | None = None, now: float = NOW) -> tuple[collect.Host, FakeTools]:
    tools = FakeTools(outputs or {})
    return collect.Host(Path(root), tools.run, 5, now), tools


# ------------------------------------------------------------------------------------------------ the runner
def test_the_runner_gives_a_tools_status_and_output_and_none_when_it_is_not_installed(tmp_path: Path) -> None:
    tool(tmp_path, "probe", "echo out; echo err >&2; exit 3\n")
    path = str(tmp_path / "tools")
    assert collect.run_command(["probe"], 5, path) == {"rc": 3, "out": "out\n", "err": "err\n"}
    assert collect.run_command(["not-there"], 5, path) is None


def test_a_hung_tool_is_killed_with_what_it_started(tmp_path: Path) -> None:
    """A tool past its timeout is killed with its process group: a child it left holding the output (a shell's
    background job) would otherwise keep the collector waiting after the tool itself was killed."""
    tool(tmp_path, "hangs", "sleep 30 &\nwait\n")
    began = time.monotonic()
    res = collect.run_command(["hangs"], 0.5, str(tmp_path / "tools"))
    assert res == {"rc": 124, "out": "", "err": "hangs did not finish within 0.5 s"}
    assert time.monotonic() - began < collect.KILL_WAIT_S - 2


# ----------------------------------------------------------------------------------------------- node_health
def keep(root: Path, text: str, mtime: float | None = None) -> Path:
    path = root / STATE.lstrip("/") / RESULT_FILE
    write(path, text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_the_node_checks_kept_result_check_by_check(tmp_path: Path) -> None:
    result = json.loads(fixture("node_check/node_check_gpu_h200.json"))
    keep(tmp_path, json.dumps(result) + "\n")  # one line, as rdma-node-check keeps it
    text, problems = collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0])
    assert problems == []
    assert value(text, "rdma_llm_node_check_verdict") == 0
    assert value(text, "rdma_llm_node_check_timestamp_seconds") == 1795719443  # 2026-11-26T18:57:23Z, the result's
    assert value(text, "rdma_llm_node_check_status", check="gpu retired pages", index=0) == 3  # skipped
    assert value(text, "rdma_llm_node_check_value", check="gpus", index=0, unit="") == 1
    # The recording as it is (pretty-printed) reads the same.
    keep(tmp_path, fixture("node_check/node_check_gpu_h200.json"))
    assert collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0]) == (text, [])


def test_what_rdma_node_check_keeps_is_what_the_collector_reads(tmp_path: Path, capsys, monkeypatch) -> None:
    """The command itself, on a lab node, with the state dir under the root; then a config it cannot use: its
    error result has no time, so the file's time is the reading's."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    state = tmp_path / STATE.lstrip("/")
    state.mkdir(parents=True)
    cfg = str(write_config(tmp_path))
    assert node_check(["--config", cfg, "--root", str(lab_root(tmp_path)), "--state-dir", str(state)]) == 0
    printed = json.loads(capsys.readouterr().out)
    text, problems = collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0])
    assert problems == [] and value(text, "rdma_llm_node_check_verdict") == 0
    statuses = series(text, "rdma_llm_node_check_status")
    assert len(statuses) == len(printed["checks"]) and statuses[(("check", "mtu"), ("index", "0"))] == 0
    (tmp_path / "bad.json").write_text('{"interfaces": []}')
    assert node_check(["--config", str(tmp_path / "bad.json"), "--state-dir", str(state), "--brief"]) == 3
    os.utime(state / RESULT_FILE, (NOW - 60, NOW - 60))
    text, problems = collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0])
    assert problems == []  # read: the check could not run, which its verdict says
    assert parse(text) == {
        ("rdma_llm_node_check_verdict", ()): 3,
        ("rdma_llm_node_check_timestamp_seconds", ()): NOW - 60,
    }


def test_no_result_is_could_not_check_with_no_time(tmp_path: Path) -> None:
    text, problems = collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0])
    assert parse(text) == {("rdma_llm_node_check_verdict", ()): 3}
    kept = f"{tmp_path}{STATE}/{RESULT_FILE}"
    assert problems == [f"no result in {kept} (rdma-node-check has not run with this state dir)"]
    keep(tmp_path, "not json\n")
    text, problems = collect.read_node_health({"state_dir": STATE}, host(tmp_path)[0])
    assert parse(text) == {("rdma_llm_node_check_verdict", ()): 3}
    assert problems == [f"{kept} holds no result of rdma-node-check"]


# ------------------------------------------------------------------------------------------------------ rdma
def test_the_ports_hw_counters_and_the_interfaces_pause_counters(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    net(root, "ib0", mtu="4092")
    h, tools = host(root, {"ethtool -S": fixture("node_check/ethtool_mlx5_pfc_prio3.txt")})
    text, problems = collect.read_rdma({"interfaces": ["ib0"]}, h)
    assert problems == [] and tools.calls == [["ethtool", "-S", "ib0"]]
    oob = int((root / "sys/class/infiniband/mlx5_bond_0/ports/1/hw_counters/out_of_buffer").read_text())
    assert value(text, "rdma_llm_rdma_hw_counter_total", device="mlx5_bond_0", port=1, counter="out_of_buffer") == oob
    where = {"interface": "ib0", "priority": 3}
    assert value(text, "rdma_llm_nic_pfc_pause_frames_total", **where, direction="sent") == 1290418
    assert value(text, "rdma_llm_nic_pfc_pause_seconds_total", **where, direction="received") == 0.008134


def test_an_interface_that_is_not_there_or_not_read_is_a_failed_read(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    net(root, "ib0")
    net(root, "ib1")
    # Ours: a refusal of ethtool's, after it printed the counters all the same: what a failed read printed is unused.
    failing = {"rc": 1, "out": fixture("node_check/ethtool_mlx5_pfc_prio3.txt"), "err": "no stats available\n"}
    h, _ = host(root, {"ethtool -S": failing})
    text, problems = collect.read_rdma({"interfaces": ["ib0", "rdma7"]}, h)
    assert problems == ["ethtool -S ib0: no stats available", "rdma7: no such network interface"]
    assert names(text) == {"rdma_llm_rdma_hw_counter_total"}  # the ports are read all the same
    text, problems = collect.read_rdma({"interfaces": ["ib0", "ib1"]}, host(root)[0])
    assert problems == ["ethtool is not installed"]
    assert collect.read_rdma({"interfaces": []}, host(tmp_path / "empty")[0]) == ("", [])  # no RDMA device


# ------------------------------------------------------------------------------------------------------- gpu
def test_the_gpu_as_nvidia_smi_reads_it(tmp_path: Path) -> None:
    h, tools = host(tmp_path, {"nvidia-smi -q": SMI})
    text, problems = collect.read_gpu({}, h)
    assert problems == [] and tools.calls == [["nvidia-smi", "-q", "-x"]]
    assert value(text, "rdma_llm_gpu_present") == 1
    assert value(text, "rdma_llm_gpu_memory_total_bytes", gpu=0) == 143771 * 2**20


def test_no_nvidia_smi_is_no_gpu_and_a_failing_one_a_failed_read(tmp_path: Path) -> None:
    absent = {("rdma_llm_gpu_present", ()): 0}
    text, problems = collect.read_gpu({}, host(tmp_path)[0])
    assert (parse(text), problems) == (absent, [])
    no_driver = {"rc": 9, "out": fixture("monitoring/nvidia_smi_no_driver.txt"), "err": ""}
    text, problems = collect.read_gpu({}, host(tmp_path, {"nvidia-smi -q": no_driver})[0])
    assert parse(text) == absent
    assert problems == ["nvidia-smi -q -x: " + fixture("monitoring/nvidia_smi_no_driver.txt").strip()[:160]]
    text, problems = collect.read_gpu({}, host(tmp_path, {"nvidia-smi -q": SMI[: len(SMI) // 2]})[0])
    assert (parse(text), problems) == (absent, ["nvidia-smi -q -x: its output is not nvidia-smi's XML"])


# ----------------------------------------------------------------------------------------------------- slurm
def test_slurm_as_the_controller_answers(tmp_path: Path) -> None:
    h, tools = host(tmp_path, {"scontrol show": NODES, "squeue --noheader": SQUEUE, "sdiag": SDIAG})
    text, problems = collect.read_slurm({}, h)
    assert problems == []
    assert tools.calls == [
        ["scontrol", "show", "nodes", "--oneliner"],
        ["squeue", "--noheader", "--format=%i|%T|%r|%S|%N"],
        ["sdiag"],
    ]
    assert value(text, "rdma_llm_slurm_up") == 1 and value(text, "rdma_llm_slurm_nodes", state="idle") == 2
    assert value(text, "rdma_llm_slurm_jobs", state="pending") == 1
    assert value(text, "rdma_llm_slurm_server_threads") == 3


@pytest.mark.parametrize(
    ("nodes", "said"),
    [
        ({"rc": 1, "out": "", "err": UNREACHABLE + "\n"}, f"controller unreachable ({UNREACHABLE})"),
        ({"rc": 124, "out": "", "err": "scontrol did not finish within 5 s"}, "controller unreachable (scontrol had"),
    ],
)
def test_a_controller_that_does_not_answer_is_up_0_alone(tmp_path: Path, nodes: dict, said: str) -> None:
    h, tools = host(tmp_path, {"scontrol show": nodes, "squeue --noheader": SQUEUE, "sdiag": SDIAG})
    text, problems = collect.read_slurm({}, h)
    assert parse(text) == {("rdma_llm_slurm_up", ()): 0}
    assert len(problems) == 1 and problems[0].startswith(f"scontrol show nodes --oneliner: {said}"), problems
    assert len(tools.calls) == 1  # nothing else asked of a silent controller
    text, problems = collect.read_slurm({}, host(tmp_path)[0])
    assert (parse(text), problems) == ({("rdma_llm_slurm_up", ()): 0}, ["scontrol is not installed"])


def test_a_failed_squeue_leaves_the_job_series_out(tmp_path: Path) -> None:
    """squeue timed out while scontrol answered: no job counted, not zero of each; sdiag not installed: no
    scheduler series. Both are failed reads; the nodes are still there."""
    timed_out = {"rc": 124, "out": "", "err": "squeue did not finish within 5 s"}
    text, problems = collect.read_slurm({}, host(tmp_path, {"scontrol show": NODES, "squeue --noheader": timed_out})[0])
    assert problems == ["squeue --noheader --format=%i|%T|%r|%S|%N: squeue did not finish within 5 s",
                        "sdiag is not installed"]  # fmt: skip
    nodes = {"rdma_llm_slurm_nodes", "rdma_llm_slurm_node_state", "rdma_llm_slurm_node_drained_by"}
    assert names(text) == {"rdma_llm_slurm_up", *nodes}


# -------------------------------------------------------------------------------------------------- training
RUNS = "/var/lib/rdma-llm/runs"
BOOT = NOW - 86400
TCK = os.sysconf("SC_CLK_TCK")


def records(*recs: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)


def run_dir(root: Path, run_id: str, text: str, mtime: float, result: bool = False) -> Path:
    run = root / RUNS.lstrip("/") / run_id
    write(run / "out/metrics.jsonl", text)
    paths = [run / "out/metrics.jsonl"]
    if result:
        write(run / "out/result.json", "{}\n")
        paths.append(run / "out/result.json")
    for p in paths:
        os.utime(p, (mtime, mtime))
    return run


def proc(root: Path, pid: int, started: float, state: str = "S") -> None:
    """/proc/<pid>/stat of a process that started at `started` (proc(5): field 22, ticks after btime)."""
    ticks = round((started - BOOT) * TCK)
    write(root / f"proc/{pid}/stat", f"{pid} (pt_main) thread) {state} " + "0 " * 18 + f"{ticks} 0 0 0 0 0\n")


def trained(root: Path, options: dict | None = None, now: float = NOW) -> tuple[str, list]:
    options = {"runs_dir": RUNS, "recent_s": 3600, "hostname": "lab-node1", **(options or {})}
    return collect.read_training(options, host(root, now=now)[0])


def labels(run_id: str, rank: int, job_id: str = "", host_name: str = "lab-node1") -> dict:
    return {"run_id": run_id, "job_id": job_id, "host": host_name, "rank": rank}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write(tmp_path / "proc/stat", f"cpu  1 2 3 4\nbtime {int(BOOT)}\n")
    return tmp_path


def test_a_run_writing_now_is_exported_with_this_hosts_ranks_only(root: Path) -> None:
    """A shared out_dir: both hosts' ranks in one metrics.jsonl; this host exports its own (the other host's
    collector exports the rest)."""
    text = records(start(NOW - 100, 0, "lab-node1"), start(NOW - 100, 1, "lab-node2"),
                   train(NOW - 10, 0, 10, 9.5), train(NOW - 10, 1, 10, 9.5))  # fmt: skip
    run_dir(root, "run1", text, NOW - 10)
    out, problems = trained(root)
    assert problems == []
    assert series(out, "rdma_llm_train_step") == {tuple(sorted((k, str(v)) for k, v in labels("run1", 0).items())): 10}


def test_a_run_is_exported_while_a_rank_lives_and_for_recent_s_after_it_last_wrote(root: Path) -> None:
    """Hung: nothing written for two hours, its rank's process still there (started before its start record):
    exported, its old step timestamp saying how long it has hung. Ended (result.json) or dead: for recent_s."""
    text = records(start(NOW - 9000, 0, "lab-node1") | {"pid": 4242}, train(NOW - 7200, 0, 10, 9.5))
    run_dir(root, "hung", text, NOW - 7200)
    proc(root, 4242, NOW - 9030)
    out, _ = trained(root)
    assert value(out, "rdma_llm_train_last_step_timestamp_seconds", **labels("hung", 0)) == NOW - 7200
    assert value(out, "rdma_llm_train_rank_alive", **labels("hung", 0)) == 1  # a stall, not an end
    # The pid now belongs to a process that started after the rank's record: another process, not the rank.
    proc(root, 4242, NOW - 8000)
    assert trained(root) == ("", [])
    proc(root, 4242, NOW - 9000 - 0.01)  # a hundredth of a second (a clock tick) before its record: the rank
    assert names(trained(root)[0]) != set()
    proc(root, 4242, NOW - 9000 + 0.01)
    assert trained(root) == ("", [])
    proc(root, 4242, NOW - 9030, state="Z")  # exited, not reaped
    assert trained(root) == ("", [])
    (root / "proc/4242/stat").unlink()
    dead, _ = trained(root, {"recent_s": 7200})  # dead, but within recent_s of its last write
    assert value(dead, "rdma_llm_train_rank_alive", **labels("hung", 0)) == 0
    assert trained(root, {"recent_s": 7199}) == ("", [])
    run_dir(root, "ended", records(start(NOW - 600, 0, "lab-node1") | {"pid": 4243}), NOW - 500, result=True)
    proc(root, 4243, NOW - 630)  # a live pid does not keep an ended run
    assert names(trained(root, {"recent_s": 499})[0]) == set()
    ended, _ = trained(root, {"recent_s": 500})
    assert names(ended) == {"rdma_llm_train_restarts_total", "rdma_llm_train_rank_alive"}
    assert value(ended, "rdma_llm_train_rank_alive", **labels("ended", 0)) == 0  # its result.json: ended


def test_without_the_boot_time_a_live_pid_counts(tmp_path: Path) -> None:
    run_dir(tmp_path, "r", records(start(NOW - 9000, 0, "lab-node1") | {"pid": 7}), NOW - 9000)
    proc(tmp_path, 7, NOW + 50)  # no /proc/stat under this root: the start time cannot be compared
    out, _ = trained(tmp_path)
    assert names(out) == {"rdma_llm_train_restarts_total", "rdma_llm_train_rank_alive"}
    assert value(out, "rdma_llm_train_rank_alive", **labels("r", 0)) == 1


def test_the_job_id_is_the_slurm_step_the_ranks_last_started_in(root: Path) -> None:
    """logs/step-<job>.state as the step script writes it: the first job ended, the rank started again in the
    second (a resume), which still runs; then a systemd launch after both: no job."""
    run = run_dir(root, "run1", records(start(NOW - 50, 0, "lab-node1")), NOW - 40)
    write(run / "logs/step-41.state", f"host=lab-node1\nnode=n1\njob=41\nstart={NOW - 900}\nend={NOW - 500}\nrc=0\n")
    write(run / "logs/step-42.state", f"host=lab-node1\nnode=n1\njob=42\nstart={int(NOW) - 60}.250000000\n")
    assert series(trained(root)[0], "rdma_llm_train_restarts_total") == {
        tuple(sorted((k, str(v)) for k, v in labels("run1", 0, "42").items())): 0
    }
    write(run / "logs/step-42.state", f"job=42\nstart={NOW - 60}\nend={NOW - 55}\nrc=1\nsignal=\n")
    assert value(trained(root)[0], "rdma_llm_train_restarts_total", **labels("run1", 0, "")) == 0
    write(run / "logs/step-43.state", f"job=43\nstart={NOW - 10}\n")  # after the ranks' start: not theirs
    assert value(trained(root)[0], "rdma_llm_train_restarts_total", **labels("run1", 0, "")) == 0


def test_no_runs_directory_is_no_run(tmp_path: Path) -> None:
    assert trained(tmp_path) == ("", [])
    write(tmp_path / RUNS.lstrip("/") / "staged/run.yaml", "")  # a run dir the trainer has not written to yet
    assert trained(tmp_path) == ("", [])
