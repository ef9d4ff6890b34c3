"""Module rdma_llm.cluster.train_hang_dump on this machine: a play on localhost dumps a real Python process that the
test started (found by its `start` record, as a rank's), running and then stopped, with the venv's py-spy."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang

from tests.conftest import playbook, tail

SPY = Path(sys.executable).parent / "py-spy"


def dump(tmp_path: Path, run_dir: Path, flight_wait: float = 0) -> dict:
    (tmp_path / "play.yml").write_text(
        "- name: dump\n  hosts: here\n  gather_facts: false\n  tasks:\n"
        "    - name: Dump the ranks\n      rdma_llm.cluster.train_hang_dump:\n"
        f"        run_dir: {run_dir}\n        launch_id: L1\n        spy: {SPY}\n"
        f"        flight_wait: {flight_wait}\n      register: got\n"
        "    - name: Show\n      ansible.builtin.debug:\n        var: got\n"
    )
    here = f"here:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    " + here)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    proc = playbook(
        str(tmp_path / "play.yml"), inventory=tmp_path / "hosts.yml", timeout=300,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
    )  # fmt: skip
    assert proc.returncode == 0, tail(proc)
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    return out["plays"][0]["tasks"][0]["hosts"]["here"]


@pytest.mark.skipif(not SPY.exists(), reason="skip: no py-spy in this venv (pip install -r payload/requirements.txt)")
def test_dump_of_a_running_then_a_stopped_rank(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "out").mkdir(parents=True)
    rank = subprocess.Popen([sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.1)\n"])
    try:
        start = {"kind": "start", "rank": 3, "pid": rank.pid, "hostname": socket.gethostname(), "time": time.time()}
        (run_dir / "out" / "metrics.jsonl").write_text(json.dumps(start) + "\n")
        time.sleep(1)
        got = dump(tmp_path, run_dir)
        (rec,) = got["records"]
        if rec["error"] and ("Permission denied" in rec["error"] or "not permitted" in rec["error"]):
            pytest.skip(f"skip: this machine does not let py-spy read another process ({rec['error']})")
        assert rec["rank"] == 3 and rec["pid"] == rank.pid and rec["state"] in "SR" and rec["native"], rec
        assert hang.classify(rec)["frame"].startswith(("sleep", "<module>")), json.dumps(hang.classify(rec))
        saved = json.loads((run_dir / "logs" / "hang-L1.json").read_text())
        assert saved["host"] == socket.gethostname() and saved["records"][0]["pid"] == rank.pid
        os.kill(rank.pid, signal.SIGSTOP)
        time.sleep(0.5)
        (rec,) = dump(tmp_path, run_dir)["records"]
        assert rec["state"] == "T" and not rec["native"] and rec["threads"] and rec["error"] is None, rec
        assert hang.classify(rec, "here")["status"] == "stopped"
    finally:
        rank.kill()
        rank.wait()


# A rank of a one-process gloo group that ran three all-reduces, then idles with the payload's recorder thread.
RANK_WITH_RECORDER = """
import sys, time, torch, torch.distributed as dist
sys.path.insert(0, sys.argv[1])
from payload import flight
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
x = torch.ones(2)
for _ in range(3):
    dist.all_reduce(x)
flight.start(3, sys.argv[3], poll=0.1)
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""


def test_dump_asks_each_rank_for_its_flight_recorder(tmp_path: Path) -> None:
    """The whole chain on this machine: the module's request, payload/flight.py's thread in a real gloo rank, the
    summary in the rank's record."""
    from tests.conftest import ROOT

    run_dir = tmp_path / "run"
    (run_dir / "out").mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "50"}
    argv = [sys.executable, "-c", RANK_WITH_RECORDER, str(ROOT), str(port), str(run_dir / "logs" / ".fr-request")]
    rank = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline().strip() == "ready"
        start = {"kind": "start", "rank": 3, "pid": rank.pid, "hostname": socket.gethostname(), "time": time.time()}
        (run_dir / "out" / "metrics.jsonl").write_text(json.dumps(start) + "\n")
        (rec,) = dump(tmp_path, run_dir, flight_wait=10)["records"]
        done = {"last": 3, "op": "gloo:all_reduce", "pending": None, "pending_op": None}
        assert rec["flight"] == {"default_pg": done}
        assert json.loads((run_dir / "logs" / "fr-rank3.json").read_text())["trace"]["entries"]
    finally:
        rank.kill()
        rank.wait()
