"""Strategy rdma_llm.cluster.host_linear (plugins/strategy/host_linear.py): the node plays' linear strategy runs
through Mitogen when the package is installed, and is plain linear when it is turned off. A two-task play on the
controller (local connection) shows which path ran: under Mitogen both module runs happen in one persistent Python
on the node (the same parent PID for their shells), under plain linear each task starts its own.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import COLLECTION, playbook, tail

pytestmark = pytest.mark.lint

PLAY = """\
- name: Two module runs, each reporting the Python that ran it
  hosts: here
  gather_facts: false
  strategy: rdma_llm.cluster.host_linear
  tasks:
    - name: First module run
      ansible.builtin.shell: echo "python-pid $PPID"
      changed_when: false
    - name: Second module run
      ansible.builtin.shell: echo "python-pid $PPID"
      changed_when: false
"""


def run_play(tmp_path: Path, **env: str):
    (tmp_path / "play.yml").write_text(PLAY)
    here = f"here:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    " + here)
    return playbook(
        str(tmp_path / "play.yml"),
        "-vv",
        inventory=tmp_path / "hosts.yml",
        timeout=300,
        **env,
    )


@pytest.mark.parametrize("switch", ["1", "0"])
def test_host_linear_runs_through_mitogen_unless_turned_off(tmp_path: Path, switch: str) -> None:
    proc = run_play(tmp_path, RDMA_LLM_CLUSTER_MITOGEN=switch)
    assert proc.returncode == 0, tail(proc)
    assert re.search(r"^here\s+: ok=2\s+changed=0\s+unreachable=0\s+failed=0", proc.stdout, re.M), tail(proc)
    pids = re.findall(r"python-pid (\d+)", proc.stdout)
    assert len(set(pids)) in (1, 2) and len(pids) >= 2, tail(proc)
    if switch == "1":
        assert len(set(pids)) == 1, "two module runs, two Pythons: Mitogen did not run them\n" + tail(proc)
        assert "Mitogen not available" not in proc.stdout, tail(proc)
    else:
        assert len(set(pids)) == 2, tail(proc)
        assert "Mitogen turned off by RDMA_LLM_CLUSTER_MITOGEN" in proc.stdout, tail(proc)


# A filter plugin that records each process that imports it; beside the play (legacy) and in a collection.
PROBE = """\
import os, pathlib
with open(pathlib.Path(os.environ["PROBE_LOG"]), "a") as log:
    log.write(f"{{NAME}} {os.getpid()}\\n")
class FilterModule:
    def filters(self):
        return {"{{NAME}}": lambda value: value}
"""


def run_two_hosts(tmp_path: Path, play: str, group_vars: str = "", **env: str):
    """A play on two controller-local hosts, a and b, with the strategy plugins; PROBE_LOG is its probe log."""
    (tmp_path / "play.yml").write_text(play)
    local = f"ansible_connection: local, ansible_python_interpreter: {sys.executable}"
    (tmp_path / "hosts.yml").write_text(f"all:\n{group_vars}  hosts:\n    a: {{{local}}}\n    b: {{{local}}}\n")
    log = tmp_path / "probe.log"
    proc = playbook(
        str(tmp_path / "play.yml"),
        inventory=tmp_path / "hosts.yml",
        timeout=300,
        PROBE_LOG=str(log),
        **env,
    )
    return proc, log


PLUGIN_PLAY = """\
- name: Two hosts, two tasks, each templating a legacy and a collection filter
  hosts: all
  gather_facts: false
  strategy: {strategy}
  tasks:
    - name: First
      ansible.builtin.debug:
        msg: "{{{{ 1 | probe_legacy }}}} {{{{ 2 | probe.coll.probe_coll }}}}"
    - name: Second
      ansible.builtin.debug:
        msg: "{{{{ 3 | probe_legacy }}}} {{{{ 4 | probe.coll.probe_coll }}}}"
