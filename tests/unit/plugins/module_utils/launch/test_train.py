"""The train_launch role's decisions as tables: rank order, payload config (judged by payload/config.py),
job environment, job outcome from the units' status, progress line, and the watch's parsing of systemd output.
The unit status samples are `systemctl show` output as systemd 252 (Debian 12) prints it for a transient
service with RemainAfterExit=yes (recorded in the lab)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as R
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import train as F

from tests.conftest import ROOT, load_script

ROLE = ROOT / "roles" / "train_launch"
PAYLOAD = str(ROOT / "payload")


@pytest.mark.parametrize(
    ("hosts", "ranks", "expected"),
    [
        (["a", "b", "c"], {}, ["a", "b", "c"]),
        (["a", "b"], {"a": {"cluster_node_rank": 1}, "b": {"cluster_node_rank": 0}}, ["b", "a"]),
        (["a", "b"], {"a": {"cluster_node_rank": "1"}, "b": {"cluster_node_rank": "0"}}, ["b", "a"]),
        (["a", "b", "c"], {"a": {}, "b": {"cluster_node_rank": 2}, "c": {"cluster_node_rank": 1}}, ["a", "c", "b"]),
        (
            ["a", "b"],
            {"a": {"cluster_node_rank": 0}, "b": {"cluster_node_rank": 0}},
            "node ranks must be 0..1, each once",
        ),
        (["a", "b"], {"a": {"cluster_node_rank": 0}, "b": {"cluster_node_rank": 5}}, "got a=0, b=5"),
        (["a"], {"a": {"cluster_node_rank": "x"}}, "a: cluster_node_rank='x' is not an integer"),
    ],
)
def test_rank_order(hosts, ranks, expected) -> None:
    if isinstance(expected, list):
        assert F.rank_order(hosts, ranks) == expected
    else:
        with pytest.raises(RuleError, match=expected):
            F.rank_order(hosts, ranks)


def resolved(payload, overrides) -> dict:
    """What the role's assert does: merge the keys (payload_values), then the payload's `config.py resolve`."""
    values = F.payload_values(payload, overrides, {"data": "/d"})
    proc = subprocess.run(
        [sys.executable, str(ROOT / "payload" / "config.py"), "resolve", "--source=train_launch_payload"],
        input=json.dumps(values),
        text=True,
        capture_output=True,
        check=False,
    )
    if proc.returncode:
        raise RuleError(proc.stderr.strip())
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("payload", "overrides", "expected"),
    [
        ({}, {}, {"data": "/d", "max_steps": 200, "model": "tiny", "init_from": ""}),
        ({"batch_size": "8", "lr": "3e-4"}, {}, {"batch_size": 8, "lr": 3e-4, "data": "/d"}),
        ({"max_steps": 100}, {"max_steps": "30", "engine": None, "model": ""}, {"max_steps": 30, "engine": "ddp"}),
        ({}, {"model": "gpt2"}, {"model": "gpt2", "data": "/d"}),
        ({"model": "tiny"}, {"model": "/srv/models/gpt2-ft"}, {"init_from": "/srv/models/gpt2-ft", "model": "tiny"}),
        ({}, {"model": "./ft"}, {"init_from": "./ft"}),
        ({}, {"engine": "deepspeed", "zero_stage": "2"}, {"engine": "deepspeed", "zero_stage": 2, "data": "/d"}),
        ({"bach_size": 8}, {}, "unknown key 'bach_size' \\(did you mean 'batch_size'\\?\\)"),
        ({"lr": "fast"}, {}, "lr='fast': expected a number"),
        ({}, {"engine": "megatron"}, "--engine='megatron': must be one of ddp, deepspeed"),
        ({}, {"model": "gpt3"}, "--model='gpt3': must be one of"),
        ({"max_steps": 10, "warmup_steps": 20}, {}, "warmup_steps"),
        ({"data": "/x"}, {}, "'data' is set by the role"),
        ({"out_dir": "/x"}, {}, "'out_dir' is set by the role"),
        ("batch_size=8", {}, "must be a mapping"),
    ],
)
def test_payload_config_is_merged_here_and_resolved_by_the_payload(payload, overrides, expected) -> None:
    """The resolved config has every key (the run's, defaults applied); errors are the payload's own messages."""
    if isinstance(expected, dict):
        got = resolved(payload, overrides)
        assert {k: got[k] for k in expected} == expected
        assert set(got) == set(load_script(ROOT / "payload" / "config.py").TrainConfig.__dataclass_fields__)
    else:
        with pytest.raises(RuleError, match=expected):
            resolved(payload, overrides)


def test_a_lost_peer_ends_the_job_within_two_minutes_by_default() -> None:
    assert resolved({}, {})["pg_timeout"] < 120


NO_RDMA = {"devices": [], "hca": None, "port": None, "gid_index": None, "note": "no RDMA device found"}
ROCE = {"devices": ["mlx5_0"], "hca": "mlx5_0", "port": 1, "gid_index": 3, "note": "RoCEv2 GID 3"}
IB = {"devices": ["mlx5_0"], "hca": "mlx5_0", "port": 1, "gid_index": None, "note": "InfiniBand port"}
NO_GID = {"devices": ["mlx5_0"], "hca": None, "port": None, "gid_index": None, "note": "none carries 10.0.0.1"}
QOS = {"NCCL_IB_TC": 106, "NCCL_IB_SL": 3}


@pytest.mark.parametrize(
    ("rdma", "gpus", "qos", "allow_tcp", "has", "lacks"),
    [
        (NO_RDMA, 0, None, False, {"NCCL_IB_DISABLE": "1", "DS_ACCELERATOR": "cpu"}, ["NCCL_IB_HCA"]),
        (ROCE, 8, QOS, False, {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}, []),
        (ROCE, 8, None, False, {"NCCL_IB_HCA": "=mlx5_0:1"}, ["NCCL_IB_DISABLE", "DS_ACCELERATOR", "NCCL_IB_TC"]),
        (IB, 8, {}, False, {"NCCL_IB_HCA": "=mlx5_0:1"}, ["NCCL_IB_GID_INDEX"]),
        (NO_GID, 8, QOS, True, {"NCCL_IB_DISABLE": "1"}, ["NCCL_IB_HCA", "NCCL_IB_TC"]),
        (NO_RDMA, 0, QOS, False, {"NCCL_IB_DISABLE": "1"}, ["NCCL_IB_TC"]),
    ],
)
def test_nccl_env(rdma, gpus, qos, allow_tcp, has, lacks) -> None:
    env = F.nccl_env("rdma0", rdma, 2, gpus, qos, allow_tcp, "n1")
    # gloo takes the name; NCCL a prefix unless it starts with "=" (rdma_stack_nccl.nccl_env).
    assert (env["GLOO_SOCKET_IFNAME"], env["NCCL_SOCKET_IFNAME"]) == ("rdma0", "=rdma0")
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1" and env["OMP_NUM_THREADS"] == "2"
    assert {k: env.get(k) for k in has} == has
    assert not [k for k in lacks if k in env]
    assert all(isinstance(v, str) for v in env.values())


def test_nccl_logs_its_transport_to_the_run_on_gpus_only() -> None:
    env = F.nccl_env("rdma0", ROCE, 2, 8, QOS, False, "n1", "/runs/r1/logs")
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    # NCCL expands %h and %p: one file per process, beside the job's logs (collected with them).
    assert env["NCCL_DEBUG_FILE"] == "/runs/r1/logs/nccl.%h.%p.log"
    assert "NCCL_DEBUG" not in F.nccl_env("rdma0", NO_RDMA, 2, 0, None, False, "n1", "/runs/r1/logs")


def test_flight_recorder_on_every_backend_and_nccls_own_dump_on_gpus() -> None:
    gpu = F.nccl_env("rdma0", ROCE, 2, 8, QOS, False, "n1", "/runs/r1/logs", 2000)
    assert (gpu["TORCH_FR_BUFFER_SIZE"], gpu["TORCH_NCCL_TRACE_BUFFER_SIZE"]) == ("2000", "2000")
    assert gpu["RDMA_LLM_FR_REQUEST"] == "/runs/r1/logs/.fr-request"  # payload/flight.py dumps on it
    assert (gpu["TORCH_NCCL_DUMP_ON_TIMEOUT"], gpu["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]) == (
        "1", "/runs/r1/logs/nccl_trace_rank_",
    )  # fmt: skip
    cpu = F.nccl_env("rdma0", NO_RDMA, 2, 0, None, False, "n1", "/runs/r1/logs", 2000)
    assert cpu["TORCH_FR_BUFFER_SIZE"] == "2000" and "TORCH_NCCL_DUMP_ON_TIMEOUT" not in cpu
    off = F.nccl_env("rdma0", ROCE, 2, 8, QOS, False, "n1", "/runs/r1/logs", 0)
    assert not [k for k in off if k.startswith("TORCH_FR") or "TRACE" in k or k == "RDMA_LLM_FR_REQUEST"], off
    with pytest.raises(RuleError, match="train_launch_flight_recorder=-1"):
        F.nccl_env("rdma0", ROCE, 2, 8, QOS, False, "n1", "/runs/r1/logs", -1)


def test_rdma_device_without_matching_gid_fails_unless_tcp_allowed() -> None:
    with pytest.raises(RuleError, match=r"n1: none carries 10\.0\.0\.1; NCCL would fall back to TCP"):
        F.nccl_env("rdma0", NO_GID, 1, 8, None, False, "n1")


def test_qos_note_says_which_class_nccl_gets() -> None:
    assert F.qos_note(QOS, ROCE) == "NCCL_IB_SL=3 NCCL_IB_TC=106"
    assert F.qos_note({"NCCL_IB_TC": "106"}, NO_RDMA) == "NCCL_IB_TC=106 unused (NCCL does not use RDMA here)"
    assert F.qos_note({}, ROCE).startswith("none (no rdma_qos fact on the host")


def test_the_plan_reads_the_local_facts_it_uses() -> None:
    """The launch takes NCCL's traffic class from ansible_local.rdma_qos; a `setup` without the `local` subset
    leaves ansible_local out (a launch then read it only from a fact cache younger than its timeout)."""
    text = (ROOT / "roles/train_launch/tasks/plan.yml").read_text()
    plan = yaml.safe_load(text)
    subsets = [t["ansible.builtin.setup"]["gather_subset"] for t in plan if "ansible.builtin.setup" in t]
    assert "ansible_local.rdma_qos" in text and subsets and all("local" in s for s in subsets), subsets


def unit(active: str, sub: str, result: str = "success", code: str = "1", status: str = "0", exited: str = "") -> dict:
    return {
        "LoadState": "loaded",
        "ActiveState": active,
        "SubState": sub,
        "Result": result,
        "ExecMainCode": code,
        "ExecMainStatus": status,
        "ExecMainExitTimestamp": exited,
    }


RUNNING = {"state": "running", "unit": unit("active", "running")}
DONE = {"state": "completed", "unit": unit("active", "exited", exited="@100")}


@pytest.mark.parametrize(
    ("jobs", "deadline", "outcome", "message"),
    [
        ({"n1": DONE, "n2": DONE}, False, "completed", "ok"),
        ({"n1": DONE, "n2": RUNNING}, False, "running", "ok"),
        ({"n1": RUNNING, "n2": RUNNING}, True, "timeout", "the deadline passed"),
        (
            {
                "n1": {"state": "failed", "ended": 130.0, "unit": unit("failed", "failed", "exit-code", "1", "1")},
                "n2": {"state": "failed", "ended": 120.0, "unit": unit("failed", "failed", "signal", "2", "9")},
            },
            False,
            "failed",
            "job failed on n2: torchrun killed by signal 9 (then on n1)",
        ),
        (
            {
                "n1": {"state": "failed", "ended": 10.0, "unit": unit("failed", "failed", "exit-code", "1", "1")},
                "n2": RUNNING,
            },
            False,
            "failed",
            "job failed on n1: torchrun exit code 1",
        ),
        (
            {"n1": RUNNING, "n2": {"state": "unreachable", "ended": 5.0, "why": "unreachable for 45 s (ssh)"}},
            False,
            "failed",
            "job failed on n2: unreachable for 45 s (ssh)",
        ),
        (
            {
                "n1": {
                    "state": "failed",
                    "ended": 50.0,
                    "why": "fabric link rdma0 down since 46 s",
                    "unit": unit("active", "running"),
                }
            },
            False,
            "failed",
            "job failed on n1: fabric link rdma0 down since 46 s",
        ),
        ({"n1": {"state": "missing", "ended": 1.0}}, False, "failed", "job failed on n1: its unit is gone"),
        (
            {
                "n1": {"state": "failed", "ended": 10.0, "unit": unit("failed", "failed", "exit-code", "1", "1")},
                "n2": {
                    "state": "failed",
                    "ended": 10.5,
                    "unit": unit("failed", "failed", "exit-code", "1", "1"),
                    "workers": [{"code": -9, "text": "local rank 0 killed by SIGKILL"}],
                },
            },
            False,
            "failed",
            "job failed on n2: local rank 0 killed by SIGKILL (torchrun exit code 1) (then on n1)",
        ),
        (
            # A full disk on n2: both ranks exit 1 (n1's collective breaks a moment later, or earlier), but
            # only n2's payload named an error.
            {
                "n1": {
                    "state": "failed",
                    "ended": 10.0,
                    "unit": unit("failed", "failed", "exit-code", "1", "1"),
                    "workers": [{"code": 1, "text": "local rank 0 exit code 1", "error": None}],
                },
                "n2": {
                    "state": "failed",
                    "ended": 10.4,
                    "unit": unit("failed", "failed", "exit-code", "1", "1"),
                    "workers": [{"code": 1, "text": "local rank 0 exit code 1", "error": "the disk is full"}],
                },
            },
            False,
            "failed",
            "job failed on n2: local rank 0 exit code 1 (torchrun exit code 1): the disk is full (then on n1)",
        ),
        (
            {"n1": {"state": "stopped", "ended": 1.0}, "n2": DONE},
            False,
            "failed",
            "job failed on n1: its unit was stopped",
        ),
    ],
)
def test_job_outcome(jobs, deadline, outcome, message) -> None:
    got = F.job_outcome(jobs, deadline)
    assert got["outcome"] == outcome
    assert got["message"].startswith(message), got


LOST = {"state": "unreachable", "ended": 5.0, "why": "unreachable for 45 s (ssh)"}
FAILED = {"state": "failed", "ended": 10.0, "unit": unit("failed", "failed", "exit-code", "1", "1")}
NODES3 = ["n1", "n2", "n3"]


@pytest.mark.parametrize(
    ("min_nodes", "nodes", "max_restarts", "expected"),
    [
        (0, 2, 0, {"min_nodes": 2, "max_nodes": 2, "elastic": False, "nnodes": "2", "rdzv_conf": ""}),
        (2, 2, 0, {"min_nodes": 2, "max_nodes": 2, "elastic": False, "nnodes": "2", "rdzv_conf": ""}),
        ("1", 2, "1", {"min_nodes": 1, "max_nodes": 2, "elastic": True, "nnodes": "1:2",
                       "rdzv_conf": ",last_call_timeout=15"}),
        (2, 3, 2, {"min_nodes": 2, "max_nodes": 3, "elastic": True, "nnodes": "2:3",
                   "rdzv_conf": ",last_call_timeout=15"}),
        (3, 2, 1, "train_launch_min_nodes=3 must be between 1 and the 2 node(s) of this launch"),
        (-1, 2, 1, "train_launch_min_nodes=-1 must be between 1 and the 2 node(s)"),
        ("two", 2, 1, "train_launch_min_nodes='two' is not a whole number"),
        (1, 2, 0, "train_launch_min_nodes=1 below the 2 nodes of this launch needs train_launch_max_restarts >= 1"),
    ],
)  # fmt: skip
def test_elastic_plan(min_nodes, nodes, max_restarts, expected) -> None:
    if isinstance(expected, str):
        with pytest.raises(RuleError, match=re.escape(expected)):
            F.elastic_plan(min_nodes, nodes, max_restarts, 15)
    else:
        assert F.elastic_plan(min_nodes, nodes, max_restarts, 15) == expected


@pytest.mark.parametrize(
    ("records", "nodes", "min_nodes", "ends"),
    [
        ({}, NODES3, 0, False),
        ({"n1": {"host": "n1", "state": "completed"}}, NODES3, 0, False),  # a peer done is no reason to stop
        ({"n3": LOST}, NODES3, 0, True),  # no min_nodes: a lost peer ends the job
        ({"n3": LOST}, NODES3, 3, True),
        ({"n3": LOST}, NODES3, 2, False),  # 2 of 3 left: the survivors go on
        ({"n2": LOST, "n3": LOST}, NODES3, 2, True),  # 1 of 3 left, fewer than min_nodes
        ({"n2": LOST, "n3": LOST}, NODES3, 1, False),
        ({"n1": LOST}, NODES3, 1, True),  # node rank 0 held the rendezvous
        ({"n3": FAILED}, NODES3, 1, True),  # a unit that failed ends it, min_nodes or not
        ({"n3": LOST, "n2": FAILED}, NODES3, 1, True),
        ({"n3": {"state": "missing"}}, NODES3, 2, False),  # its unit gone: the host restarted
        ({"n3": {"state": "stopped"}}, NODES3, 2, True),  # stopped by hand: the job stops
    ],
)
def test_peers_end_watch(records, nodes, min_nodes, ends) -> None:
    assert F.peers_end_watch(records, "n1" if "n1" not in records else "n2", nodes, min_nodes) is ends


@pytest.mark.parametrize(
    ("jobs", "min_nodes", "outcome", "message", "lost"),
    [
        ({"n1": DONE, "n2": LOST}, 0, "failed", "job failed on n2: unreachable for 45 s (ssh)", []),
        (
            {"n1": DONE, "n2": LOST},
            1,
            "completed",
            "completed on 1 of 2 nodes (min_nodes 1) after losing n2 (unreachable for 45 s (ssh))",
            ["n2"],
        ),
        ({"n1": RUNNING, "n2": LOST}, 1, "running", "goes on with 1 of 2 nodes (min_nodes 1) after losing n2", ["n2"]),
        (
            {"n1": FAILED, "n2": LOST},
            1,
            "failed",
            "job failed on n2: unreachable for 45 s (ssh) (then on n1)",
            [],
        ),
        (
            {"n1": LOST, "n2": RUNNING},
            1,
            "failed",
            "job failed on n1: unreachable for 45 s (ssh); it cannot go on without n1: n1 held the rendezvous",
            [],
        ),
        (
            {"n1": RUNNING, "n2": LOST, "n3": LOST},
            2,
            "failed",
            "job failed on n2: unreachable for 45 s (ssh) (then on n3); it cannot go on without n2, n3: 1 of 3 nodes"
            " left, train_launch_min_nodes=2",
            [],
        ),
        ({"n1": DONE, "n2": DONE, "n3": LOST}, 2, "completed", "completed on 2 of 3 nodes (min_nodes 2)", ["n3"]),
    ],
)
def test_job_outcome_with_min_nodes(jobs, min_nodes, outcome, message, lost) -> None:
    got = F.job_outcome(jobs, False, sorted(jobs), min_nodes)
    assert (got["outcome"], [g["host"] for g in got["lost"]]) == (outcome, lost), got
    assert got["message"].startswith(message), got


def _ended(at: float, started: float = 900.0, active: str = "failed") -> dict:
    """A unit torchrun left with exit code 1 at `at` (a SIGTERM from systemctl stop ends it that way)."""
    props = unit(active, active, "exit-code", "1", "1") | {"ExecMainStartTimestamp": f"@{started}"}
    return {"state": "failed" if active == "failed" else "stopped", "ended": at, "unit": props}


@pytest.mark.parametrize(
    ("jobs", "outcome", "message"),
    [
        # both units ran when train_stop.yml asked (t=1000) and ended after: stopped, not failed
        ({"n1": _ended(1002.0), "n2": _ended(1003.0, active="inactive")}, "stopped",
         "stopped by train_stop.yml at 1970-01-01 00:16:40 UTC on n1, n2 (SIGTERM: each rank saved a checkpoint"),
        # a unit systemd dropped after the stop; the other had completed before it
        ({"n1": {"state": "missing", "ended": None}, "n2": DONE}, "stopped", "stopped by train_stop.yml at"),
        # n1 failed on its own before the request: a failure, whatever the stop did to n2 after
        ({"n1": _ended(990.0), "n2": _ended(1002.0)}, "failed", "job failed on n1: torchrun exit code 1"),
        # a unit of a later launch (a resume started after the request) that failed is a failure
        ({"n1": _ended(1200.0, started=1100.0)}, "failed", "job failed on n1"),
        # still running: the stop has not reached it yet
        ({"n1": RUNNING, "n2": _ended(1002.0)}, "failed", "job failed on n2"),
    ],
)  # fmt: skip
def test_job_outcome_after_a_stop_request(jobs, outcome, message) -> None:
    got = F.job_outcome(jobs, False, sorted(jobs), 0, 1000.0)
    assert got["outcome"] == outcome and got["message"].startswith(message), got
    assert F.job_outcome(jobs, False, sorted(jobs), 0)["outcome"] != "stopped"


def test_a_stop_request_covers_only_the_hosts_it_stopped() -> None:
    """train_stop.yml -e train_hosts=n2 stopped n2 only: n1's unit, which failed after the request, failed."""
    jobs = {"n1": _ended(1002.0), "n2": _ended(1003.0)}
    got = F.job_outcome(jobs, False, ["n1", "n2"], 0, 1000.0, ["n2"])
    assert got["outcome"] == "failed" and got["message"].startswith("job failed on n1"), got
    assert F.job_outcome(jobs, False, ["n1", "n2"], 0, 1000.0, ["n1", "n2"])["outcome"] == "stopped"


@pytest.mark.parametrize(
    ("elapsed", "metrics", "expected"),
    [
        (-3.0, None, "[    0 s] 2/2 hosts running | starting"),
        (
            12.4,
            {"kind": "train", "rank": 0, "step": 5, "loss_global": 8.1, "tokens_per_s": 1234.5, "lr": 3e-4},
            "[   12 s] 2/2 hosts running | step 5/30 (17%) | loss 8.1 | 1234 tok/s | lr 3.00e-04",
        ),
        (
            12.4,
            {"kind": "train", "step": 6, "loss_global": 8.0, "tokens_per_s": 1000, "lr": 3e-4, "eta_s": 3725.4},
            "[   12 s] 2/2 hosts running | step 6/30 (20%) | eta 1:02:05 | loss 8.0 | 1000 tok/s | lr 3.00e-04",
        ),
        (20, {"kind": "eval", "step": 10, "val_loss": 7.5}, "[   20 s] 2/2 hosts running | step 10 | val loss 7.5"),
        (
            30,
            {"kind": "result", "final_step": 30, "status": "completed"},
            "[   30 s] 2/2 hosts running | step 30 completed, saving and exporting",
        ),
        (30, {"kind": "result", "final_step": 12, "status": "failed"}, "[   30 s] 2/2 hosts running | step 12 failed"),
    ],
)
def test_progress_line(elapsed, metrics, expected) -> None:
    assert F.progress_line(elapsed, 2, 2, metrics, 30) == expected


POLL = """LoadState=loaded
ActiveState=failed
SubState=failed
Result=signal
ExecMainCode=2
ExecMainStatus=9
ExecMainExitTimestamp=Sun 2026-11-22 20:00:00.250000 UTC
NRestarts=0
@@link
up
@@metrics
{"kind": "train", "rank": 0, "step": 10}
{"kind": "train", "rank": 1, "step": 10}
not json
@@failures
E1122 20:00:00.1 9 api.py:869] failed (exitcode: -9) local_rank: 0 (pid: 77) of binary: /venv/bin/python
"""


def test_watch_parses_the_poll() -> None:
    props, link, metrics, workers = F.parse_poll(POLL)
    assert workers == [
        {"local_rank": 0, "pid": 77, "code": -9, "text": "local rank 0 killed by SIGKILL", "time": None, "error": None}
    ]
    assert props["ExecMainStatus"] == "9"
    assert F.systemd_time(props["ExecMainExitTimestamp"]) == 1795377600.25
    assert F.systemd_time("@1763840000") == 1763840000.0 and F.systemd_time("n/a") is None
    assert link == "up"
    assert metrics == {"kind": "train", "rank": 0, "step": 10}
    assert F.unit_state(props) == "failed"


@pytest.mark.parametrize(
    ("props", "state"),
    [
        ({"LoadState": "not-found", "ActiveState": "inactive"}, "missing"),
        ({"LoadState": "loaded", "ActiveState": "active", "SubState": "running"}, "running"),
        ({"LoadState": "loaded", "ActiveState": "active", "SubState": "exited"}, "completed"),
        ({"LoadState": "loaded", "ActiveState": "failed", "SubState": "failed"}, "failed"),
        ({"LoadState": "loaded", "ActiveState": "deactivating", "SubState": "stop-sigterm"}, "running"),
        ({"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead"}, "stopped"),
    ],
)
def test_unit_state(props, state) -> None:
    assert F.unit_state(props) == state


def test_report_lists_each_restart_of_this_launch_with_cause_and_steps_lost() -> None:
    def rec(t, kind, **kw):
        return {"time": t, "rank": 0, "kind": kind, **kw}

    rank0 = [
        rec(1, "start"),  # an earlier launch: not this one's
        rec(2, "train", step=5),
        rec(10, "start"),
        rec(11, "train", step=5),
        rec(12, "train", step=15),
        rec(13, "train", step=17),
        rec(20, "start"),
        rec(21, "resume", step=10),
        rec(22, "train", step=15),
    ]
    # The survivor (node1, listed first) logged its worker's failure too, earlier than the victim's agent.
    failures = [
        {"host": "lab-node1", "text": "local rank 0 exit code 1", "pid": 5, "code": 1, "time": 14.0},
        {"host": "lab-node2", "text": "local rank 0 killed by SIGKILL", "pid": 7, "code": -9, "time": 14.5},
    ]
    got = R.restarts(rank0, 10, failures)
    cause = "lab-node2: local rank 0 killed by SIGKILL (pid 7)"
    assert got == [
        {"time": 20, "last_step_before": 17, "resumed_at_step": 10, "steps_lost": 7, "cause": cause,
         "world_size_before": None, "world_size_after": None}
    ]  # fmt: skip
    assert R.restarts(rank0, 10, [])[0]["cause"].startswith("unknown")
    assert R.restarts(rank0[:6], 10, []) == []
    # Exit codes only (a rank raised): the earliest failure is the cause.
    exits = [{**failures[0], "time": 15.0}, {**failures[1], "code": 3, "text": "local rank 0 exit code 3"}]
    assert R.restarts(rank0, 10, exits)[0]["cause"] == "lab-node2: local rank 0 exit code 3 (pid 7)"
    # A failure logged after the restart belongs to a later one, not to this.
    late = [failures[0], {**failures[1], "time": 30.0}]
    assert R.restarts(rank0, 10, late)[0]["cause"] == "lab-node1: local rank 0 exit code 1 (pid 5)"


def test_report_names_the_lost_node_and_the_world_size_it_went_on_with() -> None:
    """A node lost for good with min_nodes: the survivors' restart on fewer ranks names it (its own logs are not
    collected; the survivor logged only its broken collective), with the step and the world size."""

    def rec(t, kind, **kw):
        return {"time": t, "rank": 0, "kind": kind, **kw}

    rank0 = [
        rec(10, "start", world_size=2),
        rec(12, "train", step=15),
        rec(13, "train", step=20),
        rec(60, "start", world_size=1),
        rec(61, "resume", step=20, world_size_before=2, world_size=1),
        rec(62, "train", step=25),
    ]
    failures = [{"host": "lab-node1", "text": "local rank 0 exit code 1", "pid": 5, "code": 1, "time": 30.0}]
    lost = [{"host": "lab-node2", "at": 14.0, "why": "unreachable for 45 s (ssh)"}]
    (got,) = R.restarts(rank0, 10, failures, lost)
    assert got["cause"] == "lab-node2 lost (unreachable for 45 s (ssh))"
    assert (got["world_size_before"], got["world_size_after"], got["resumed_at_step"]) == (2, 1, 20)
    assert R.lost_nodes(lost, [got]) == [
        {"host": "lab-node2", "at": 14.0, "why": "unreachable for 45 s (ssh)", "last_step_before": 20,
         "resumed_at_step": 20, "world_size_before": 2, "world_size_after": 1}
    ]  # fmt: skip
    # A restart at the same world size (a rank died, the node stayed) keeps the logged cause.
    same = [r | {"world_size": 2} if r["kind"] == "start" else r for r in rank0]
    assert R.restarts(same, 10, failures, lost)[0]["cause"] == "lab-node1: local rank 0 exit code 1 (pid 5)"


def test_report_says_which_transport_nccl_used_on_each_host(tmp_path) -> None:
    """NCCL's own log on each host (logs/nccl.*.log, recorded formats), judged by the ladder's rules: RDMA where
    the host has RDMA devices, GPUDirect RDMA there; a host without NCCL logs (gloo) is left out."""
    fixtures = ROOT / "tests" / "fixtures" / "validate"
    for host, name in (("n1", "nccl_roce_gdr.txt"), ("n2", "nccl_roce_no_gdr.txt"), ("n3", "nccl_socket.txt")):
        (tmp_path / host / "logs").mkdir(parents=True)
        (tmp_path / host / "logs" / f"nccl.{host}.41.log").write_text((fixtures / name).read_text())
    (tmp_path / "n4" / "logs").mkdir(parents=True)
    rdma = {"devices": ["mlx5_0"], "hca": "mlx5_0"}
    nodes = [{"host": h, "rdma": rdma} for h in ("n1", "n2", "n3", "n4")]
    got = R.nccl_transport(tmp_path, nodes)
    assert sorted(got) == ["n1", "n2", "n3"]
    status = {h: [(c["check"], c["status"]) for c in t["checks"]] for h, t in got.items()}
    assert status == {
        "n1": [("nccl transport", "pass"), ("gpudirect rdma", "pass")],
        "n2": [("nccl transport", "pass"), ("gpudirect rdma", "fail")],
        "n3": [("nccl transport", "fail")],
    }
    assert got["n1"]["network"] == "IB" and got["n1"]["channels"] == got["n1"]["gdr_channels"] > 0
    lines = R.transport_lines(got)
    assert lines[0].startswith("n1: NCCL 2.") and ": pass" in lines[0] and "FAIL" not in lines[0]
    assert "staged through host memory" in lines[1] and lines[1].endswith("FAIL")
    assert "fell back to TCP sockets" in lines[2]
    # Sockets on a host without RDMA devices are what it has: reported, not failed.
    plain = R.nccl_transport(tmp_path, [{"host": "n3", "rdma": {"devices": []}}])
    assert [c["status"] for c in plain["n3"]["checks"]] == ["skip"]
    # Nor where the user chose TCP (train_launch_allow_tcp: devices, but no HCA given to NCCL).
    chosen = R.nccl_transport(tmp_path, [{"host": "n3", "rdma": {"devices": ["mlx5_0"], "hca": None}}])
    assert [c["status"] for c in chosen["n3"]["checks"]] == ["skip"]


def test_report_reads_worker_failures_of_this_launch_only(tmp_path) -> None:
    logs = tmp_path / "n2" / "logs"
    logs.mkdir(parents=True)
    # torchrun 2.13's line (recorded in the lab): glog prefix with the UTC month-day and time, no year.
    line = "E1122 20:00:0{} 9 api.py:1002] failed (exitcode: {}) local_rank: 0 (pid: {}) of binary: /venv/bin/python"
    (logs / "torchrun.log").write_text(
        "=== launch A ===\n" + line.format("0.1", 1, 5) + "\n=== launch B ===\n" + line.format("1.5", -9, 7) + "\n"
    )
    nodes = [{"host": "n1"}, {"host": "n2"}]
    near = 1795377600.0  # 2026-11-22 20:00:00 UTC
    (got,) = R.worker_failures(tmp_path, nodes, "B", near)
    assert got["host"] == "n2" and got["text"] == "local rank 0 killed by SIGKILL" and got["pid"] == 7
    assert got["time"] == pytest.approx(near + 1.5)
    assert [f["text"] for f in R.worker_failures(tmp_path, nodes, "A")] == ["local rank 0 exit code 1"]
    assert R.worker_failures(tmp_path, nodes, "A")[0]["time"] is None  # no epoch to take the year from


def test_worker_failure_carries_the_payloads_own_error_line() -> None:
    failed = "E1122 20:00:0{} 9 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: {}) of binary: /venv/bin/python"
    text = "\n".join(
        [
            "[rank1]: error: saving checkpoint /r/out/checkpoints/step_0000020 failed: the disk is full: free space",
            failed.format(1, 5),
            "Traceback (most recent call last):",
            failed.format(9, 6),  # a later failure with no error line of its own
        ]
    )
    first, second = F.worker_failures(text)
    assert first["error"].endswith("failed: the disk is full: free space") and second["error"] is None
    assert F.first_failure([{**second, "time": 1.0}, {**first, "time": 2.0}])["pid"] == 5


def test_log_time_takes_the_year_nearest_the_run() -> None:
    assert F.log_time("1231", "23:59:59.5", 1798761600.0) == pytest.approx(1798761599.5)  # 2027-01-01 00:00 UTC
    assert F.log_time(None, None, 1798761600.0) is None


@pytest.mark.parametrize(
    ("results", "status", "message"),
    [
        ([], "off", "no evaluation gate"),
        ([{"status": "failed", "gate": None}], "off", "no evaluation gate"),
        ([{"gate": {"status": "off", "checks": []}}], "off", "no evaluation gate"),
        ([{"gate": {"status": "pass", "checks": []}}] * 2, "pass", "the evaluation gate passed"),
        (
            [
                {"gate": {"status": "pass", "checks": []}},
                {
                    "gate": {
                        "status": "fail",
                        "checks": [{"check": "max_val_loss", "value": 5.5, "limit": 5.0, "pass": False}],
                    }
                },
            ],
            "fail",
            "the evaluation gate failed (max_val_loss: val loss 5.5 > 5.0000)",
        ),
    ],
)
def test_gate_verdict(results, status, message) -> None:
    assert F.gate_verdict(results) == {"status": status, "message": message}


ALLREDUCE_OK = {"rc": 0, "stdout_lines": ['{"ok": true, "host": "a", "world_size": 2, "seconds": 0.4, "error": null}']}


@pytest.mark.parametrize(
    ("registered", "expected"),
    [
        ({"a": ALLREDUCE_OK, "b": ALLREDUCE_OK}, [("a", True, None), ("b", True, None)]),
        # the check's own error line wins over anything else it printed
        (
            {
                "a": ALLREDUCE_OK,
                "b": {
                    "rc": 2,
                    "stdout_lines": ["warming up", '{"ok": false, "error": "b could not reach node 0 (a)"}'],
                    "stderr": "Traceback ...",
                },
            },
            [("a", True, None), ("b", False, "b could not reach node 0 (a)")],
        ),
        # no JSON line: the module's message, then stderr, then "no output"
        ({"a": {"rc": 1, "msg": "non-zero return code", "stdout_lines": []}}, [("a", False, "non-zero return code")]),
        ({"a": {"rc": 137, "stdout_lines": ["{broken"], "stderr": "Killed"}}, [("a", False, "Killed")]),
        ({"a": {}}, [("a", False, "no output")]),
        ({"a": {"rc": 1, "stderr": "x" * 500}}, [("a", False, "x" * 300)]),
    ],
)
def test_allreduce_results(registered, expected) -> None:
    hostvars = {h: {"__train_launch_reg_allreduce": r} for h, r in registered.items()}
    got = F.allreduce_results(list(registered), hostvars)
    assert [(r["host"], r["ok"], r["detail"]) for r in got] == expected
    assert [r["text"] for r in got if not r["ok"]] == [f"{h}: {d}" for h, ok, d in expected if not ok]


def test_manifest_nodes_in_rank_order_for_the_play_hosts_only() -> None:
    hostvars = {
        "n1": {
            "__train_launch_node_rank": "1",
            "__train_launch_fabric_if": "rdma0",
            "__train_launch_fabric_ip": "10.0.0.2",
            "__train_launch_unit": "rdma-llm-train-x",
            "__train_launch_reg_watch": {"job": {"state": "completed"}},
            "__train_launch_reg_stop": {"changed": True},
            "__train_launch_reg_ckpt_list": {"files": [{"path": "/r/step_0000020"}, {"path": "/r/step_0000010"}]},
            "__train_launch_env": {"NCCL_SOCKET_IFNAME": "rdma0"},
        },
        "n0": {"__train_launch_node_rank": 0, "__train_launch_fabric_if": "rdma0", "__train_launch_unit": "u"},
        "gone": {"__train_launch_node_rank": 2},
    }
    nodes = F.manifest_nodes(["n0", "n1", "gone"], ["n0", "n1"], hostvars)
    assert [n["host"] for n in nodes] == ["n0", "n1"]
    n0, n1 = nodes
    assert n0 == {
        "host": "n0",
        "node_rank": 0,
        "fabric_interface": "rdma0",
        "fabric_address": None,
        "nproc_per_node": None,
        "gpus": None,
        "rdma": None,
        "environment": {},
        "command": [],
        "versions": {},
        "unit": "u",
        "slurm_node": None,
        "job": None,
        "stopped": False,
        "checkpoints": [],
    }
    assert n1["node_rank"] == 1
    assert n1["job"] == {"state": "completed"}
    assert n1["stopped"] is True
    assert n1["checkpoints"] == ["/r/step_0000010", "/r/step_0000020"]
    assert n1["environment"] == {"NCCL_SOCKET_IFNAME": "rdma0"}


@pytest.mark.parametrize(
    ("per_host", "expected"),
    [
        ([], ""),
        ([[]], ""),
        ([["step_0000010", "step_0000020"]], "step_0000020"),
        ([["step_0000010", "step_0000020"], ["step_0000010"]], "step_0000010"),
        ([["step_0000010"], ["step_0000020"]], ""),
        # by step number, not by name: an unpadded name sorts wrong as text
        ([["step_99", "step_100"], ["step_100", "step_99"]], "step_100"),
        ([["step_0000010", "latest"], ["latest", "step_0000010"]], "step_0000010"),
        # the payload's unfinished save and quarantined checkpoint (payload/ckpt_verify.py) hold a trainer.json too
        ([["step_0000010", "step_0000020.tmp", "quarantine-step_0000030-20261126T145758Z-1"]] * 2, "step_0000010"),
    ],
)
def test_common_checkpoint(per_host, expected) -> None:
    assert F.common_checkpoint(per_host) == expected


def _node(host="n1", rank=0, df="Avail\n 5000\n", listeners="", peers="n2 10.0.0.2 ok\n"):
    return {
        "host": host,
        "rank": rank,
        "ckpt_dir": "/r/out/checkpoints",
        "df": df,
        "listeners": listeners,
        "fabric_if": "rdma0",
        "mtu": 9000,
        "peers": peers,
    }


@pytest.mark.parametrize(
    ("nodes", "problems"),
    [
        ([_node(), _node("n2", 1, peers="n1 10.0.0.1 ok\n")], []),
        (
            [_node(df="Avail\n  63\n")],
            ["n1: 63 MiB free in /r/out/checkpoints (need train_launch_min_free_mb=64 for checkpoints)"],
        ),
        (
            [_node(df="df: /r/out/checkpoints: No such file or directory")],
            ["n1: free space in /r/out/checkpoints unknown"],
        ),
        (
            # ss -Htln 'sport = :29500' on node 0 (iproute2 6.1), a leftover torchrun holding the port
            [_node(listeners="LISTEN 0      1024         0.0.0.0:29500      0.0.0.0:*   \n")],
            ["n1: rendezvous port 29500 is in use (LISTEN 0 1024 0.0.0.0:29500 0.0.0.0:*)"],
        ),
        ([_node("n2", 1, listeners="LISTEN 0 1024 0.0.0.0:29500 0.0.0.0:*")], []),  # only node 0 hosts it
        (
            [_node(peers="n2 10.0.0.2 none\nn3 10.0.0.3 small\n")],
            [
                "n1: n2 (10.0.0.2) does not answer on rdma0",
                "n1: n3 (10.0.0.3) answers on rdma0 only below its MTU 9000",
            ],
        ),
        ([_node(peers="- - noping\n")], ["n1: ping is not installed"]),
    ],
)
def test_preflight_problems(nodes, problems) -> None:
    got = F.preflight_problems(nodes, 64, 29500)
    assert len(got) == len(problems), got
    for g, want in zip(got, problems, strict=True):
        assert g.startswith(want), got


@pytest.mark.parametrize(
    ("engine", "min_nodes", "refused"),
    [("ddp", 1, False), ("deepspeed", 1, True), ("fsdp", 1, True), ("fsdp", 0, False), ("deepspeed", 2, False)],
)
def test_elastic_plan_only_for_a_checkpoint_every_node_holds_whole(engine, min_nodes, refused) -> None:
    if refused:
        with pytest.raises(RuleError, match=f"needs engine ddp, not {engine}"):
            F.elastic_plan(min_nodes, 2, 1, 15, engine)
    else:
        assert F.elastic_plan(min_nodes, 2, 1, 15, engine)["min_nodes"] in (1, 2)


PREFLIGHT_HOSTVARS = {
    "n1": {
        "__train_launch_node_rank": "0",
        "__train_launch_run_dir": "/var/lib/train/r1",
        "__train_launch_fabric_if": "rdma-0",
        "__train_launch_fabric_ip": "10.0.0.1",
        "ansible_facts": {"rdma_0": {"mtu": 9000}},
        "__train_launch_reg_df": {"stdout": " Avail\n 5000"},
        "__train_launch_reg_rdzv_port": {"stdout": ""},
        "__train_launch_reg_peers": {"stdout": "n2 10.0.0.2 ok"},
    },
    # a host whose checks were skipped (no df, not node 0) and whose NIC has no facts
    "n2": {
        "__train_launch_node_rank": 1,
        "__train_launch_run_dir": "/var/lib/train/r1",
        "__train_launch_fabric_if": "ib0",
        "__train_launch_fabric_ip": "10.0.0.2",
        "ansible_facts": {},
        "__train_launch_reg_rdzv_port": {"skipped": True},
    },
    "n3": {"__train_launch_fabric_ip": "10.0.0.3"},
}


@pytest.mark.parametrize(
    ("nodes", "me", "expected"),
    [
        (["n1", "n2", "n3"], "n2", ["n1", "10.0.0.1", "n3", "10.0.0.3"]),
        (["n1", "n2"], "n1", ["n2", "10.0.0.2"]),
        (["n1"], "n1", []),
        (["n1", "gone"], "n1", ["gone", ""]),
    ],
)
def test_peer_args(nodes, me, expected) -> None:
    assert F.peer_args(nodes, me, PREFLIGHT_HOSTVARS) == expected


def test_preflight_nodes_feed_preflight_problems() -> None:
    nodes = F.preflight_nodes(["n1", "n2"], PREFLIGHT_HOSTVARS)
    assert nodes == [
        {
            "host": "n1",
            "rank": 0,
            "ckpt_dir": "/var/lib/train/r1/out/checkpoints",
            "df": " Avail\n 5000",
            "listeners": "",
            "fabric_if": "rdma-0",
            "mtu": 9000,
            "peers": "n2 10.0.0.2 ok",
        },
        {
            "host": "n2",
            "rank": 1,
            "ckpt_dir": "/var/lib/train/r1/out/checkpoints",
            "df": "",
            "listeners": "",
            "fabric_if": "ib0",
            "mtu": None,
            "peers": "",
        },
    ]
    assert F.preflight_problems(nodes, 1000, 29500) == [
        "n2: free space in /var/lib/train/r1/out/checkpoints unknown (df said '')"
    ]


GONE = "LoadState=not-found\nActiveState=inactive\nSubState=dead"
NO_REJOIN = "LoadState=not-found\nActiveState=inactive\nResult=success"


@pytest.mark.parametrize(
    ("systemctl", "saved", "rejoin", "state"),
    [
        ("LoadState=loaded\nActiveState=active\nSubState=running", None, NO_REJOIN, "running"),
        # Released after collection: systemd's record saved beside the logs answers instead.
        (GONE, "ActiveState=active\nSubState=exited\n", NO_REJOIN, "completed"),
        (GONE, "ActiveState=failed\nSubState=failed\n", NO_REJOIN, "failed"),
        (GONE, None, NO_REJOIN, "missing"),
        # The host restarted: the transient unit went with the boot, the rejoin unit has not run yet ...
        (GONE, None, "LoadState=loaded\nActiveState=inactive\nResult=success", "rejoining"),
        (GONE, None, "LoadState=loaded\nActiveState=activating\nResult=success", "rejoining"),
        # ... or its condition skipped it in this boot (the run had ended, or counted the host lost) ...
        (
            GONE,
            None,
            "LoadState=loaded\nActiveState=inactive\nConditionResult=no\nConditionTimestampMonotonic=8123",
            "missing",
        ),
        # ... or it ran and the share is gone all the same (its systemd-run failed).
        (GONE, None, "LoadState=loaded\nActiveState=failed\nResult=exit-code", "missing"),
        (GONE, None, "LoadState=loaded\nActiveState=active\nResult=success", "missing"),
        # The share came back: its unit answers, whatever the rejoin unit says.
        (
            "LoadState=loaded\nActiveState=active\nSubState=running",
            None,
            "LoadState=loaded\nActiveState=active",
            "running",
        ),
    ],
)
def test_poll_script_on_this_machine(tmp_path, systemctl: str, saved: str | None, rejoin: str, state: str) -> None:
    """The watch's poll command run by sh with a stand-in `systemctl` first on PATH: the unit's state (live, or
    from logs/unit.show once the unit was released), rank 0's latest metrics, this launch's worker failures."""
    bin_dir, run = tmp_path / "bin", tmp_path / "run"
    for d in (bin_dir, run / "logs", run / "out"):
        d.mkdir(parents=True)
    (bin_dir / "systemctl").write_text(
        f"#!/bin/sh\ncase \"$2\" in *-rejoin.service) printf '%s\\n' '{rejoin}';;\n"
        f"*) printf '%s\\n' '{systemctl}';; esac\n"
    )
    (bin_dir / "systemctl").chmod(0o755)
    if saved is not None:
        (run / "logs" / "unit.show").write_text(saved)
    (run / "out" / "metrics.jsonl").write_text(
        json.dumps({"rank": 1, "kind": "train", "step": 9})
        + "\n"
        + json.dumps({"rank": 0, "kind": "train", "step": 7})
        + "\n"
    )
    (run / "logs" / "torchrun.log").write_text(
        "E1122 19:00:00.1 9 api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 5) of binary: /venv/bin/python\n"
        "=== launch 2 ===\n[rank1]: error: out of memory\n"
        "E1122 20:00:00.1 9 api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 77) of binary: /venv/bin/python\n"
    )
    script = F.poll_script("train-r1", str(run), "lo", "2")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    props, link, metrics, failures = F.parse_poll(out)
    assert F.unit_state(props) == state, out
    assert link == "unknown" or link in ("up", "down"), link  # lo's operstate
    assert metrics == {"rank": 0, "kind": "train", "step": 7}
    # Only this launch's (after its marker), with the payload's error line before it.
    assert [(f["pid"], f["error"]) for f in failures] == [(77, "out of memory")], failures


@pytest.mark.parametrize(
    ("records", "rdzv_host", "ends"),
    [
        ({"n1": LOST}, "", True),  # node rank 0's agent held the store
        ({"n1": LOST}, "n3", False),  # the store has a host of its own: node rank 0 is lost like any other
        ({"n3": LOST}, "n3", True),  # ... which itself cannot be lost
        ({"n1": LOST}, "head", False),  # a host that does not train
    ],
)
def test_peers_end_watch_with_a_store_of_its_own(records, rdzv_host, ends) -> None:
    assert F.peers_end_watch(records, "n2", NODES3, 1, rdzv_host) is ends


def test_job_outcome_survives_node_rank_0_with_a_store_of_its_own() -> None:
    jobs = {"n1": LOST, "n2": RUNNING}
    assert F.job_outcome(jobs, False, ["n1", "n2"], 1)["outcome"] == "failed"
    got = F.job_outcome(jobs, False, ["n1", "n2"], 1, rdzv_host="n2")
    assert got["outcome"] == "running" and got["message"].startswith("goes on with 1 of 2 nodes"), got
    lost_store = F.job_outcome({"n1": RUNNING, "n2": LOST}, False, ["n1", "n2"], 1, rdzv_host="n2")
    assert lost_store["outcome"] == "failed" and lost_store["message"].endswith(
        "n2 held the rendezvous store (train_launch_rdzv_host)"
    ), lost_store


@pytest.mark.parametrize(
    ("rdzv_host", "scheduler", "problems"),
    [
        ("", "systemd", []),
        ("", "slurm", []),
        ("head", "systemd", []),
        ("nosuch", "systemd", ["train_launch_rdzv_host=nosuch is not a host of the inventory"]),
        (
            "head",
            "slurm",
            ["train_launch_rdzv_host (a rendezvous that outlives any node) is not offered through Slurm"],
        ),
    ],
)
def test_rdzv_host_problems(rdzv_host, scheduler, problems) -> None:
    got = F.rdzv_host_problems(rdzv_host, ["n1", "n2", "head"], scheduler)
    assert len(got) == len(problems) and all(g.startswith(p) for g, p in zip(got, problems, strict=True)), got


def test_systemd_quote_keeps_each_word_whole() -> None:
    assert F.systemd_quote("--setenv=A=b c") == '"--setenv=A=b c"'
    # A specifier (%), a variable ($), a quote and a backslash reach the process as written.
    assert F.systemd_quote('50% of $HOME "x" \\y') == '"50%% of $$HOME \\"x\\" \\\\y"'
    with pytest.raises(RuleError, match="line break"):
        F.systemd_quote("a\nExecStartPost=/bin/rm -rf /")


def test_rejoin_unit_runs_the_same_command_line_at_the_next_boot_when_its_check_allows() -> None:
    argv = ["systemd-run", "--unit=train-r1", "--setenv=NCCL_IB_HCA=mlx5_0", "--", "/v/bin/torchrun", "--nnodes=2"]
    text = F.rejoin_unit_text(argv, "r1", "1", "/var/lib/rdma-llm/runs/r1/logs/torchrun.log", "/r/r1/rejoin-check")
    lines = text.splitlines()
    assert (
        'ExecStart=systemd-run "--unit=train-r1" "--setenv=NCCL_IB_HCA=mlx5_0" "--" "/v/bin/torchrun" "--nnodes=2"'
        in lines
    )
    # Nothing starts unless the check allows it; the rejoin is marked in the job's log, which gets its output.
    assert 'ExecCondition=/bin/sh "/r/r1/rejoin-check"' in lines
    assert any(x.startswith("ExecStartPre=/bin/sh -c") and "(node rank 1)" in x for x in lines), text
    assert "StandardOutput=append:/var/lib/rdma-llm/runs/r1/logs/torchrun.log" in lines
    # Started by the boot (enabled), once (oneshot), after the network (torchrun reaches the store over it).
    assert {"Type=oneshot", "WantedBy=multi-user.target", "After=network-online.target"} <= set(lines)
    assert F.rejoin_unit_name("train-r1") == "train-r1-rejoin.service"
    with pytest.raises(RuleError, match="plain executable"):
        F.rejoin_unit_text(["-/bin/sh", "x"], "r1", 0, "/l", "/c")


@pytest.mark.parametrize(
    ("until", "seen_ago", "listening", "rc", "said"),
    [
        (4102444800, 5, True, 0, ""),  # soon after the watch's last read, the store answers: rejoin
        (1000000000, 5, True, 1, "the launch's deadline has passed"),
        (4102444800, 300, True, 1, "the watch last read this host"),  # counted lost, or the run ended
        (4102444800, None, True, 1, "no watch read this host"),
        (4102444800, 5, False, 1, "does not answer (the run has ended)"),
    ],
)
def test_rejoin_check_runs_in_sh(tmp_path, until, seen_ago, listening, rc, said) -> None:
    """The rejoin unit's condition as the host runs it: sh, the venv's python probing the store."""
    import os
    import socket
    import time

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    if seen_ago is not None:
        (run / "logs" / ".watched").touch()
        os.utime(run / "logs" / ".watched", (time.time() - seen_ago,) * 2)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    if listening:
        server.listen()
    else:
        server.close()
    try:
        script = F.rejoin_check(str(run), until, 60, "127.0.0.1", port, sys.executable, wait=2)
        (run / "rejoin-check").write_text(script)
        proc = subprocess.run(["sh", str(run / "rejoin-check")], capture_output=True, text=True, timeout=30)
    finally:
        server.close()
    assert proc.returncode == rc and said in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize(
    ("jobs", "lost"),
    [
        # A host coming back after a restart is neither ended nor lost: no min_nodes rule applies to it.
        ({"n1": {"state": "running"}, "n2": {"state": "rejoining"}}, ([], "no min_nodes")),
        ({"n1": {"state": "running"}, "n2": {"state": "missing"}}, (["n2"], "no min_nodes")),
    ],
)
def test_a_rejoining_host_has_not_ended(jobs, lost) -> None:
    assert F._losses(jobs, ["n1", "n2"], 0) == lost
    assert F.job_outcome(jobs)["outcome"] == ("running" if not lost[0] else "failed")


def test_a_rebooted_host_is_the_cause_of_the_restart_not_the_survivor() -> None:
    """Recorded in the lab (tests/test_lab_4_faults.py, lab-node2's container stopped and started mid-run with
    max_restarts=1; tests/fixtures/train_launch/README.md): the rebooted host's torchrun logged its death signal,
    the rejoin unit its boot; the survivor's worker exited 143 (the payload's stop on the peer's SIGTERM) 1.5 s
    later."""
    logs = ROOT / "tests" / "fixtures" / "train_launch"
    near = 1795802482.0
    rebooted = F.worker_failures((logs / "torchrun_rebooted_node.log").read_text(), near)
    assert rebooted == [
        {
            "local_rank": None,
            "pid": 5381,
            "code": -15,
            "text": "restarted: torchrun got SIGTERM as the host went down, and rejoined at its boot "
            "(2026-11-27T18:01:53Z)",
            "time": pytest.approx(1795802510.663),
            "error": None,
        }
    ]
    survivor = F.worker_failures((logs / "torchrun_survivor.log").read_text(), near)
    assert [(f["local_rank"], f["code"], f["text"]) for f in survivor] == [(0, 143, "local rank 0 exit code 143")]
    both = [{**rebooted[0], "host": "lab-node2"}, {**survivor[0], "host": "lab-node1"}]
    assert F.first_failure(both[::-1])["host"] == "lab-node2"
    # Without the rejoin line (a unit stopped by hand, a host that did not come back): the signal alone.
    text = (logs / "torchrun_rebooted_node.log").read_text().replace("=== rejoin", "=== something else")
    assert (
        F.worker_failures(text, near)[0]["text"] == "torchrun got SIGTERM (its host shutting down, or its unit stopped)"
    )


def test_stage_packs_lists_the_payload_and_what_comes_from_the_controller() -> None:
    assert F.stage_packs("/repo/payload") == [{"name": "payload", "src": "/repo/payload", "top": "payload"}]
    packs = F.stage_packs("/repo/payload", "/srv/corpus/", "/home/me/llama-cfg")
    tops = [("payload", "payload"), ("data", "corpus"), ("model", "llama-cfg")]
    assert [(p["name"], p["top"]) for p in packs] == tops
    assert [p["name"] for p in F.stage_packs("/repo/payload", "", "/m")] == ["payload", "model"]
    with pytest.raises(RuleError, match="the model source must be an absolute path on the controller, got 'cfg'"):
        F.stage_packs("/repo/payload", "", "cfg")


def test_staged_packs_are_named_by_their_checksum() -> None:
    packs = F.stage_packs("/repo/payload", "", "/home/me/llama-cfg")
    staged = F.staged_packs(packs, ["a" * 64, "0123456789abcdef" + "f" * 48], "/var/lib/rdma-llm/train")
    assert list(staged) == ["payload", "model"]
    assert staged["payload"]["dir"] == "/var/lib/rdma-llm/train/stage/payload-" + "a" * 16
    model = staged["model"]
    assert model["dir"] == "/var/lib/rdma-llm/train/stage/model-0123456789abcdef"
    assert model["path"] == model["dir"] + "/llama-cfg" and model["sha"].startswith("0123")
    with pytest.raises(RuleError, match="2 packs but checksums"):
        F.staged_packs(packs, ["a" * 64], "/r")
    with pytest.raises(RuleError, match="2 packs but checksums"):
        F.staged_packs(packs, ["a" * 64, None], "/r")
