"""Action: write the rendered intent and plan the commands that converge the NX-OS managed blocks to it.

Runs on the controller only (no connection, no module execution): writes the intent text (rendered by the
task with the `template` lookup) to the render file, and, given the running config the role read, hands
both to ../module_utils/nxos_roce_qos_plan.py (the diff engine, plain Python, tested by
tests/switch/test_plan.py); returns its `commands`, `config`, `diff` and `changed`, and writes `config`
to `commands_file` (what `nxos_config src:` sends). Doing the file work here instead of in `file`,
`template` and `copy` tasks saves a module execution each per run.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

DOCUMENTATION = """
action: nxos_roce_qos_plan
short_description: Write the nxos_roce_qos intent; commands and diff that converge NX-OS managed blocks to it
options:
  intent: {description: Intent file (controller); read, or written from intent_text., required: true, type: path}
  intent_text: {description: The rendered intent; written to intent (directories made)., type: str}
  running: {description: Text of show running-config; without it nothing is planned (render only)., type: str}
  marking_policy: {description: Input qos policy that marks a port as the role's., type: str}
  queuing_policy: {description: System queuing policy; its per-speed variants no port uses are deleted., type: str}
  commands_file: {description: Where to write the planned commands indented under their parents., type: path}
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


def _write(path: str, text: str) -> None:
    """Write only when the content differs (the file's time then says when the intent last changed)."""
    target = Path(path)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        if "intent" not in args:
            raise AnsibleActionFail("nxos_roce_qos_plan: missing argument intent")
        try:
            if args.get("intent_text") is not None:
                intent = str(args["intent_text"])
                intent = intent if intent.endswith("\n") else intent + "\n"
                _write(args["intent"], intent)
            else:
                intent = Path(args["intent"]).read_text(encoding="utf-8")
            if args.get("running") is None:
                result.update(changed=False, intent=args["intent"])
                return result
            if not args.get("marking_policy"):
                raise AnsibleActionFail("nxos_roce_qos_plan: missing argument marking_policy")
            planned = _engine().plan(args["running"], intent, args["marking_policy"], args.get("queuing_policy"))
            if args.get("commands_file") and planned["commands"]:
                _write(args["commands_file"], planned["config"])
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
