"""Action: write the rendered nxos_roce_qos intent to its file on the controller.

Runs on the controller only (no connection, no module execution): the task renders the intent with the
`template` lookup and hands the text over; this writes it to `intent` when the content differs (the
file's time then says when the intent last changed). Doing it here instead of in `file` and
`template` tasks saves a module execution each per run. The plan and the push are
action_plugins/nxos_roce_qos_switch.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

DOCUMENTATION = """
action: nxos_roce_qos_render
short_description: Write the rendered nxos_roce_qos intent to its controller file
options:
  intent: {description: Intent file (controller); directories are made., required: true, type: path}
  intent_text: {description: The rendered intent., required: true, type: str}
"""


def _session():
    name = "rdma_llm_nxos_roce_qos_session"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "module_utils" / "nxos_roce_qos_session.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        for name in ("intent", "intent_text"):
            if args.get(name) is None:
                raise AnsibleActionFail(f"nxos_roce_qos_render: missing argument {name}")
        intent = str(args["intent_text"])
        intent = intent if intent.endswith("\n") else intent + "\n"
        try:
            _session().write_file(args["intent"], intent)
        except OSError as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_render: {exc}") from exc
        result.update(changed=False, intent=args["intent"])
        return result
