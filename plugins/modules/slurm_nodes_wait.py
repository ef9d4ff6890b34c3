#!/usr/bin/python
"""Module rdma_llm.cluster.slurm_nodes_wait: wait until Slurm nodes hold no job, or are in service again, up to a
deadline; a deadline passed is a result, not a failure (module_utils/lifecycle/rolling.py reads Slurm's answers)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_nodes_wait
short_description: Wait until Slurm nodes hold no job, or are back in service, up to a deadline
description:
  - With O(until=idle), polls C(squeue --nodelist) until no job holds any of O(nodes) (a pending job holds none).
  - With O(until=in_service), polls C(scontrol show nodes --oneliner) until none of O(nodes) is in a state that keeps
    jobs off it (down, drained, not responding, ...).
  - Never fails on the deadline. It returns C(timed_out) and what is left, so the play decides (the rollout skips a
    batch whose jobs outlive it and never kills one). Fails only when Slurm cannot be asked.
  - Read-only; supports check mode.
options:
  nodes:
    description: The Slurm node names.
    type: list
    elements: str
    required: true
  until:
    description: What to wait for.
    type: str
    choices: [idle, in_service]
    default: idle
  timeout:
    description: Seconds to wait at most (0 looks once).
    type: int
    default: 3600
  poll:
    description: Seconds between two looks.
    type: int
    default: 5
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Wait for the batch's jobs to end
  rdma_llm.cluster.slurm_nodes_wait:
    nodes: [node1, node2]
    until: idle
    timeout: 3600
"""

RETURN = r"""
left:
  description: What still holds the wait, each naming its node (C(job 42 on node1), C(node1 IDLE+DRAIN)); empty when
    the wait ended.
  type: list
  returned: success
timed_out:
  description: Whether the deadline passed with something left.
  type: bool
  returned: success
waited:
  description: Seconds waited.
  type: float
  returned: success
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.lifecycle.rolling import (
    SQUEUE_FORMAT,
    jobs_left,
    nodes_out_of_service,
)


def _look(module: AnsibleModule, nodes: list[str], until: str) -> list[str]:
    if until == "idle":
        argv = ["squeue", "--noheader", f"--format={SQUEUE_FORMAT}", f"--nodelist={','.join(nodes)}"]
    else:
        argv = ["scontrol", "show", "nodes", "--oneliner"]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"`{' '.join(argv)}` failed (rc {rc}): {err.strip() or out.strip()}")
    return jobs_left(out, nodes) if until == "idle" else nodes_out_of_service(out, nodes)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "until": {"type": "str", "choices": ["idle", "in_service"], "default": "idle"},
            "timeout": {"type": "int", "default": 3600},
            "poll": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    nodes, until = module.params["nodes"], module.params["until"]
    start = time.monotonic()
    deadline = start + max(0, module.params["timeout"])
    left = _look(module, nodes, until)
    while left and time.monotonic() < deadline:
        time.sleep(max(1, module.params["poll"]))
        left = _look(module, nodes, until)
    module.exit_json(changed=False, left=left, timed_out=bool(left), waited=round(time.monotonic() - start, 1))


if __name__ == "__main__":
    main()
