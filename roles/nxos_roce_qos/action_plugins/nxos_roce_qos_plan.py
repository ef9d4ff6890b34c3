"""Action: plan the commands that converge the NX-OS managed blocks to the nxos_roce_qos intent.

Runs on the controller only (no connection): reads the rendered intent file, hands it with the running
config the role read to ../module_utils/nxos_roce_qos_plan.py (the diff engine, plain Python, tested by
tests/switch/test_plan.py) and returns its `commands`, `config`, `diff` and `changed`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

DOCUMENTATION = """
action: nxos_roce_qos_plan
short_description: Commands and diff that converge NX-OS managed blocks to the nxos_roce_qos intent
options:
  running: {description: Text of show running-config., required: true, type: str}
  intent: {description: Path of the rendered intent file (controller)., required: true, type: path}
  marking_policy: {description: Input qos policy that marks a port as the role's., required: true, type: str}
  queuing_policy: {description: System queuing policy; its per-speed variants no port uses are deleted., type: str}
"""


def _engine():
    name = "rdma_llm_nxos_roce_qos_plan"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "module_utils" / "nxos_roce_qos_plan.py"
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
        for name in ("running", "intent", "marking_policy"):
            if name not in args:
                raise AnsibleActionFail(f"nxos_roce_qos_plan: missing argument {name}")
        try:
            with open(args["intent"], encoding="utf-8") as handle:
                intent = handle.read()
            planned = _engine().plan(args["running"], intent, args["marking_policy"], args.get("queuing_policy"))
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_plan: {exc}") from exc
        result.update(planned)
        result["changed"] = bool(planned["commands"])
        result["diff"] = {
            "before": planned["before"],
            "after": planned["after"],
            "before_header": "running-config (managed blocks)",
            "after_header": "intended",
        }
        return result
