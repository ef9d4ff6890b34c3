"""The lookup metrics_zipapp (plugins/lookup/metrics_zipapp.py) in a play on this controller: it builds
rdma-llm-metrics (module_utils/monitoring/cli.py through node/build.py) and ansible.builtin.copy installs it as the
role monitoring does: changed the first time, not the second; the file is the build's bytes and runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import cli
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import build

from tests.conftest import tail
from tests.unit.plugins.lookup.test_node_check_zipapp import _results, _run

INSTALL = """    - name: Install rdma-llm-metrics
      ansible.builtin.copy:
        src: "{{ lookup('rdma_llm.cluster.metrics_zipapp') }}"
        dest: "%(dest)s"
        mode: "0755"
"""


def test_the_lookup_builds_the_collector_and_a_second_copy_changes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "sbin" / "rdma-llm-metrics"
    tasks = INSTALL % {"dest": dest} + INSTALL % {"dest": dest}
    tasks += """    - name: Terms are refused
      ansible.builtin.debug:
        msg: "{{ lookup('rdma_llm.cluster.metrics_zipapp', 'metrics') }}"
      ignore_errors: true
"""
    (tmp_path / "sbin").mkdir()
    proc = _run(tmp_path, tasks)
    assert proc.returncode == 0, tail(proc)
    first, second, terms = _results(proc)
    assert first["changed"] is True and second["changed"] is False, (first, second)
    assert dest.read_bytes() == build.archive(build.files(entry=cli.ENTRY, name=cli.NAME))
    assert terms.get("failed") and "takes no terms" in terms["msg"], terms
    usage = subprocess.run([sys.executable, "-I", "-S", dest, "--help"], capture_output=True, text=True, check=False)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: rdma-llm-metrics"), usage
