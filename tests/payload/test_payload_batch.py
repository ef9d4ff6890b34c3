"""batch_size=auto (payload/batch.py): the decision on measured peaks, without a GPU. The probe itself
(step_peak, cuda_budget) needs CUDA; it runs on a lent GPU (docs/benchmarks.md) and is not faked here."""

from __future__ import annotations

import pytest
from payload_helpers import REPO  # noqa: F401  (puts the repository on sys.path)

from payload import batch as B
from payload.config import ConfigError, TrainConfig, parse_args, resolve

pytestmark = pytest.mark.payload

GIB = B.GIB


def linear(static: float, per_sample: float, oom_at: int | None = None):
    """A step whose peak is static + per_sample x batch GiB (what activations do), out of memory from oom_at;
    records the batches it was asked for."""
    asked = []

    def peak(b: int) -> int | None:
        asked.append(b)
        if oom_at is not None and b >= oom_at:
            return None
        return int((static + per_sample * b) * GIB)

    return peak, asked


def test_largest_fit_takes_the_largest_power_of_two_within_budget():
    # 3 GiB of weights and gradients, 0.5 GiB a sequence: 64 -> 35 GiB, 128 -> 67 GiB.
    peak, asked = linear(3.0, 0.5)
    batch, tried = B.largest_fit(peak, int(68 * GIB), cap=10_000)
    assert batch == 128 and asked == [1, 2, 4, 8, 16, 32, 64, 128]  # 256 (131 GiB) extrapolated, never run
    assert tried[-2:] == [(64, 35 * GIB), (128, 67 * GIB)]


def test_largest_fit_runs_the_next_batch_only_when_its_extrapolated_peak_fits():
    peak, asked = linear(3.0, 0.5)
    # 128 would take 67 GiB > 60 (35 + 2 x (35 - 19), from the last two measured): it is never run
    assert B.largest_fit(peak, int(60 * GIB), cap=10_000)[0] == 64 and asked[-1] == 64


def test_largest_fit_stops_at_out_of_memory_and_at_the_first_batch_over_budget():
    peak = linear(1.0, 1.0, oom_at=8)[0]
    assert B.largest_fit(peak, int(100 * GIB), cap=10_000) == (4, [(1, 2 * GIB), (2, 3 * GIB), (4, 5 * GIB), (8, None)])
    # a step whose growth is not linear (the extrapolation under-predicts): the measured peak decides
    jumps = {1: 1, 2: 2, 4: 3, 8: 50}
    batch, tried = B.largest_fit(lambda b: jumps[b] * GIB, int(10 * GIB), cap=10_000)
    assert batch == 4 and tried[-1] == (8, 50 * GIB)


def test_largest_fit_keeps_to_the_corpus_and_the_ceiling():
    peak, asked = linear(0.0, 0.001)
    assert B.largest_fit(peak, int(100 * GIB), cap=100)[0] == 64  # 128 sequences would exceed the corpus's cap
    assert asked[-1] == 64
    assert B.largest_fit(linear(0.0, 0.0001)[0], int(100 * GIB), cap=10**9)[0] == B.MAX_BATCH


def test_largest_fit_says_zero_when_not_even_one_sequence_fits():
    assert B.largest_fit(linear(90.0, 1.0)[0], int(68 * GIB), cap=1000) == (0, [(1, 91 * GIB)])
    assert B.largest_fit(linear(1.0, 1.0, oom_at=1)[0], int(68 * GIB), cap=1000) == (0, [(1, None)])
    assert B.largest_fit(linear(1.0, 1.0)[0], int(68 * GIB), cap=0) == (0, [])


def test_data_cap_is_the_smallest_share_of_training_and_validation_blocks():
    assert B.data_cap(train_blocks=2774, val_blocks=146, world_size=1) == 146
    assert B.data_cap(train_blocks=2774, val_blocks=146, world_size=2) == 73
    assert B.data_cap(train_blocks=100, val_blocks=0, world_size=4) == 25  # validation from its own corpus
    assert B.data_cap(train_blocks=1, val_blocks=0, world_size=4) == 0


def test_optimizer_bytes_counts_what_the_bare_step_does_not_hold():
    n = 124_000_000
    assert B.optimizer_bytes(n, 1, ddp=True, ema=False) == 8 * n  # AdamW's two fp32 moments
    assert B.optimizer_bytes(n, 2, ddp=True, ema=False) == 12 * n  # + DDP's gradient buckets
    assert B.optimizer_bytes(n, 2, ddp=False, ema=True) == 12 * n  # FSDP/ZeRO: no buckets; + the EMA copy


def test_describe_names_the_pick_and_every_measurement():
    line = B.describe(64, [(32, 20 * GIB), (64, 35 * GIB), (128, None)], int(68 * GIB), 80 * GIB)
    assert line == (
        "batch_size auto: 64 (eager step peak GiB by micro-batch 32: 20.0, 64: 35.0, 128: out of memory; "
        "budget 68.0 GiB = 80% of 80.0 GiB available)"
    )


def test_batch_size_auto_is_the_default_and_a_value_of_its_own():
    assert TrainConfig.batch_size == 0
    assert parse_args(["--data=x", "--batch_size=auto"]).batch_size == 0
    assert parse_args(["--data=x", "--batch_size=AUTO"]).batch_size == 0
    assert parse_args(["--data=x", "--batch_size=16"]).batch_size == 16
    assert resolve({"data": "x", "batch_size": "auto"})["batch_size"] == 0
    with pytest.raises(ConfigError, match=r"--batch_size=-1: must be >= 0"):
        parse_args(["--data=x", "--batch_size=-1"])
    with pytest.raises(ConfigError, match="batch_size='many': expected an integer"):
        parse_args(["--data=x", "--batch_size=many"])
