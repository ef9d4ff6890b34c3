#!/usr/bin/python
"""Module rdma_llm.cluster.node_check: rdma-node-check on the host, for the ladder (module_utils/node/)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: node_check
short_description: Check one node (fabric NICs, RDMA ports, GPUs, NIC counters, link flaps) as rdma-node-check does
description:
  - Runs the node checks of C(rdma-node-check) (the command the role C(node_health) installs for a scheduler) with the
    config given here, so the validation ladder and the scheduler judge a node by the same code.
  - Read-only on the host except for the last counter reading, kept in O(state_dir) (not in check mode).
  - Returns the command's result; the task does not fail on a failing check (the ladder's rung decides).
  - See roles/node_health/README.md for every check, threshold and source.
options:
  config:
    description:
      - The command's config (schema C(rdma-llm-cluster/node-check-config/1)), as the filter
        C(rdma_llm.cluster.node_health_config) builds it.
    type: dict
    required: true
  root:
    description: Where C(/sys) and C(/proc) are (a fake tree in tests).
    type: path
    default: /
  state_dir:
    description: Where the last counter reading is kept (growth is judged against it); empty keeps none.
    type: path
    default: ""
  only:
    description: Check groups to run.
    type: list
    elements: str
    choices: [fabric, gpu, counters, flaps, stack]
    default: [fabric, gpu, counters, flaps, stack]
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Check this node as rdma-node-check would
  rdma_llm.cluster.node_check:
    config: "{{ cluster_fabric_interfaces | rdma_llm.cluster.node_health_config(host=inventory_hostname) }}"
    state_dir: /tmp/cluster-validate/state
  register: node_check

- name: Read the NIC counters again after the stress rungs
  rdma_llm.cluster.node_check:
    config: "{{ config }}"
    state_dir: /tmp/cluster-validate/state
    only: [counters]
"""

RETURN = r"""
status:
  description: C(pass), C(warn) or C(fail) (the worst check; a skip counts as pass).
  type: str
  returned: always
exit:
  description: The command's exit code for that status (0, 1, 2).
  type: int
  returned: always
reason:
  description: One line, what a scheduler puts on a drained node.
  type: str
  returned: always
checks:
  description:
    - One entry per check (C(check), C(status) pass|warn|fail|skip, C(detail), C(value), C(threshold), C(unit)).
  type: list
  elements: dict
  returned: always
notes:
  description: What the checks noticed that is not a verdict (virtual RDMA, SR-IOV, links at different rates).
  type: list
  elements: str
  returned: always
rail_speeds:
  description: Each rail's line rate in Gb/s (None when unknown).
  type: dict
  returned: always
rdma:
  description: C(state) and C(devices) (the sysfs reading rdma_stack records).
  type: dict
  returned: always
counters:
  description:
    - The port counters read (C(ports)), their growth since the last reading (C(deltas)), the pause counters (C(pause)).
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import GROUPS, ConfigError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import run


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "config": {"type": "dict", "required": True},
            "root": {"type": "path", "default": "/"},
            "state_dir": {"type": "path", "default": ""},
            "only": {"type": "list", "elements": "str", "choices": list(GROUPS), "default": list(GROUPS)},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = run(p["config"], p["root"], p["state_dir"] or None, p["only"], write_state=not module.check_mode)
    except ConfigError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
