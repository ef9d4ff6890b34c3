"""The launch's plan as tables (plugins/module_utils/launch/train.py): rank order, payload config (judged by
payload/config.py), the job's environment and QoS note, the elastic plan, the staged packs and the checkpoint a
resume starts from."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
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
    ("engine", "min_nodes", "refused"),
    [("ddp", 1, False), ("deepspeed", 1, True), ("fsdp", 1, True), ("fsdp", 0, False), ("deepspeed", 2, False)],
)
def test_elastic_plan_only_for_a_checkpoint_every_node_holds_whole(engine, min_nodes, refused) -> None:
    if refused:
        with pytest.raises(RuleError, match=f"needs engine ddp, not {engine}"):
            F.elastic_plan(min_nodes, 2, 1, 15, engine)
    else:
        assert F.elastic_plan(min_nodes, 2, 1, 15, engine)["min_nodes"] in (1, 2)


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
