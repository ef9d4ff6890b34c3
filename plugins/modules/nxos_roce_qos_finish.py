#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.nxos_roce_qos_finish (plugins/action/nxos_roce_qos_finish.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nxos_roce_qos_finish
short_description: Save or roll back a staged nxos_roce_qos change, as one transaction for every switch of the play
description:
  - An action plugin of the nxos_roce_qos role; this file only documents it.
options:
  socket_path:
    description: The persistent connection phase 1 used (its result's socket_path).
    required: true
    type: path
  checkpoint:
    description: The checkpoint file phase 1 took.
    required: true
    type: str
  stages:
    description: Every switch of the play -> its phase-1 transaction ({ok, staged, reason}) or null.
    required: true
    type: dict
  save:
    description: Copy running to startup when every switch passed.
    type: bool
    default: true
  fact:
    description: The switch's nxos_roce_qos_result from phase 1 (updated with saved and the verdict).
    type: dict
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Save every switch, or roll every switch back (phase 2)
  rdma_llm.cluster.nxos_roce_qos_finish:
    socket_path: "{{ __stage.socket_path }}"
    checkpoint: "{{ __stage.transaction.checkpoint }}"
    stages: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '__stage'))) }}"
"""

RETURN = r"""
changed:
  description: Whether the switch's configuration changed.
  type: bool
  returned: always
"""
