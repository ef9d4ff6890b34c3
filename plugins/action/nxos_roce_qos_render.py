"""Action: write the rendered nxos_roce_qos intent to its controller file, and nothing else (review only).

The switch action (rdma_llm.cluster.nxos_roce_qos_switch) without its connection: the same intent writer
(`_write_intent`), with `_requires_connection` off,
so ansible-core starts no `ansible-connection` process for this task and nothing talks to the switch.
The task renders the intent with the `template` lookup and hands the text over; the file is written
only when its content differs (its time then says when the intent last changed).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.rdma_llm.cluster.plugins.action.nxos_roce_qos_switch import ActionModule as SwitchAction
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import session as nxos_roce_qos_session


class ActionModule(SwitchAction):
    # Read by the task executor before the action runs: no ansible-connection process is started.
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(SwitchAction, self).run(tmp, task_vars)  # ActionBase.run, not the switch's
        args = self._task.args
        for name in ("intent", "intent_text"):
            if args.get(name) is None:
                raise AnsibleActionFail(f"nxos_roce_qos_render: missing argument {name}")
        try:
            self._write_intent(args, nxos_roce_qos_session)
        except OSError as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_render: {exc}") from exc
        result.update(changed=False, intent=args["intent"])
        return result
