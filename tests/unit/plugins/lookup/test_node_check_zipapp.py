"""The lookup node_check_zipapp (plugins/lookup/node_check_zipapp.py) in a play on this controller: it builds
rdma-node-check (module_utils/node/build.py) and ansible.builtin.copy installs it as the role node_health does (`src`
of the lookup, mode 0755): changed the first time, not the second; the file is the build's bytes and runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import build

from tests.conftest import playbook, tail

INSTALL = """    - name: Install rdma-node-check
      ansible.builtin.copy:
        src: "{{ lookup('rdma_llm.cluster.node_check_zipapp') }}"
        dest: "%(dest)s"
        mode: "0755"
"""


def _run(tmp_path: Path, tasks: str) -> subprocess.CompletedProcess:
    head = "- name: node_check_zipapp\n  hosts: here\n  gather_facts: false\n  tasks:\n"
    (tmp_path / "play.yml").write_text(head + tasks)
    here = f"here:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    " + here)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    return playbook(
        str(tmp_path / "play.yml"),
        inventory=tmp_path / "hosts.yml",
        timeout=300,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
    )


def _results(proc: subprocess.CompletedProcess) -> list[dict]:
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    return [t["hosts"]["here"] for t in out["plays"][0]["tasks"]]


def test_the_lookup_builds_the_command_and_a_second_copy_changes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "sbin" / "rdma-node-check"
    built = tmp_path / "built"
    tasks = INSTALL % {"dest": dest} + INSTALL % {"dest": dest}
    tasks += f"""    - name: Build into a directory of the caller's
      ansible.builtin.debug:
        msg: "{{{{ lookup('rdma_llm.cluster.node_check_zipapp', dir='{built}') }}}}"
    - name: Terms are refused
      ansible.builtin.debug:
        msg: "{{{{ lookup('rdma_llm.cluster.node_check_zipapp', 'node_check') }}}}"
      ignore_errors: true
"""
    (tmp_path / "sbin").mkdir()
    proc = _run(tmp_path, tasks)
    assert proc.returncode == 0, tail(proc)
    first, second, where, terms = _results(proc)
    assert first["changed"] is True and second["changed"] is False, (first, second)
    data = build.archive(build.files())
    assert dest.read_bytes() == data and dest.stat().st_mode & 0o777 == 0o755
    assert Path(where["msg"]).parent == built and Path(where["msg"]).read_bytes() == data
    assert terms.get("failed") and "takes no terms" in terms["msg"], terms
    usage = subprocess.run([sys.executable, "-I", "-S", dest, "--help"], capture_output=True, text=True, check=False)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: rdma-node-check"), usage
