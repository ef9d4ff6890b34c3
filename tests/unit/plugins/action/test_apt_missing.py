"""apt_missing (plugins/action/apt_missing.py): apt only for what dpkg-query does not show installed.

The rules as tables (plugins/module_utils/host/apt.py, no Ansible in this process), then the action
itself on this controller's own dpkg database: a play on localhost, nothing installed (apt runs in check mode).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import apt as R

from tests.conftest import playbook, tail

DPKG = "rdma-core installed\nperftest installed\niperf3 not-installed\nlibc6:amd64 installed\nopensm config-files\n"


@pytest.mark.parametrize(
    ("names", "rc", "stdout", "want"),
    [
        (["rdma-core", "perftest"], 0, DPKG, []),
        # removed (not purged) and never installed (dpkg-query rc 1, the name absent from its output)
        (["rdma-core", "iperf3", "opensm", "nosuch"], 1, DPKG, ["iperf3", "opensm", "nosuch"]),
        # dpkg-query prints a multiarch package without its architecture
        (["libc6", "libc6"], 0, DPKG, []),
        # a version or release pin goes to apt, which alone can compare it with what is installed
        (
            ["perftest=4.5-1", "rdma-core", "iperf3/bookworm-backports"],
            0,
            DPKG,
            ["perftest=4.5-1", "iperf3/bookworm-backports"],
        ),
        (["rdma-core"], 0, "", ["rdma-core"]),
    ],
)
def test_missing_names_what_apt_must_see(names: list[str], rc: int, stdout: str, want: list[str]) -> None:
    assert R.missing(names, rc, stdout) == want


def test_probe_asks_dpkg_for_bare_names_once() -> None:
    argv = R.probe_argv(["perftest=4.5-1", "rdma-core", "perftest", "iperf3/bookworm-backports"])
    assert argv[:2] == ["dpkg-query", "--show"] and argv[3:] == ["perftest", "rdma-core", "iperf3"]


def test_missing_refuses_a_dpkg_error() -> None:
    with pytest.raises(ValueError, match="exited 2"):
        R.missing(["rdma-core"], 2, "")


def test_newly_installed_is_what_apt_added_dependencies_included() -> None:
    """What the action records for reset: installed after apt and not before (a package that was only removed, not
    purged, counts as new; one upgraded in place does not)."""
    before = "rdma-core installed\nopensm config-files\nlibc6:amd64 installed\n"
    after = "rdma-core installed\nopensm installed\nlibopensm9:amd64 installed\nlibc6:amd64 installed\n"
    assert R.newly_installed(before, after) == ["libopensm9", "opensm"]
    assert R.ALL_ARGV[:2] == ["dpkg-query", "--show"] and len(R.ALL_ARGV) == 3
    # The groups a maintainer script added (libibverbs1's postinst: `addgroup --system rdma`), for reset to remove.
    groups = "root:x:0:\nmunge:x:101:\n"
    assert R.new_names(groups, groups + "rdma:x:102:\n_ssh:x:103:\n") == ["_ssh", "rdma"]
    assert R.new_names(groups, groups) == []
    # The same reading of /etc/passwd gives the users one added (mariadb-server's `mysql`; its purge keeps it).
    users = "root:x:0:0:root:/root:/bin/bash\n"
    assert R.new_names(users, users + "mysql:x:102:107:MySQL Server,,,:/nonexistent:/bin/false\n") == ["mysql"]
    assert R.PASSWD_FILE_ARGV == ["cat", "/etc/passwd"]


def _run(tmp_path: Path, tasks: str, *args: str):
    (tmp_path / "play.yml").write_text("- name: apt_missing\n  hosts: here\n  gather_facts: false\n  tasks:\n" + tasks)
    here = f"here:\n      ansible_connection: local\n      ansible_python_interpreter: {sys.executable}\n"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    " + here)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    return playbook(
        str(tmp_path / "play.yml"),
        *args,
        inventory=tmp_path / "hosts.yml",
        timeout=300,
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        # the project's callbacks (profile_tasks, timer) print beside the JSON: an empty configuration instead
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
    )


def _results(proc: subprocess.CompletedProcess) -> list[dict]:
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    return [t["hosts"]["here"] for t in out["plays"][0]["tasks"]]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="skip: no dpkg on this controller")
def test_apt_missing_on_this_controller(tmp_path: Path) -> None:
    """Installed packages: one dpkg-query, no apt run, nothing changed. A package that is not installed: apt
    runs (check mode: it says it would install it); a dpkg error fails with dpkg's message."""
    absent = next(
        (
            p
            for p in ("sl", "cowsay", "fortune-mod")
            if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode
        ),
        None,
    )
    tasks = (
        "    - name: Present\n      rdma_llm.cluster.apt_missing:\n"
        "        {name: [dpkg, coreutils], cache_valid_time: 0, update_cache: false}\n"
        f"    - name: Absent\n      rdma_llm.cluster.apt_missing: {{name: [dpkg, {absent}], update_cache: false}}\n"
        "      ignore_errors: true\n"
        "    - name: Bad time\n      rdma_llm.cluster.apt_missing: {name: dpkg, cache_valid_time: soon}\n"
        "      ignore_errors: true\n"
    )
    proc = _run(tmp_path, tasks, "--check")
    assert proc.returncode == 0, tail(proc)
    present, missing, bad = _results(proc)
    assert present["changed"] is False and present["missing"] == [], present
    assert "cache_updated" not in present, f"apt ran although nothing was missing: {present}"
    assert missing["missing"] == [absent], missing
    # apt ran for it: it would install the package, or says why it cannot here (no apt lists, no python3-apt).
    assert missing.get("changed") is True or re.search(
        "No package matching|must be installed to use check mode", missing.get("msg", "")
    ), missing
    assert bad.get("failed") and "cache_valid_time must be a number" in bad["msg"], bad


def _action(args: dict, missing: str = ""):
    """The action with its task arguments and a node where `missing` is the one package not installed: the apt
    module is not run, its arguments are kept."""
    from unittest import mock

    from ansible_collections.rdma_llm.cluster.plugins.action.apt_missing import ActionModule

    task = mock.MagicMock(args=args, check_mode=True, async_val=0)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), None, None, None)
    dpkg = "".join(f"{n} {'not-installed' if n == missing else 'installed'}\n" for n in args["name"])
    action._low_level_execute_command = lambda cmd, **kw: {"rc": 1 if missing else 0, "stdout": dpkg}
    calls = []
    action._execute_module = lambda module_name, module_args, **kw: (
        calls.append((module_name, module_args)) or {"changed": True}
    )
    return action, calls


def test_apt_gets_no_recommends_unless_asked() -> None:
    """A role names every package it uses: apt is asked without Recommends, unless install_recommends says so."""
    action, calls = _action({"name": ["rdma-core", "ethtool"]}, missing="ethtool")
    result = action.run(task_vars={})
    assert result["missing"] == ["ethtool"], result
    ((module, args),) = calls
    assert module == "ansible.builtin.apt" and args["install_recommends"] is False, args
    action, calls = _action({"name": ["ethtool"], "install_recommends": "yes"}, missing="ethtool")
    action.run(task_vars={})
    assert calls[0][1]["install_recommends"] is True
    action, calls = _action({"name": ["ethtool"], "install_recommends": "maybe"}, missing="ethtool")
    with pytest.raises(Exception, match="maybe"):
        action.run(task_vars={})
    assert calls == []
