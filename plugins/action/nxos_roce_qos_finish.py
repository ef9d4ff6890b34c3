"""Action: phase 2 of the switches' transaction (save every switch, or roll every switch back), over the
persistent connection phase 1 left open.

The switch action (rdma_llm.cluster.nxos_roce_qos_switch) with `_requires_connection` off, so
ansible-core starts no `ansible-connection` process for this task (~0.6 s of CPU per switch): it talks
JSON-RPC to the socket phase 1's connection is still listening on (its path is in phase 1's result).
That process closes after `persistent_connect_timeout` seconds idle (ansible.cfg: 60); on a large
fabric the last switch's phase 1 can end later than that after the first's. Then the socket is gone,
nothing is sent, and the result says `reconnect: true`: the role's next task does the same over a
new connection (the switch action with `finish`).

The verdict: commit only when every switch of the play has a phase-1 `transaction` that is ok (a switch
that failed or was unreachable before, or one whose phase 1 has not run, counts as failed):
module_utils/switch/session.py `verdict`.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.connection import Connection, ConnectionError
from ansible_collections.rdma_llm.cluster.plugins.action.nxos_roce_qos_switch import ActionModule as SwitchAction
from ansible_collections.rdma_llm.cluster.plugins.action.nxos_roce_qos_switch import _Cli
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import session as nxos_roce_qos_session


class ActionModule(SwitchAction):
    # Read by the task executor before the action runs: no ansible-connection process is started.
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(SwitchAction, self).run(tmp, task_vars)  # ActionBase.run, not the switch's
        args = self._task.args
        host = (task_vars or {}).get("inventory_hostname", "switch")
        socket_path = args.get("socket_path")
        if not socket_path:
            raise AnsibleActionFail("nxos_roce_qos_finish: missing socket_path")
        if not _listening(socket_path):
            result.update(
                changed=False,
                reconnect=True,
                msg=f"the connection of phase 1 to {host} closed (idle timeout): phase 2 runs over a new one",
            )
            return result
        return self._finish(result, args, _Cli(socket_path, nxos_roce_qos_session), host)


def _listening(socket_path: str) -> bool:
    """Whether the persistent connection process still answers on its socket (a JSON-RPC call that does
    not reach the switch)."""
    if not os.path.exists(socket_path):
        return False
    try:
        Connection(socket_path).get_option("persistent_command_timeout")
    except ConnectionError:
        return False
    return True
