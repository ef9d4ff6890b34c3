"""A training run's progress as metrics (monitoring/training.py). The records are in the shape payload/train.py
writes them through payload/metrics.py MetricsLog (`time` and `rank` first, then the `start` and `train` keys as
written there; the existing launch tests use the same records), values ours: two ranks on two hosts, rank 1
restarted once (a second `start` record), a partial last line as a rank leaves it while writing."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import training

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import names, parse, value


def start(t, rank, host):
    return {"time": t, "rank": rank, "kind": "start", "pid": 100 + rank, "hostname": host, "local_rank": 0,
            "world_size": 2}  # fmt: skip


def train(t, rank, step, loss, mfu=0.31):
    return {"time": t, "rank": rank, "kind": "train", "step": step, "loss": loss + 0.01 * rank, "loss_global": loss,
            "lr": 3e-4, "grad_norm": 1.2, "step_ms": 250.0, "tokens_per_s": 65536.0, "tokens_per_s_per_rank": 32768.0,
            "mfu": mfu, "comm_share": 0.12, "fwd_ms": 80.0, "tokens_seen": step * 16384, "eta_s": 100.0}  # fmt: skip


RECORDS = [
    start(1000.0, 0, "lab-node1"),
    start(1000.5, 1, "lab-node2"),
    train(1010.0, 0, 10, 9.5),
    train(1010.1, 1, 10, 9.5),
    start(1020.0, 1, "lab-node2"),  # rank 1 started again
    {"time": 1025.0, "rank": 1, "kind": "resume", "step": 10, "checkpoint": "ckpt/10", "world_size": 2},
    train(1030.0, 0, 20, 8.25),
    train(1030.2, 1, 20, 8.25, mfu=None),
]
TEXT = "\n".join(json.dumps(r) for r in RECORDS) + '\n{"time": 1031.0, "rank": 0, "ki'


def labels(rank: int, host: str, job_id: str = "42") -> dict:
    return {"run_id": "run1", "job_id": job_id, "host": host, "rank": rank}


def test_each_ranks_last_step_and_its_numbers() -> None:
    text = training.textfile(training.read_records(TEXT), "run1", "42")
    r0 = labels(0, "lab-node1")
    assert value(text, "rdma_llm_train_step", **r0) == 20
    assert value(text, "rdma_llm_train_loss", **r0) == 8.25  # loss_global, not the rank's own loss
    assert value(text, "rdma_llm_train_tokens_per_second", **r0) == 65536.0
    assert value(text, "rdma_llm_train_mfu_ratio", **r0) == 0.31
    assert value(text, "rdma_llm_train_last_step_timestamp_seconds", **r0) == 1030.0
    assert value(text, "rdma_llm_train_step", **labels(1, "lab-node2")) == 20
    assert value(text, "rdma_llm_train_loss", **labels(1, "lab-node2")) == 8.25  # its own loss was 8.26


def test_restarts_count_the_starts_after_the_first() -> None:
    text = training.textfile(training.read_records(TEXT), "run1", "42")
    assert value(text, "rdma_llm_train_restarts_total", **labels(0, "lab-node1")) == 0
    assert value(text, "rdma_llm_train_restarts_total", **labels(1, "lab-node2")) == 1


def test_a_null_mfu_is_no_sample() -> None:
    text = training.textfile(training.read_records(TEXT), "run1", "42")
    assert ("rdma_llm_train_mfu_ratio", tuple(sorted((k, str(v)) for k, v in labels(1, "lab-node2").items()))) not in (
        parse(text)
    )


def test_under_systemd_the_job_id_is_empty() -> None:
    text = training.textfile(training.read_records(TEXT), "run1")
    assert value(text, "rdma_llm_train_step", **labels(0, "lab-node1", job_id="")) == 20


def test_a_rank_that_only_started_has_restarts_and_no_step() -> None:
    text = training.textfile([start(1.0, 0, "h")], "run1")
    assert names(text) == {"rdma_llm_train_restarts_total"}
    assert training.textfile([], "run1") == ""


def test_the_partial_line_is_skipped() -> None:
    records = training.read_records(TEXT)
    assert len(records) == len(RECORDS) and records[-1] == RECORDS[-1]
