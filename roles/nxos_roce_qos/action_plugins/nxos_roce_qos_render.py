"""Action: write the rendered nxos_roce_qos intent to its controller file, and nothing else (review only).

The switch action (action_plugins/nxos_roce_qos_switch.py) without its connection: the same loader of
the role's Python files and the same intent writer (`_write_intent`), with `_requires_connection` off,
so ansible-core starts no `ansible-connection` process for this task and nothing talks to the switch.
The task renders the intent with the `template` lookup and hands the text over; the file is written
only when its content differs (its time then says when the intent last changed).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail

DOCUMENTATION = """
action: nxos_roce_qos_render
short_description: Write the rendered nxos_roce_qos intent to its controller file (no connection)
options:
  intent: {description: Intent file (controller); directories are made., required: true, type: path}
  intent_text: {description: The rendered intent., required: true, type: str}
"""


def _switch_action():
    """The sibling switch action's module (loaded by path: a role's action plugins are not a package)."""
    name = "rdma_llm_nxos_roce_qos_switch_action"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("nxos_roce_qos_switch.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_SWITCH = _switch_action()


class ActionModule(_SWITCH.ActionModule):
    # Read by the task executor before the action runs: no ansible-connection process is started.
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(_SWITCH.ActionModule, self).run(tmp, task_vars)  # ActionBase.run, not the switch's
        args = self._task.args
        for name in ("intent", "intent_text"):
            if args.get(name) is None:
                raise AnsibleActionFail(f"nxos_roce_qos_render: missing argument {name}")
        session = _SWITCH.load_role_file("session", "module_utils/nxos_roce_qos_session.py")
        try:
            self._write_intent(args, session)
        except OSError as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_render: {exc}") from exc
        result.update(changed=False, intent=args["intent"])
        return result
