"""payload/config.py's public API: resolve() and its stdlib-only command line, which the launch role runs on
the controller to learn the config a run will really use (defaults applied) before anything is staged."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from payload_helpers import REPO

from payload.config import ConfigError, TrainConfig, parse_args, resolve, to_dict

pytestmark = pytest.mark.payload

CONFIG = REPO / "payload" / "config.py"


def test_resolve_returns_every_key_with_the_defaults_applied():
    got = resolve({"data": "corpus", "model": "mini"})
    assert list(got) == [f.name for f in dataclasses.fields(TrainConfig)]
    assert got == to_dict(TrainConfig(data="corpus", model="mini"))
    assert got["max_steps"] == TrainConfig.max_steps and got["engine"] == "ddp"


def test_resolve_coerces_values_to_the_payload_types():
    got = resolve(
        {"data": "x", "max_steps": "2000", "warmup_steps": "1_000", "lr": "1e-3", "pg_timeout": 60},
        "train_launch_payload",
    )
    # a detached run started with max_steps=2000 must report 2000, as an int, not the default 200
    assert got["max_steps"] == 2000 and type(got["max_steps"]) is int
    assert got["warmup_steps"] == 1000 and got["lr"] == 1e-3
    assert type(got["pg_timeout"]) is float
    got = resolve({"data": "x", "compile": True, "resume": "no", "tensorboard": "on"})
    assert (got["compile"], got["resume"], got["tensorboard"]) == ("true", False, True)


def test_resolve_agrees_with_the_command_line():
    values = {"data": "x", "max_steps": "50", "lr": "2e-4", "compile": "false", "engine": "fsdp"}
    assert resolve(values) == to_dict(parse_args([f"--{k}={v}" for k, v in values.items()]))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"data": "x", "batchsize": 4}, "src: unknown key 'batchsize' (did you mean 'batch_size'?)"),
        ({"data": "x", "frobnicate": 1}, "src: unknown key 'frobnicate'"),
        ({"data": "x", "max_steps": "ten"}, "src: max_steps='ten': expected an integer"),
        ({"data": "x", "batch_size": 8.5}, "src: batch_size=8.5: expected an integer"),
        ({"data": "x", "max_steps": True}, "src: max_steps=True: expected an integer"),
        ({"data": "x", "resume": "maybe"}, "src: resume='maybe': expected true or false"),
        ({"data": "x", "lr": "fast"}, "src: lr='fast': expected a number"),
        ({"data": "x", "lr": "inf"}, "src: lr='inf': expected a finite number"),
        ({"data": "x", "min_lr": float("nan")}, "src: min_lr=nan: expected a finite number"),
        ({"data": 5}, "src: data=5: expected a string"),
        ({"data": "x", "engine": "megatron"}, "--engine='megatron': must be one of ddp, deepspeed, fsdp"),
        ({"data": "x", "max_steps": 10}, "--warmup_steps=20: must be <= max_steps"),
        ({}, "--data='': is required"),
        (["data", "x"], "src: expected a mapping of key: value, got list"),
    ],
)
def test_resolve_errors_name_the_key(values, message):
    with pytest.raises(ConfigError) as e:
        resolve(values, "src")
    assert message in str(e.value)


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """config.py as the controller runs it: by absolute path, from another directory, and with -S (no
    site-packages), which proves it needs the standard library only."""
    return subprocess.run(
        [sys.executable, "-S", str(CONFIG), *args],
        input=stdin,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_prints_the_resolved_config_as_one_json_object():
    values = {"data": "corpus", "max_steps": "2000", "engine": "deepspeed", "zero_stage": 2}
    proc = _cli("resolve", stdin=json.dumps(values))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and len(proc.stdout.splitlines()) == 1
    assert json.loads(proc.stdout) == resolve(values)
    assert json.loads(proc.stdout)["max_steps"] == 2000
    evaluated = _cli("resolve", "--command=eval", stdin='{"steps": "all", "min_suite_score": "0.5"}')
    assert json.loads(evaluated.stdout) | {"out_dir": None} == {
        "out_dir": None, "steps": "all", "models": "", "corpora": "validation", "suite": "default",
        "max_new_tokens": 24, "eval_batches": 0, "min_suite_score": 0.5, "results_dir": "",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ["resolve", "--source=train_launch_payload"],
            '{"data": "x", "batchsize": 4}',
            "error: train_launch_payload: unknown key 'batchsize' (did you mean 'batch_size'?)",
        ),
        (["resolve"], '{"data": "x", "max_steps": "ten"}', "error: config: max_steps='ten': expected an integer"),
        (["resolve"], '{"data": "x", "model": "gpt5"}', "error: --model='gpt5': must be one of tiny"),
        (["resolve"], '{"data": "x",', "error: config: stdin is not valid JSON: "),
        (["resolve"], "", "error: config: stdin is not valid JSON: "),
        (["resolve"], '["data"]', "error: config: expected a mapping of key: value, got list"),
        ([], "{}", "error: expected the command resolve"),
        (["resolve", "--sauce=x"], "{}", "error: unexpected argument '--sauce=x'"),
        (["resolve", "--command=eval"], '{"steps": "last"}', "error: --steps='last': latest, all, or comma-separated"),
        (["resolve", "--command=eval", "--source=e"], '{"step": "all"}', "error: e: unknown key 'step' (did you mean"),
        (["resolve", "--command=export"], "{}", "error: unexpected argument '--command=export'"),
    ],
)
def test_cli_errors_exit_2_with_one_message_and_no_output(args, stdin, message):
    proc = _cli(*args, stdin=stdin)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[0].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_help():
    proc = _cli("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python config.py resolve")


def test_versions_is_one_stdlib_probe_for_the_payload_and_the_launch():
    """payload/versions.py runs without site-packages (-S: no torch) and prints every package the run depends on;
    the payload's result.json takes the same function."""
    import payload.train as train
    from payload import versions

    proc = subprocess.run(
        [sys.executable, "-S", str(REPO / "payload" / "versions.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    got = json.loads(proc.stdout)
    assert list(got) == ["python", *versions.PACKAGES] and got["torch"] is None  # -S hides site-packages
    assert train.versions is versions.versions
    assert versions.versions()["torch"] and versions.versions()["torch"].startswith("2.")
