"""Action: Write report.md and the bandwidth heatmap beside a ladder's verdict.json (module_utils/validate_report.py).

Runs on the controller, in the worker: no module is sent to a host. A report that cannot be written fails the
task with the reason; the caller decides whether that ends the play.
"""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils import validate_report


class ActionModule(ActionBase):
    """Argument: folder (the folder to read and write)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("folder",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        folder = self._task.args.get("folder")
        if not folder:
            raise AnsibleActionFail("validate_report: folder is required")
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: no report written")
            return result
        try:
            written = validate_report.write(Path(folder))
        except (OSError, ValueError, KeyError) as e:
            raise AnsibleActionFail(f"validate_report: {folder}: {type(e).__name__}: {e}") from e
        result.update(changed=True, files=written)
        return result
