"""Validation perplexity, a held-out eval corpus, TensorBoard events, and the evaluation gate."""

from __future__ import annotations

import json
import math

import pytest
from payload_helpers import base_args, read_jsonl, train_py

from payload import gate as G

pytestmark = pytest.mark.payload


@pytest.mark.parametrize(
    ("val_loss", "max_val_loss", "baseline", "regression", "status", "passes"),
    [
        (5.0, 0.0, None, 0.02, "off", []),
        (5.0, 6.0, None, 0.02, "pass", [True]),
        (5.0, 4.9, None, 0.02, "fail", [False]),
        (5.0, 0.0, 4.95, 0.02, "pass", [True]),  # 5.0 <= 4.95 * 1.02 = 5.049
        (5.0, 0.0, 4.80, 0.02, "fail", [False]),  # 5.0 > 4.896
        (5.0, 6.0, 4.80, 0.02, "fail", [True, False]),  # every check must pass
        (None, 6.0, None, 0.02, "fail", [False]),  # no final validation: not usable
        (float("nan"), 6.0, None, 0.02, "fail", [False]),  # diverged
    ],
)
def test_gate_table(val_loss, max_val_loss, baseline, regression, status, passes):
    gate = G.evaluate(val_loss, max_val_loss, baseline, regression)
    assert gate["status"] == status and [c["pass"] for c in gate["checks"]] == passes
    assert G.describe(gate).startswith(f"gate: {status}")


@pytest.mark.parametrize(
    ("max_val_loss", "score", "floor", "status", "passes"),
    [
        (0.0, 0.5, 0.0, "off", []),
        (0.0, 0.5, 0.5, "pass", [True]),  # at the floor passes
        (0.0, 0.49, 0.5, "fail", [False]),
        (0.0, None, 0.5, "fail", [False]),  # no suite ran: not judged good
        (6.0, 0.9, 0.5, "pass", [True, True]),
        (4.0, 0.9, 0.5, "fail", [False, True]),
    ],
)
def test_gate_reads_a_suite_score(max_val_loss, score, floor, status, passes):
    gate = G.evaluate(5.0, max_val_loss, None, 0.02, score, floor)
    assert gate["status"] == status and [c["pass"] for c in gate["checks"]] == passes
    assert G.describe(gate).startswith(f"gate: {status}")


def test_baseline_must_carry_a_final_val_loss(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"status": "completed", "final_val_loss": 4.25}))
    bad.write_text(json.dumps({"status": "failed", "final_val_loss": None}))
    assert G.read_baseline(str(good)) == 4.25
    with pytest.raises(ValueError, match=r"no final_val_loss.*'failed'"):
        G.read_baseline(str(bad))
    with pytest.raises(OSError):
        G.read_baseline(str(tmp_path / "missing.json"))


def _train(args):
    return train_py(*args)


def test_eval_corpus_perplexity_and_gate_verdicts(tmp_path, corpus, tokenizer_dir, token_cache):
    """Train on two plays, validate on the third; then judge a second run against the first as baseline."""
    plays = sorted(corpus.iterdir())
    train_dir, eval_dir = tmp_path / "train", tmp_path / "eval"
    train_dir.mkdir(), eval_dir.mkdir()
    for p in plays[:-1]:
        (train_dir / p.name).symlink_to(p)
    (eval_dir / plays[-1].name).symlink_to(plays[-1])

    first = tmp_path / "first"
    # batch_size=auto on a CPU: 4, said, and recorded where the run's config and result say what it trained with
    opts = dict(max_steps=8, eval_data=eval_dir, gate_max_val_loss=50, batch_size="auto")
    proc = _train(base_args(first, train_dir, tokenizer_dir, token_cache, **opts))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "eval_data:" in proc.stdout and "perplexity" in proc.stdout and "gate: pass" in proc.stdout
    assert "batch_size auto: 4 (a CPU: memory does not limit the step)" in proc.stdout
    result = json.loads((first / "result.json").read_text())
    assert result["batch_size"] == 4 and result["peak_memory_gib"] is None
    assert json.loads((first / "config.json").read_text())["batch_size"] == 4
    assert result["gate"]["status"] == "pass"
    assert math.isclose(result["final_val_ppl"], math.exp(result["final_val_loss"]), rel_tol=1e-9)
    evals = [r for r in read_jsonl(first / "metrics.jsonl") if r["kind"] == "eval"]
    assert evals and all(math.isclose(r["val_ppl"], math.exp(r["val_loss"]), rel_tol=1e-3) for r in evals)

    # TensorBoard: the same numbers as scalars, readable by TensorBoard's own loader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(first / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss_global", "train/lr", "train/tokens_per_s", "eval/val_loss", "eval/val_ppl"} <= tags, tags
    assert [e.step for e in events.Scalars("eval/val_loss")] == [r["step"] for r in evals]
    assert math.isclose(events.Scalars("eval/val_loss")[-1].value, evals[-1]["val_loss"], rel_tol=1e-5)

    # Same recipe, 2 steps instead of 8: its loss is clearly worse than the baseline's -> the gate fails,
    # the run itself still completed (exit 0): what to do with a failed gate is the launcher's decision.
    second = tmp_path / "second"
    base = first / "result.json"
    opts = dict(
        max_steps=2, warmup_steps=1, eval_data=eval_dir, gate_baseline=base, gate_max_regression=0.01, batch_size=4
    )
    proc = _train(base_args(second, train_dir, tokenizer_dir, token_cache, **opts))
    assert proc.returncode == 0, proc.stderr[-3000:]
    gate = json.loads((second / "result.json").read_text())["gate"]
    assert gate["status"] == "fail" and gate["checks"][0]["baseline"] == result["final_val_loss"], gate
    assert "gate: fail" in proc.stdout
    # `train.py eval` re-measures that run on its eval_data and judges it with the run's own gate settings.
    from payload import evaluate as E
    from payload.config import EvalConfig

    assert E.evaluate(EvalConfig(out_dir=str(second), suite="").validate()) == 3
    again = json.loads((second / "eval" / "gate.json").read_text())
    assert again["status"] == "fail" and again["checks"][0]["baseline"] == result["final_val_loss"], again
    measured = json.loads((second / "eval" / "step_0000002.json").read_text())["corpora"]["validation"]
    assert measured["path"] == str(eval_dir)
    final = json.loads((second / "result.json").read_text())["final_val_loss"]
    assert measured["loss"] == pytest.approx(final, abs=2e-4)

    proc = _train(base_args(tmp_path / "third", train_dir, tokenizer_dir, token_cache, gate_baseline=tmp_path / "x"))
    assert proc.returncode == 2 and "error: --gate_baseline=" in proc.stderr
