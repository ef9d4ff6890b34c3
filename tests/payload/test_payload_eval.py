"""`train.py eval` and `bundle` on one tiny 2-rank run with two checkpoints, and `transformers serve` of its
bundle answering the `openai` client (what playbooks/serve.yml runs on a node)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from payload_helpers import base_args, free_port, job_env, read_jsonl, run_ok, train_py

from payload import ckpt_verify as V
from payload import commands as C
from payload import evaluate as E
from payload.config import BundleConfig, ConfigError, EvalConfig, parse_args

pytestmark = pytest.mark.payload

# Validation and a checkpoint at step 8 and at the end: two checkpoints, each with the trainer's own val loss.
RUN = dict(max_steps=16, log_interval=8, eval_interval=8, ckpt_interval=8, export_hf="true", ema_decay=0.9)
# A line of the corpus the model trained on, and letters no play has.
GOOD = (" and to-morrow, and", " to-morrow")
GARBAGE = " qzxv jqkw vvqz"


@pytest.fixture(scope="module")
def run(launch_module, tmp_path_factory, corpus, tokenizer_dir, token_cache) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    run_ok(launch_module, base_args(out, corpus, tokenizer_dir, token_cache, **RUN))
    return out


def evaluate(out: Path, results: Path, **options) -> int:
    return E.evaluate(parse_args([f"--out_dir={out}", f"--results_dir={results}"]
                                 + [f"--{k}={v}" for k, v in options.items()], EvalConfig))  # fmt: skip


def suite_file(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def test_perplexity_is_the_trainers_validation_at_each_checkpoint(run, tmp_path, corpus, capsys):
    """Each checkpoint's perplexity on the run's own held-out blocks is exp of the val loss the trainer logged at that
    step; the export equals the last checkpoint; a named corpus of letters no play has is far less likely."""
    garbage = tmp_path / "garbage.txt"
    garbage.write_text(" ".join(GARBAGE.split() * 4000))
    results = tmp_path / "results"
    assert evaluate(run, results, steps="all", models="hf_model", corpora=f"validation,noise={garbage}") == 0
    logged = {r["step"]: r["val_loss"] for r in read_jsonl(run / "metrics.jsonl") if r["kind"] == "eval"}
    summary = json.loads((results / "summary.json").read_text())
    assert [(r["name"], r["step"]) for r in summary] == [("step_0000008", 8), ("step_0000016", 16), ("hf_model", None)]
    for r in summary:
        step = r["step"] or 16
        assert r["corpora"]["validation"]["loss"] == pytest.approx(logged[step], abs=2e-4), r
        assert r["corpora"]["validation"]["perplexity"] == pytest.approx(math.exp(logged[step]), rel=5e-4)
        assert r["corpora"]["noise"]["perplexity"] > 2 * r["corpora"]["validation"]["perplexity"], r["corpora"]
        assert r["corpora"]["noise"]["blocks"] == 8 * 2 * 8  # the run's eval_batches x its 2 ranks, batches of 8
    assert summary[0]["trainer_val_loss"] == pytest.approx(logged[8], abs=1e-5)  # from the checkpoint itself
    assert logged[16] < logged[8]  # the two checkpoints differ: the match is not one number twice
    table = (results / "table.md").read_text()
    assert "| model | step | ppl noise | ppl validation | suite | mean logprob |" in table
    assert f"| step_0000008 | 8 | {summary[0]['corpora']['noise']['perplexity']:.2f} |" in table
    assert table in capsys.readouterr().out
    # the default suite ran on every model (its items are the demo corpus's lines)
    assert all(r["suite"]["items"] == len(E.read_suite(E.DEFAULT_SUITE)) for r in summary)


def test_suite_scores_known_good_and_known_bad_apart_and_the_gate_reads_it(run, tmp_path):
    prompt, cont = GOOD
    suite = suite_file(tmp_path / "suite.jsonl", [
        {"id": "good", "prompt": prompt, "expected": cont, "distractors": [GARBAGE]},
        {"id": "bad", "prompt": prompt, "expected": GARBAGE, "distractors": [cont]},
    ])  # fmt: skip
    results = tmp_path / "results"
    assert evaluate(run, results, suite=suite, corpora="", min_suite_score=0.5) == 0
    record = json.loads((results / "step_0000016.json").read_text())
    good, bad = record["items"]
    assert (good["id"], good["pass"], bad["id"], bad["pass"]) == ("good", True, "bad", False), record["items"]
    assert good["logprob"] > bad["logprob"] + 0.5 and good["distractor_logprobs"] == [bad["logprob"]]
    assert record["suite"] | {"file": None, "sha256": None} == {
        "file": None, "sha256": None, "items": 2, "passed": 1, "score": 0.5,
        "mean_logprob": round((good["logprob"] + bad["logprob"]) / 2, 5),
    }  # fmt: skip
    gate = json.loads((results / "gate.json").read_text())
    assert gate["status"] == "pass" and gate["model"] == "step_0000016"
    # Above the score, from the command line: exit 3, the verdict named.
    failed = train_py("eval", f"--out_dir={run}", f"--results_dir={results}", f"--suite={suite}", "--corpora=",
                      "--min_suite_score=0.75", timeout=180)  # fmt: skip
    assert failed.returncode == 3, failed.stderr[-3000:]
    assert "gate: fail (suite score 0.50 < 0.75 min_suite_score) [step_0000016]" in failed.stdout


def test_greedy_rules_judge_the_models_own_output(run, tmp_path):
    """`exact` and `keywords` pass on what greedy decoding produced and fail on anything else."""
    model, tok, _ = E.load(E.Target("step_0000016", "checkpoint", run / "checkpoints" / "step_0000016", 16))
    prompt = "HAMLET. My"
    ids = E.greedy(model, tok, prompt, 12)
    text = tok.decode(ids)
    first = tok.decode(ids[:1])
    assert tok(first).input_ids == ids[:1]  # the single token survives a round trip: an `exact` item can name it
    word = max(text.split(), key=len, default=text)  # a 16-step model may answer only newlines
    items = E.read_suite(suite_file(tmp_path / "s.jsonl", [
        {"id": "exact-own", "prompt": prompt, "expected": first},
        {"id": "exact-other", "prompt": prompt, "expected": GARBAGE},
        {"id": "kw-own", "prompt": prompt, "keywords": [word.upper()], "max_new_tokens": 12},
        {"id": "kw-other", "prompt": prompt, "keywords": [word, "qzxvjq"], "max_new_tokens": 12},
    ]))  # fmt: skip
    scored = [E.score_item(model, tok, item, 24) for item in items]
    assert [(r["rule"], r["pass"]) for r in scored] == [
        ("exact", True), ("exact", False), ("keywords", True), ("keywords", False)
    ], scored  # fmt: skip
    assert scored[2]["output"] == text


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("{not json", "not JSON"),
        ('{"expected": " x"}', "string 'prompt'"),
        ('{"prompt": "a"}', "give 'expected'"),
        ('{"prompt": "a", "expected": " x", "keywords": ["x"]}', "give 'expected'"),
        ('{"prompt": "a", "keywords": []}', "'keywords' is a non-empty list"),
        ('{"prompt": "a", "expected": " x", "distractors": " y"}', "'distractors' is a non-empty list"),
    ],
)
def test_a_bad_suite_line_is_named(tmp_path, line, error):
    path = tmp_path / "suite.jsonl"
    path.write_text('{"prompt": "ok", "expected": " fine"}\n' + line + "\n")
    with pytest.raises(E.EvalError, match=rf"suite\.jsonl:2: .*{error}"):
        E.read_suite(path)


def test_bad_input_is_refused_before_anything_is_written(run, tmp_path, capsys):
    results = tmp_path / "results"
    not_a_model = tmp_path / "plain"
    not_a_model.mkdir()
    cases = [
        (dict(suite=tmp_path / "missing.jsonl"), "missing.jsonl"),
        (dict(steps="8,24"), "no checkpoint of step(s) 24"),
        (dict(steps="", models=not_a_model), f"{not_a_model} is not a Hugging Face model directory"),
        (dict(models="hf_model_avg"), "hf_model_avg is not a Hugging Face model directory"),
    ]
    for options, error in cases:
        assert evaluate(run, results, **options) == 2, options
        assert error in capsys.readouterr().err, options
    assert evaluate(tmp_path, results) == 2  # a directory that is no run
    assert "config.json: not a training run's config" in capsys.readouterr().err
    assert not results.exists() or not list(results.glob("*.json"))
    for argv, error in [
        (["--steps=last"], "--steps='last'"),
        (["--corpora=held"], "'held' is neither validation nor name=path"),
        (["--min_suite_score=2"], "in [0, 1]"),
        (["--steps=", "--models="], "nothing to evaluate"),
    ]:
        with pytest.raises(ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
            parse_args(argv, EvalConfig)


@pytest.fixture(scope="module")
def bundle(run, tmp_path_factory) -> Path:
    results = run / "eval"
    assert evaluate(run, results, steps="latest", corpora="validation") == 0
    target = tmp_path_factory.mktemp("bundle") / "b"
    assert C.bundle(BundleConfig(out_dir=str(run), model="hf_model_ema", bundle_dir=str(target))) == 0
    return target


def test_bundle_loads_as_it_is_and_its_checksums_catch_a_change(bundle, run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    manifest = json.loads((bundle / V.BUNDLE_MANIFEST).read_text())
    assert manifest["model"] == "hf_model_ema" and manifest["step"] == 16
    assert {
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "chat_template.jinja",
        "training_config.json",
        "result.json",
        "eval/summary.json",
        "eval/gate.json",
        "eval/table.md",
    } <= set(manifest["files"])
    assert V.verify_bundle(bundle) is None
    tok = AutoTokenizer.from_pretrained(str(bundle), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(bundle), local_files_only=True)
    ema = AutoModelForCausalLM.from_pretrained(str(run / "hf_model_ema"), local_files_only=True).state_dict()
    assert all((model.state_dict()[k] == v).all() for k, v in ema.items())  # the EMA export, bit for bit
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "user: hi\nassistant:"
    weights = bundle / "model.safetensors"
    original = weights.read_bytes()
    for changed in (original + b" ", original[:-1] + bytes([original[-1] ^ 1])):  # longer; same size, one bit
        weights.write_bytes(changed)
        assert V.verify_bundle(bundle) == "model.safetensors: not the file the manifest lists (size or SHA-256 differ)"
        cli = subprocess.run([sys.executable, V.__file__, "bundle", str(bundle)], capture_output=True, text=True)
        assert cli.returncode == 1 and "model.safetensors: not the file" in cli.stdout  # what serve.yml runs
    weights.write_bytes(original)
    assert V.verify_bundle(bundle) is None
    cli = subprocess.run([sys.executable, V.__file__, "bundle", str(bundle)], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == f"{bundle}: ok\n"
    (bundle / "tokenizer.json").unlink()
    assert V.verify_bundle(bundle) == "tokenizer.json: missing"
    assert C.bundle(BundleConfig(out_dir=str(run), model="hf_model_avg")) == 2  # no such export in this run


def test_transformers_serve_answers_the_openai_client_from_a_bundle(run, tmp_path):
    """The server playbooks/serve.yml starts: the field's own (transformers serve), the client nobody here wrote."""
    from openai import OpenAI

    target = tmp_path / "bundle"
    assert C.bundle(BundleConfig(out_dir=str(run), bundle_dir=str(target))) == 0
    port = free_port()
    env = dict(job_env(), HF_HUB_OFFLINE="1", HF_HUB_DISABLE_UPDATE_CHECK="1")
    serve = Path(sys.executable).parent / "transformers"
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [str(serve), "serve", str(target), "--host=127.0.0.1", f"--port={port}", "--device=cpu"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        deadline = time.monotonic() + 120
        while True:
            try:
                done = client.completions.create(model=str(target), prompt="HAMLET.", max_tokens=8, temperature=0)
                break
            except Exception:  # the server is still starting
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
                time.sleep(0.5)
        assert done.usage.completion_tokens == 8 and isinstance(done.choices[0].text, str)
        assert done.choices[0].text  # decoded text, not empty
        chat = client.chat.completions.create(
            model=str(target), messages=[{"role": "user", "content": "Who is there?"}], max_tokens=6
        )
        assert chat.usage.completion_tokens > 0 and chat.choices[0].message.role == "assistant"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()


def test_a_checkpoint_is_rebuilt_as_the_architecture_it_trained(tmp_path):
    """A run given a config directory (`-e model=<dir>`, the lab's Llama) keeps it to rebuild its checkpoints (eval,
    generate, export, average read them the same way); a directory since removed leaves the preset."""
    from payload.config import TrainConfig
    from payload.model import saved_architecture

    arch = tmp_path / "llama-small"
    arch.mkdir()
    (arch / "config.json").write_text("{}")
    assert saved_architecture(TrainConfig(data="x", init_from=str(arch))).init_from == str(arch)
    assert saved_architecture(TrainConfig(data="x", init_from=str(tmp_path / "gone"))).init_from == ""
    assert saved_architecture(TrainConfig(data="x")).init_from == ""
