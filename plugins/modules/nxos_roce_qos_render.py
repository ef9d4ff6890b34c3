#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.nxos_roce_qos_render (plugins/action/nxos_roce_qos_render.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nxos_roce_qos_render
short_description: Write the rendered nxos_roce_qos intent to its controller file (no connection)
description:
  - An action plugin of the nxos_roce_qos role; this file only documents it.
options:
  intent:
    description: Intent file (controller); directories are made.
    required: true
    type: path
  intent_text:
    description: The rendered intent.
    required: true
    type: str
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Write the intent for review (no connection)
  rdma_llm.cluster.nxos_roce_qos_render:
    intent: artifacts/nxos/lab-switch.cfg
    intent_text: "{{ lookup('ansible.builtin.template', 'nxos_roce_qos.cfg.j2') }}"
"""

RETURN = r"""
intent:
  description: The file that holds the intent (rewritten only when the text differs; the task reports no change,
    since no switch is touched).
  type: str
  returned: always
"""
