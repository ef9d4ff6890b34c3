"""The controller-side report actions (train_report, validate_report): one shape, a module_utils writer each.

Each runs in the worker on the controller (no module goes to a host), writes nothing in check mode, and
fails the task with the reason when the report cannot be written; the caller decides whether that ends the play.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


def report_action(writer: ModuleType, argument: str, returned: str) -> type[ActionBase]:
    """An action that calls `writer.write(Path(<argument>))` and returns what it wrote as `returned`."""
    name = writer.__name__.rsplit(".", 1)[-1]

    class ReportAction(ActionBase):
        TRANSFERS_FILES = False
        _requires_connection = False
        _VALID_ARGS = frozenset((argument,))

        def run(self, tmp=None, task_vars=None):
            result = super().run(tmp, task_vars)
            folder = self._task.args.get(argument)
            if not folder:
                raise AnsibleActionFail(f"{name}: {argument} is required")
            if self._task.check_mode:
                result.update(changed=False, skipped=True, msg="check mode: no report written")
                return result
            try:
                written = writer.write(Path(folder))
            except (OSError, ValueError, KeyError) as e:
                raise AnsibleActionFail(f"{name}: {folder}: {type(e).__name__}: {e}") from e
            result.update({"changed": True, returned: written})
            return result

    return ReportAction
