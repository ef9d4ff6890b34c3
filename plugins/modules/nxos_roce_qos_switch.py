#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.nxos_roce_qos_switch (plugins/action/nxos_roce_qos_switch.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nxos_roce_qos_switch
short_description: Read, plan, stage (checkpoint, push, verify) or finish the nxos_roce_qos policy over network_cli
description:
  - An action plugin of the nxos_roce_qos role; this file only documents it.
options:
  intent:
    description: Rendered intent file (controller), written from intent_text.
    type: path
  intent_text:
    description: The rendered intent; written to intent (directories made).
    type: str
  marking_policy:
    description: Input qos policy that marks a port as the role's.
    type: str
  queuing_policy:
    description: System queuing policy (per-speed variants are the role's).
    type: str
  commands_file:
    description: Where to write the planned commands indented under their parents.
    type: path
  expected:
    description: What the post-check expects (__nxos_roce_qos_expected).
    type: dict
  checkpoint_file:
    description: Checkpoint file on the switch.
    type: str
  backup_dir:
    description: Back up the running config there (controller) before the push.
    type: path
  finish:
    description: Phase 2 instead (checkpoint, save, stages, fact as for nxos_roce_qos_finish).
    type: dict
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Plan, checkpoint, push and verify (phase 1 of the fabric transaction)
  rdma_llm.cluster.nxos_roce_qos_switch:
    intent: artifacts/nxos/lab-switch.cfg
    intent_text: "{{ lookup('ansible.builtin.template', 'nxos_roce_qos.cfg.j2') }}"
    marking_policy: ROCE_QOS_MARKING
    queuing_policy: ROCE_QUEUING
    expected: "{{ __nxos_roce_qos_expected }}"
    checkpoint_file: nxos_roce_qos.ckpt
"""

RETURN = r"""
changed:
  description: Whether the switch's configuration changed.
  type: bool
  returned: always
"""
