"""Every way a run ends tears its distributed state down before the interpreter shuts down.

A run that failed in setup used to leave both of its gloo process groups, their worker and transport threads
and the TCPStore server's thread running into interpreter shutdown; a C++ thread still running there can abort
the process (SIGABRT, exit -6) after its own error line, instead of exit 2. These tests run `train()` in this
process as a group of one and look at what is left afterwards."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
import torch.distributed as dist
from payload_helpers import base_args, free_port

from payload import train as T
from payload.config import parse_args

pytestmark = pytest.mark.payload

# Names torch gives the threads of a gloo process group (workers, transport loop) and of the TCPStore server.
DIST_THREADS = ("pt_gloo", "gloo_", "pt_tcpstore")


def _dist_threads() -> Counter:
    names = Counter()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # the thread ended while we looked
            name = (task / "comm").read_text().strip()
            names[name] += name.startswith(DIST_THREADS)
    return +names


@pytest.fixture
def group_of_one(monkeypatch):
    """The torchrun variables of a one-rank job, restored afterwards, and the state to compare against."""
    for key, value in dict(
        RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo"
    ).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert not dist.is_initialized()
    before = {
        "threads": set(threading.enumerate()),
        "dist_threads": _dist_threads(),
        "handlers": {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)},
    }
    yield before
    if dist.is_initialized():  # a failed test must not leave its group to the next one
        dist.destroy_process_group()


# torch's DDP (2.13) keeps a C++ reference to the default group that outlives the DDP module, so once a run
# has built its engine, that one group's threads (and the store's) stay until exit whatever the payload does;
# the payload's own groups (setup, stop) must still be gone.
DDP_KEEPS = Counter(pt_gloo_runloop=2, gloo_tcp_loop=1, pt_tcpstore_uv=1)


def _assert_torn_down(before: dict, allowed: Counter | None = None) -> None:
    assert not dist.is_initialized()
    left = _dist_threads() - before["dist_threads"]
    assert left - (allowed or Counter()) == Counter(), left
    # the TensorBoard writer's thread is a Python thread of its own
    assert set(threading.enumerate()) <= before["threads"], threading.enumerate()
    assert {sig: signal.getsignal(sig) for sig in before["handlers"]} == before["handlers"]


def _cfg(tmp_path, data, tokenizer_dir, token_cache, **overrides):
    return parse_args(base_args(tmp_path / "run", data, tokenizer_dir, token_cache, tensorboard="true", **overrides))


def _result(tmp_path) -> dict:
    return json.loads((tmp_path / "run" / "result.json").read_text())


def test_bad_input_during_setup_exits_2_and_tears_down(group_of_one, tmp_path, tokenizer_dir, capsys):
    """The Trainer fails in __init__, so train() never gets an object to close: setup must close itself."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "empty.txt").write_text("")
    cfg = _cfg(tmp_path, tmp_path / "corpus", tokenizer_dir, tmp_path / "cache")
    assert T.train(cfg) == 2
    assert "use more data" in capsys.readouterr().err
    assert _result(tmp_path)["exit_code"] == 2
    _assert_torn_down(group_of_one)


def test_failure_during_the_run_exits_with_its_code_and_tears_down(
    group_of_one, monkeypatch, tmp_path, corpus, tokenizer_dir, token_cache
):
    def full_disk(self):
        raise T.RunError("saving checkpoint failed: the disk is full", 1)

    monkeypatch.setattr(T.Trainer, "run", full_disk)
    assert T.train(_cfg(tmp_path, corpus, tokenizer_dir, token_cache)) == 1
    assert _result(tmp_path)["exit_code"] == 1
    _assert_torn_down(group_of_one, DDP_KEEPS)


@pytest.mark.parametrize(("where", "allowed"), [("_setup_model", None), ("run", DDP_KEEPS)])
def test_unexpected_error_is_raised_after_teardown(
    where, allowed, group_of_one, monkeypatch, tmp_path, corpus, tokenizer_dir, token_cache
):
    """An error nobody handles propagates to the top, whose traceback keeps the (half-built) Trainer alive
    into interpreter shutdown: its groups must be gone all the same. `excinfo` holds that traceback here."""

    def bug(self):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(T.Trainer, where, bug)
    with pytest.raises(ZeroDivisionError) as excinfo:
        T.train(_cfg(tmp_path, corpus, tokenizer_dir, token_cache))
    assert _result(tmp_path)["error"] == "ZeroDivisionError: a bug"
    _assert_torn_down(group_of_one, allowed)
    assert excinfo.value


def test_completed_run_tears_down(group_of_one, tmp_path, corpus, tokenizer_dir, token_cache):
    cfg = _cfg(tmp_path, corpus, tokenizer_dir, token_cache, max_steps=2, warmup_steps=1, eval_batches=1)
    assert T.train(cfg) == 0
    assert _result(tmp_path)["status"] == "completed"
    _assert_torn_down(group_of_one, DDP_KEEPS)
