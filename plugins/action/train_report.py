"""Action: Summarise a collected run into report.json, report.md and plots (module_utils/train_report.py).

Runs on the controller, in the worker: no module is sent to a host. A report that cannot be written fails the
task with the reason; the caller decides whether that ends the play.
"""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils import train_report


class ActionModule(ActionBase):
    """Argument: run_dir (the folder to read and write)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("run_dir",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        folder = self._task.args.get("run_dir")
        if not folder:
            raise AnsibleActionFail("train_report: run_dir is required")
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: no report written")
            return result
        try:
            written = train_report.write(Path(folder))
        except (OSError, ValueError, KeyError) as e:
            raise AnsibleActionFail(f"train_report: {folder}: {type(e).__name__}: {e}") from e
        result.update(changed=True, lines=written)
        return result
