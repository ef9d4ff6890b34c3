"""The job's outcome from the units' status as tables (plugins/module_utils/launch/outcome.py): where a failure
started, a stop on request, going on without lost hosts (min_nodes), whether the peers end a host's watch, the
progress line, the evaluation gate and the manifest's node entries. The unit status samples are `systemctl show`
output as systemd 252 (Debian 12) prints it for a transient service with RemainAfterExit=yes (recorded in the
lab)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import outcome as O


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
    got = O.job_outcome(jobs, deadline)
    assert got["outcome"] == outcome
    assert got["message"].startswith(message), got


LOST = {"state": "unreachable", "ended": 5.0, "why": "unreachable for 45 s (ssh)"}
FAILED = {"state": "failed", "ended": 10.0, "unit": unit("failed", "failed", "exit-code", "1", "1")}
NODES3 = ["n1", "n2", "n3"]


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
    assert O.peers_end_watch(records, "n1" if "n1" not in records else "n2", nodes, min_nodes) is ends


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
    got = O.job_outcome(jobs, False, sorted(jobs), min_nodes)
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
    got = O.job_outcome(jobs, False, sorted(jobs), 0, 1000.0)
    assert got["outcome"] == outcome and got["message"].startswith(message), got
    assert O.job_outcome(jobs, False, sorted(jobs), 0)["outcome"] != "stopped"


def test_a_stop_request_covers_only_the_hosts_it_stopped() -> None:
    """train_stop.yml -e train_hosts=n2 stopped n2 only: n1's unit, which failed after the request, failed."""
    jobs = {"n1": _ended(1002.0), "n2": _ended(1003.0)}
    got = O.job_outcome(jobs, False, ["n1", "n2"], 0, 1000.0, ["n2"])
    assert got["outcome"] == "failed" and got["message"].startswith("job failed on n1"), got
    assert O.job_outcome(jobs, False, ["n1", "n2"], 0, 1000.0, ["n1", "n2"])["outcome"] == "stopped"


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
        (20, {"kind": "eval", "step": 10, "val_loss": 7.5}, "[   20 s] 2/2 hosts running | step 10/30 | val loss 7.5"),
        (
            30,
            {"kind": "result", "final_step": 30, "status": "completed"},
            "[   30 s] 2/2 hosts running | step 30 completed, saving and exporting",
        ),
        (30, {"kind": "result", "final_step": 12, "status": "failed"}, "[   30 s] 2/2 hosts running | step 12 failed"),
    ],
)
def test_progress_line(elapsed, metrics, expected) -> None:
    assert O.progress_line(elapsed, 2, 2, metrics, 30) == expected


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
        # train.py eval's gate.json beside a passing result.json: its suite floor fails the run's gate.
        (
            [
                {"gate": {"status": "pass", "checks": []}},
                {
                    "status": "fail",
                    "model": "step_0000030",
                    "step": 30,
                    "checks": [{"check": "min_suite_score", "value": 0.25, "limit": 0.5, "pass": False}],
                },
            ],
            "fail",
            "the evaluation gate failed (min_suite_score: suite score 0.25 < 0.5 (step_0000030))",
        ),
        (
            [{"status": "pass", "model": "hf_model", "checks": [{"check": "min_suite_score", "pass": True}]}],
            "pass",
            "the evaluation gate passed",
        ),
    ],
)
def test_gate_verdict(results, status, message) -> None:
    assert O.gate_verdict(results) == {"status": status, "message": message}


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
    nodes = O.manifest_nodes(["n0", "n1", "gone"], ["n0", "n1"], hostvars)
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
    ("records", "rdzv_host", "ends"),
    [
        ({"n1": LOST}, "", True),  # node rank 0's agent held the store
        ({"n1": LOST}, "n3", False),  # the store has a host of its own: node rank 0 is lost like any other
        ({"n3": LOST}, "n3", True),  # ... which itself cannot be lost
        ({"n1": LOST}, "head", False),  # a host that does not train
    ],
)
def test_peers_end_watch_with_a_store_of_its_own(records, rdzv_host, ends) -> None:
    assert O.peers_end_watch(records, "n2", NODES3, 1, rdzv_host) is ends


def test_job_outcome_survives_node_rank_0_with_a_store_of_its_own() -> None:
    jobs = {"n1": LOST, "n2": RUNNING}
    assert O.job_outcome(jobs, False, ["n1", "n2"], 1)["outcome"] == "failed"
    got = O.job_outcome(jobs, False, ["n1", "n2"], 1, rdzv_host="n2")
    assert got["outcome"] == "running" and got["message"].startswith("goes on with 1 of 2 nodes"), got
    lost_store = O.job_outcome({"n1": RUNNING, "n2": LOST}, False, ["n1", "n2"], 1, rdzv_host="n2")
    assert lost_store["outcome"] == "failed" and lost_store["message"].endswith(
        "n2 held the rendezvous store (train_launch_rdzv_host)"
    ), lost_store


@pytest.mark.parametrize(
    ("jobs", "lost"),
    [
        # A host coming back after a restart is neither ended nor lost: no min_nodes rule applies to it.
        ({"n1": {"state": "running"}, "n2": {"state": "rejoining"}}, ([], "no min_nodes")),
        ({"n1": {"state": "running"}, "n2": {"state": "missing"}}, (["n2"], "no min_nodes")),
    ],
)
def test_a_rejoining_host_has_not_ended(jobs, lost) -> None:
    assert O._losses(jobs, ["n1", "n2"], 0) == lost
    assert O.job_outcome(jobs)["outcome"] == ("running" if not lost[0] else "failed")