"""


@pytest.mark.parametrize("strategy", ["rdma_llm.cluster.host_linear", "linear"])
def test_host_linear_loads_jinja_plugins_once_before_the_workers_fork(tmp_path: Path, strategy: str) -> None:
    (tmp_path / "filter_plugins").mkdir()
    (tmp_path / "filter_plugins" / "probe_legacy.py").write_text(PROBE.replace("{{NAME}}", "probe_legacy"))
    coll = tmp_path / "collections" / "ansible_collections" / "probe" / "coll"
    (coll / "plugins" / "filter").mkdir(parents=True)
    (coll / "galaxy.yml").write_text("namespace: probe\nname: coll\nversion: 1.0.0\n")
    (coll / "plugins" / "filter" / "probe_coll.py").write_text(PROBE.replace("{{NAME}}", "probe_coll"))
    proc, log = run_two_hosts(
        tmp_path,
        PLUGIN_PLAY.format(strategy=strategy),
        ANSIBLE_COLLECTIONS_PATH=f"{tmp_path / 'collections'}:{COLLECTION}",
    )
    assert proc.returncode == 0, tail(proc)
    assert re.search(r"^a\s+: ok=2\s+changed=0", proc.stdout, re.M), tail(proc)
    imports: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        name, pid = line.split()
        imports.setdefault(name, set()).add(pid)
    assert set(imports) == {"probe_legacy", "probe_coll"}, log.read_text()
    if strategy == "rdma_llm.cluster.host_linear":
        # Once, in the controller process: the four task runs' workers inherit both.
        assert all(len(pids) == 1 for pids in imports.values()), log.read_text()
        assert imports["probe_legacy"] == imports["probe_coll"], log.read_text()
    else:
        # Stock ansible-core: each worker imports them again.
        assert all(len(pids) >= 2 for pids in imports.values()), log.read_text()


# Each worker reports the CPUs it and the controller process (its parent) may run on.
AFFINITY_PLAY = """\
- name: Report the CPUs of the worker and of the controller
  hosts: all
  gather_facts: false
  strategy: rdma_llm.cluster.host_linear
  tasks:
    - name: CPUs
      ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.pipe', cmd) }}"
      vars:
        cmd: >-
          w=$PPID; c=$(awk '/^PPid/ {print $2}' /proc/$w/status);
          echo "cpus worker $(awk '/^Cpus_allowed_list/ {print $2}' /proc/$w/status)
          controller $(awk '/^Cpus_allowed_list/ {print $2}' /proc/$c/status)"
"""


def cpu_list(text: str) -> set[int]:
    """/proc's Cpus_allowed_list (`0-3,6`) as a set."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


@pytest.mark.parametrize("setting", ["", "1", "0"])
def test_host_linear_leaves_mitogen_cpu_pinning_off_below_four_cpus(tmp_path: Path, setting: str) -> None:
    """Mitogen pins the controller and its workers to the CPUs it keeps free of its multiplexer: on a 2-CPU
    controller that is one core for all of them. Default: pinning only from 4 CPUs up; 1 forces it, 0 stops it."""
    proc, _ = run_two_hosts(tmp_path, AFFINITY_PLAY, RDMA_LLM_CLUSTER_MITOGEN_PINNING=setting)
    assert proc.returncode == 0, tail(proc)
    reports = re.findall(r"cpus worker (\S+) controller (\S+)", proc.stdout)
    assert len(reports) == 2, tail(proc)
    cpus = os.cpu_count() or 1
    pinned = setting == "1" or (setting == "" and cpus >= 4)
    for worker, controller in reports:
        if pinned and cpus >= 2:
            assert len(cpu_list(worker)) == 1, tail(proc)
            assert len(cpu_list(controller)) == 1, tail(proc)
        else:
            assert cpu_list(worker) == cpu_list(controller) == os.sched_getaffinity(0), tail(proc)


# Records, in every process, each Jinja compile whose generated code reads a `probe_` variable.
COMPILE_PROBE = """\
import os
import jinja2.environment

_compile = jinja2.environment.Environment._compile


def _recording_compile(self, source, filename):
    if "probe_" in source:
        with open(os.environ["PROBE_LOG"], "a") as log:
            log.write(f"{os.getpid()}\\n")
    return _compile(self, source, filename)


jinja2.environment.Environment._compile = _recording_compile
"""

COMPILE_PLAY = """\
- name: Two hosts, three tasks (arguments, a loop, a conditional and an assert) to compile
  hosts: all
  gather_facts: false
  strategy: rdma_llm.cluster.host_linear
  vars:
    probe_word: "{{ probe_base }}-word"
  tasks:
    - name: Arguments and a conditional
      ansible.builtin.debug:
        msg: "{{ probe_word | upper }} on {{ inventory_hostname }}"
      when: probe_word is search('word')
    - name: A loop
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: "{{ [probe_word, probe_base] }}"
    - name: An assert
      ansible.builtin.assert:
        that:
          - probe_word | length > 4
          - probe_base != probe_word
        quiet: true
"""


@pytest.mark.parametrize("cache", ["1", "0"])
def test_host_linear_compiles_each_template_once_before_the_workers_fork(tmp_path: Path, cache: str) -> None:
    """With the cache, each probe template (play vars, arguments, loop, conditionals, assert) is compiled once for
    the whole run, whatever the host count; without it, once per host per render."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "sitecustomize.py").write_text(COMPILE_PROBE)
    proc, log = run_two_hosts(
        tmp_path,
        COMPILE_PLAY,
        "  vars:\n    probe_base: abc\n",
        PYTHONPATH=str(tmp_path / "probe"),
        RDMA_LLM_CLUSTER_TEMPLATE_CACHE=cache,
    )
    assert proc.returncode == 0, tail(proc)
    assert re.search(r"^b\s+: ok=3\s+changed=0\s+unreachable=0\s+failed=0", proc.stdout, re.M), tail(proc)
    pids = log.read_text().split()
    if cache == "1":
        # Each of the play's seven probe templates compiled at most once, all in the controller process.
        assert len(set(pids)) == 1 and len(pids) <= 7, log.read_text()
    else:
        # Stock ansible-core: every worker (two hosts x three tasks) compiles what it renders again.
        assert len(set(pids)) >= 6 and len(pids) >= 14, log.read_text()
