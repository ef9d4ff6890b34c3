#!/usr/bin/python
"""Module rdma_llm.cluster.slurm_daemons: the Slurm daemons answer, or the play fails with their own words
(module_utils/slurm/daemons.py reads scontrol's answers)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_daemons
short_description: Wait until slurmdbd, slurmctld and this node's slurmd answer, or fail with the cause
description:
  - With O(dbd), waits until C(sacctmgr show cluster) gets slurmdbd's answer (slurmdbd reached its database).
  - On the controller, waits until C(scontrol ping) says slurmctld is UP. On a node, waits until
    C(scontrol show node NAME) shows the node responding and neither DOWN nor INVAL.
  - Debian's units are C(Type=simple), so C(systemctl start) succeeds even when the daemon dies a moment later;
    this is the check that it did not. When it did, fails with the unit's state, the last lines of its journal and
    of its log file (a daemon that dies at start may leave its reason only there).
  - Read-only; supports check mode.
options:
  dbd:
    description: The host runs slurmdbd.
    type: bool
    default: false
  controller:
    description: The host runs slurmctld.
    type: bool
    default: false
  node:
    description: The host's NodeName when it runs slurmd.
    type: str
  timeout:
    description: Seconds to wait for the answer.
    type: int
    default: 60
  lines:
    description: Lines of journal and log file to report on failure.
    type: int
    default: 20
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Check the daemons answer
  rdma_llm.cluster.slurm_daemons:
    controller: true
    node: lab-node1
"""

RETURN = r"""
states:
  description: What each daemon answered, for example C(slurmctld) C(UP) and C(slurmd) C(IDLE).
  type: dict
  returned: success
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.daemons import node_ready, node_state, ping_up

LOGS = {
    "slurmdbd": "/var/log/slurm/slurmdbd.log",
    "slurmctld": "/var/log/slurm/slurmctld.log",
    "slurmd": "/var/log/slurm/slurmd.log",
}


ASKED = {
    "slurmdbd": "slurmdbd does not answer `sacctmgr show cluster`",
    "slurmctld": "slurmctld does not answer `scontrol ping`",
    "slurmd": "this node's slurmd is not ready in slurmctld's view (`scontrol show node`)",
}


def _why(module: AnsibleModule, unit: str, answer: str, lines: int) -> str:
    """The unit's state, its journal and its log file: where a dead daemon left its reason."""
    _, show, _ = module.run_command(
        ["systemctl", "show", unit, "--property=ActiveState,SubState,Result,ExecMainStatus"]
    )
    _, journal, _ = module.run_command(["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "short"])
    _, log, _ = module.run_command(["tail", "-n", str(lines), LOGS[unit]])
    return (
        f"{ASKED[unit]}: {answer.strip() or 'no answer'}; {unit}: {' '.join(show.split())}\n"
        f"--- journalctl -u {unit} -n {lines}\n{journal.rstrip()}\n--- tail -n {lines} {LOGS[unit]}\n{log.rstrip()}"
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dbd": {"type": "bool", "default": False},
            "controller": {"type": "bool", "default": False},
            "node": {"type": "str"},
            "timeout": {"type": "int", "default": 60},
            "lines": {"type": "int", "default": 20},
        },
        supports_check_mode=True,
    )
    p = module.params
    deadline = time.monotonic() + p["timeout"]
    states = {}
    checks = [("slurmdbd", ["sacctmgr", "--noheader", "--parsable2", "show", "cluster"])] if p["dbd"] else []
    checks += [("slurmctld", ["scontrol", "ping"])] if p["controller"] else []
    checks += [("slurmd", ["scontrol", "show", "node", p["node"], "--oneliner"])] if p["node"] else []
    for unit, argv in checks:
        while True:
            rc, out, err = module.run_command(argv)
            if unit == "slurmdbd":
                # sacctmgr prints its error and exits 1 while slurmdbd or its database is unreachable.
                ok, answer, state = rc == 0, (out + err).strip(), "UP"
            elif unit == "slurmctld":
                ok, answer = rc == 0 and ping_up(out), (out + err).strip()
                state = "UP"
            else:
                ok, answer = node_ready(node_state(out)) if rc == 0 else (False, (out + err).strip())
                state = answer
            _, active, _ = module.run_command(["systemctl", "is-active", unit])
            dead = active.strip() in ("failed", "inactive")
            if ok and not dead:
                states[unit] = state
                break
            if dead or time.monotonic() > deadline:
                module.fail_json(msg=_why(module, unit, answer, p["lines"]), states=states)
            time.sleep(1)
    module.exit_json(changed=False, states=states)


if __name__ == "__main__":
    main()
