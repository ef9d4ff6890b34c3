"""Action: ansible.builtin.apt (state present) for the packages that `dpkg-query` does not show installed.

One task where a probe task and a conditional apt task were two: on a run with nothing to install, the node
answers one `dpkg-query` and apt is never loaded. With cache_valid_time 0 (refresh the cache on every run),
apt always runs. The probe runs in check mode too (it reads only); apt then reports what it would do.
Recommends are not installed unless asked (install_recommends; plugins/modules/apt_missing.py says why).
The rules live in module_utils/host/apt.py (plain Python, tested by pytest).

With `reset_concern`, what apt installed (the packages dpkg shows installed after it and not before, dependencies
included, and the groups their installs created) is recorded for playbooks/reset.yml by the module
rdma_llm.cluster.reset_record under that concern: reset removes only those, and only on request
(`-e reset_packages=true`).
"""

from __future__ import annotations

import shlex

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import apt as rules


class ActionModule(ActionBase):
    """Arguments: name (a package or a list), update_cache (default true), cache_valid_time (s, default 3600),
    install_recommends (default false), reset_concern (record what apt installed under this concern for reset)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("name", "update_cache", "cache_valid_time", "install_recommends", "reset_concern"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        names = self._task.args.get("name")
        names = [names] if isinstance(names, str) else list(names or [])
        if not names or not all(isinstance(n, str) and n for n in names):
            raise AnsibleActionFail(f"apt_missing: name must be a package name or a list of them, got {names!r}")
        update_cache = boolean(self._task.args.get("update_cache", True), strict=True)
        install_recommends = boolean(self._task.args.get("install_recommends", False), strict=True)
        try:
            cache_valid_time = int(self._task.args.get("cache_valid_time", 3600))
        except (TypeError, ValueError) as e:
            raise AnsibleActionFail(f"apt_missing: cache_valid_time must be a number of seconds: {e}") from e

        probe = self._low_level_execute_command(shlex.join(rules.probe_argv(names)))
        try:
            todo = rules.missing(names, probe["rc"], probe.get("stdout", ""))
        except ValueError as e:
            raise AnsibleActionFail(f"apt_missing: {e}: {probe.get('stderr', '').strip()}") from e

        if not todo and not (update_cache and cache_valid_time == 0):
            result.update(changed=False, missing=[], msg=f"installed: {', '.join(names)}")
            return result
        concern = self._task.args.get("reset_concern")
        before = self._dpkg_all() if concern and not self._task.check_mode else None
        groups_before = self._read(rules.GROUP_FILE_ARGV) if before is not None else ""
        users_before = self._read(rules.PASSWD_FILE_ARGV) if before is not None else ""
        result.update(
            self._execute_module(
                module_name="ansible.builtin.apt",
                module_args={
                    "name": names,
                    "state": "present",
                    "update_cache": update_cache,
                    "cache_valid_time": cache_valid_time,
                    "install_recommends": install_recommends,
                },
                task_vars=task_vars,
            )
        )
        result["missing"] = todo
        if before is not None and result.get("changed") and not result.get("failed"):
            new = rules.newly_installed(before, self._dpkg_all())
            groups = rules.new_names(groups_before, self._read(rules.GROUP_FILE_ARGV))
            users = rules.new_names(users_before, self._read(rules.PASSWD_FILE_ARGV))
            if new:
                recorded = self._execute_module(
                    module_name="rdma_llm.cluster.reset_record",
                    module_args={"concern": concern, "packages": new, "package_groups": groups, "package_users": users},
                    task_vars=task_vars,
                )
                if recorded.get("failed"):
                    raise AnsibleActionFail(f"apt_missing: recording the installed packages: {recorded.get('msg')}")
            result["installed"] = new
        return result

    def _dpkg_all(self) -> str:
        return self._read(rules.ALL_ARGV)

    def _read(self, argv: list[str]) -> str:
        probe = self._low_level_execute_command(shlex.join(argv))
        if probe["rc"] != 0:
            raise AnsibleActionFail(f"apt_missing: {argv[0]} failed: {probe.get('stderr', '').strip()}")
        return probe.get("stdout", "")
