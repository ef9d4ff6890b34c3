#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.inventory_contract (plugins/action/inventory_contract.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: inventory_contract
short_description: Check the whole inventory against the project's contract, on the controller
description:
  - Reads every host of C(rdma_nodes), C(subnet_managers) and C(switches) whatever C(--limit) says, layers each
    role's defaults (the collection's C(roles/<role>/defaults/main.yml)) under the inventory's values, templates
    them and runs every rule of module_utils/contract/ (docs/design.md, "Inventory contract").
  - "Fails with every problem at once, one line each, C(<host>: <variable> <what is wrong>). Contacts no host."
  - An action plugin; this file only documents it.
options:
  roles:
    description: Group name to the role names whose defaults apply to its hosts.
    type: dict
    default: {}
  require_groups:
    description: Groups that must have hosts.
    type: list
    elements: str
    default: [rdma_nodes]
  variables:
    description:
      - Prefixes (or names) of the variables to report on; empty reports on all (a role used alone passes its own).
    type: list
    elements: str
    default: []
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Check the inventory contract
  rdma_llm.cluster.inventory_contract:
    roles: {rdma_nodes: [common, rdma_netplan], switches: [nxos_roce_qos]}
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
problems:
  description: "Every problem found, C(<host>: <variable> <what is wrong>)."
  type: list
  elements: str
  returned: always
"""
