"""A training run's progress as metrics, per rank, from the run's metrics.jsonl (payload/metrics.py MetricsLog:
one JSON line per record, `time` and `rank` on each; payload/train.py writes `start` at each worker start,
`train` every log interval): the last step, its loss, throughput and MFU, when it was logged, and how often the
rank started again (automatic restarts: torchrun's, or the Slurm requeue's).

Labels run_id and job_id (the Slurm job id; "" under the systemd engine) come from the launch, host from the
rank's own start record. The values are the last `train` record's: a rank that logs nothing new keeps its old
step and an old `last_step_timestamp_seconds`, which is what a stalled run looks like.
"""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import Metric, render, table

JSONL = "<run dir>/out/metrics.jsonl"
LABELS = ("run_id", "job_id", "host", "rank")
METRICS = table(
    Metric("rdma_llm_train_step", "gauge", "", LABELS, "The last optimizer step the rank logged",
           f"{JSONL}: train.step"),
    Metric("rdma_llm_train_loss", "gauge", "", LABELS, "Training loss of that interval, averaged over the ranks",
           f"{JSONL}: train.loss_global"),
    Metric("rdma_llm_train_tokens_per_second", "gauge", "", LABELS,
           "The run's training throughput as the rank measured it over the interval (every rank reports the run's "
           "rate: do not sum over ranks)", f"{JSONL}: train.tokens_per_s"),
    Metric("rdma_llm_train_mfu_ratio", "gauge", "ratio", LABELS, "Model FLOPs utilisation of the rank's device (0-1)",
           f"{JSONL}: train.mfu"),
    Metric("rdma_llm_train_restarts_total", "counter", "", LABELS,
           "Times the rank started again in this run (start records after the first)", f"{JSONL}: start records"),
    Metric("rdma_llm_train_last_step_timestamp_seconds", "gauge", "seconds", LABELS,
           "When the rank logged its last step (Unix time)", f"{JSONL}: train.time"),
    Metric("rdma_llm_train_rank_alive", "gauge", "", LABELS,
           "1 while the rank's process runs, 0 once it ended (the run finished, failed or was stopped): a stall is a "
           "rank alive that logs no step", f"{JSONL}: start.pid, /proc/<pid>/stat"),
)  # fmt: skip
# (metric, the train record's key): absent or null keys are no sample (mfu is null where no peak FLOPs is known).
FIELDS = (
    ("rdma_llm_train_step", "step"),
    ("rdma_llm_train_loss", "loss_global"),
    ("rdma_llm_train_tokens_per_second", "tokens_per_s"),
    ("rdma_llm_train_mfu_ratio", "mfu"),
    ("rdma_llm_train_last_step_timestamp_seconds", "time"),
)


def read_records(text: str) -> list:
    """metrics.jsonl's records; a line that does not parse (a partial last line while a rank writes) is skipped."""
    out = []
    for line in str(text or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def samples(records: list, run_id: str, job_id: str = "", alive: dict | None = None) -> list:
    """One run's records (read_records) -> each rank's samples, in the order the records were written; `alive`
    ({rank: whether its process runs}, what the collector read of /proc) adds rdma_llm_train_rank_alive."""
    ranks: dict = {}
    for record in records or []:
        if not isinstance(record.get("rank"), int) or isinstance(record.get("rank"), bool):
            continue
        rank = ranks.setdefault(record["rank"], {"starts": 0, "host": "", "train": None})
        if record.get("kind") == "start":
            rank["starts"] += 1
            rank["host"] = str(record.get("hostname") or rank["host"])
        elif record.get("kind") == "train":
            rank["train"] = record
    out = []
    for number, rank in sorted(ranks.items()):
        labels = {"run_id": str(run_id), "job_id": str(job_id or ""), "host": rank["host"], "rank": str(number)}
        out.append(("rdma_llm_train_restarts_total", labels, max(rank["starts"] - 1, 0)))
        if alive is not None and number in alive:
            out.append(("rdma_llm_train_rank_alive", labels, 1 if alive[number] else 0))
        for name, key in FIELDS:
            value = (rank["train"] or {}).get(key)
            if _number(value):
                out.append((name, labels, value))
    return out


def textfile(records: list, run_id: str, job_id: str = "") -> str:
    return render(METRICS, samples(records, run_id, job_id))
