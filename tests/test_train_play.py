"""train.yml's controller-side checks, on the controller alone (no lab): a relative `-e data=` is the directory
ansible-playbook was started from, and a missing corpus is refused saying where it looked.

The one node points at a closed loopback port: the checks run on the controller before any node is contacted,
so a run that gets past them fails later, unreachable, instead of on the corpus.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, tail, tool_env

pytestmark = pytest.mark.lint


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    inv = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventory" / "lab" / "group_vars", inv / "group_vars", dirs_exist_ok=True)
    node = {
        "ansible_host": "127.0.0.1",
        "ansible_port": 9,
        "cluster_fabric_interfaces": [{"name": "rdma0", "addresses": ["10.99.0.1/24"], "mtu": 9000}],
    }
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"rdma_nodes": {"hosts": {"n1": node}}}}}))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    cmd = ["ansible-playbook", "-i", str(inv), str(ROOT / "playbooks" / "train.yml"), *extra]
    env = tool_env(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    return subprocess.run(cmd, cwd=work, env=env, text=True, capture_output=True, timeout=300, check=False)


def test_relative_data_is_the_directory_the_user_runs_from(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "corpus.txt").write_text("to be or not to be\n")
    proc = _train(tmp_path, "-e", "data=corpus.txt")
    out = proc.stdout + proc.stderr
    assert "does not exist on the controller" not in out, tail(proc)
    assert "Check the controller-side corpus exists" in out and "UNREACHABLE" in out, tail(proc)


def test_missing_relative_data_says_where_it_looked(tmp_path: Path) -> None:
    proc = _train(tmp_path, "-e", "data=missing.txt")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    looked = tmp_path / "work" / "missing.txt"
    assert f"train_launch_data: missing.txt does not exist on the controller (looked at {looked})" in out, tail(proc)
    assert "UNREACHABLE" not in out, tail(proc)


def test_a_model_directory_the_controller_has_is_staged_a_path_it_lacks_is_the_hosts(tmp_path: Path) -> None:
    """`-e model=<dir>` (a path: init_from): relative to where ansible-playbook runs, like the corpus."""
    (tmp_path / "work" / "llama-cfg").mkdir(parents=True)
    (tmp_path / "work" / "llama-cfg" / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "work" / "corpus.txt").write_text("to be or not to be\n")
    proc = _train(tmp_path, "-v", "-e", "data=corpus.txt", "-e", "model=./llama-cfg")
    out = proc.stdout + proc.stderr
    staged = str(tmp_path / "work" / "llama-cfg")
    assert f"__train_launch_model_src: {staged}\n" in out and "UNREACHABLE" in out, tail(proc)  # the yaml callback
    proc = _train(tmp_path, "-v", "-e", "data=corpus.txt", "-e", "model=/srv/models/on-the-hosts")
    out = proc.stdout + proc.stderr
    assert "__train_launch_model_src: ''\n" in out and "UNREACHABLE" in out, tail(proc)


def test_a_payload_config_refusal_leads_with_the_payloads_own_words(tmp_path: Path) -> None:
    """payload/config.py refuses a payload key before anything is staged: the failure says what the payload said,
    not the command module's "non-zero return code"."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "corpus.txt").write_text("to be or not to be\n")
    proc = _train(tmp_path, "-e", "data=corpus.txt", "-e", '{"train_launch_payload": {"lr": "x"}}')
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    said = "train_launch_payload: lr='x': expected a number (payload/config.py refused the payload config, exit code 2)"
    assert f"Task failed: Action failed: {said}" in out, tail(proc)
    assert "non-zero return code" not in out and "UNREACHABLE" not in out, tail(proc)
