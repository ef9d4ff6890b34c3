"""A run's evaluation in its report (plugins/module_utils/launch/evals.py): the records are the shape `train.py eval`
writes (tests/payload/test_payload_eval.py makes real ones), trimmed to what the report reads."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import evals as EV

from tests.unit.plugins.module_utils.launch.test_report import _run


def record(name, step, ppl, passed, logprob=-7.0, noise=None):
    corpora = {"validation": {"loss": 1.0, "perplexity": ppl, "blocks": 112}}
    if noise is not None:
        corpora["noise"] = {"loss": 9.0, "perplexity": noise, "blocks": 128}
    suite = {"items": 14, "passed": passed, "score": round(passed / 14, 4), "mean_logprob": logprob}
    return {"name": name, "kind": "checkpoint" if step else "export", "step": step, "corpora": corpora, "suite": suite}


RESULTS = [
    record("step_0000008", 8, 434.96, 4, -7.02153, noise=9000.0),
    record("step_0000016", 16, 328.91, 5, -6.97),
    record("hf_model_ema", None, 438.25, 4),
]
GATE = {"status": "fail", "model": "hf_model_ema", "step": None,
        "message": "gate: fail (suite score 0.29 < 0.50 min_suite_score)"}  # fmt: skip


def collected(tmp_path, host="n1", results=RESULTS, gate=GATE):
    out = tmp_path / host / "out" / "eval"
    out.mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps(results))
    if gate:
        (out / "gate.json").write_text(json.dumps(gate))
    return tmp_path


def test_find_reads_the_host_that_evaluated(tmp_path) -> None:
    assert EV.find(tmp_path) is None
    run = collected(tmp_path, "n2")
    (run / "n1" / "out" / "eval").mkdir(parents=True)
    (run / "n1" / "out" / "eval" / "summary.json").write_text("{torn")
    ev = EV.find(run)
    assert ev["host"] == "n2" and ev["results"] == RESULTS and ev["gate"] == GATE


def test_lines_name_the_newest_checkpoint_and_the_gate(tmp_path) -> None:
    ev = EV.find(collected(tmp_path))
    assert EV.lines(ev) == [
        "eval:   step_0000016 step 16: validation ppl 328.91, suite 5/14 (3 model(s) evaluated on n1)",
        "eval:   gate: fail (suite score 0.29 < 0.50 min_suite_score) [hf_model_ema]",
    ]
    only_export = {"host": "n1", "results": RESULTS[2:], "gate": {"status": "off", "checks": []}}
    assert EV.lines(only_export) == [
        "eval:   hf_model_ema: validation ppl 438.25, suite 4/14 (1 model(s) evaluated on n1)"
    ]


def test_markdown_tables_every_model_and_a_missing_corpus_is_a_dash(tmp_path) -> None:
    rows = EV.markdown(EV.find(collected(tmp_path)))
    assert rows[3] == "| model | step | perplexity noise | perplexity validation | suite passed | mean log-prob |"
    assert rows[5] == "| step_0000008 | 8 | 9000.00 | 434.96 | 4/14 | -7.022 |"
    assert rows[6] == "| step_0000016 | 16 | - | 328.91 | 5/14 | -6.970 |"
    assert rows[7] == "| hf_model_ema | - | - | 438.25 | 4/14 | -7.000 |"
    assert rows[-1].startswith("Evaluation gate on hf_model_ema: **fail**")


def test_plot_draws_the_checkpoints_only(tmp_path) -> None:
    ev = EV.find(collected(tmp_path))
    assert EV.plot(ev, tmp_path / "eval.png") and (tmp_path / "eval.png").stat().st_size > 1000
    assert not EV.plot({"host": "n1", "results": RESULTS[2:], "gate": None}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_the_run_report_carries_the_evaluation(tmp_path) -> None:
    collected(tmp_path)
    lines = _run(tmp_path)
    assert "eval:   step_0000016 step 16: validation ppl 328.91, suite 5/14 (3 model(s) evaluated on n1)" in lines
    assert f"plot:   {tmp_path / 'eval.png'}" in lines and (tmp_path / "eval.png").exists()
    text = (tmp_path / "report.md").read_text()
    assert "## Evaluation (`train.py eval` on n1)" in text and "![evaluation](eval.png)" in text


def test_a_report_of_exports_only_has_no_plot(tmp_path) -> None:
    collected(tmp_path, results=RESULTS[2:], gate=None)
    lines = _run(tmp_path)
    assert "eval:   hf_model_ema: validation ppl 438.25, suite 4/14 (1 model(s) evaluated on n1)" in lines
    text = (tmp_path / "report.md").read_text()
    assert "| hf_model_ema | - | 438.25 | 4/14 | -7.000 |" in text and "eval.png" not in text
    assert not (tmp_path / "eval.png").exists()
