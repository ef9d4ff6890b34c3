#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.train_report (plugins/action/train_report.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: train_report
short_description: Summarise a collected training run into report.json, report.md and plots
description:
  - Runs on the controller (no module is sent to a host); in check mode it writes nothing.
  - An action plugin; this file only documents it.
options:
  run_dir:
    description: A collected run (artifacts/<run_id>, as train_collect.yml leaves it) whose hosts' metrics and logs
      are read; report.json, report.md and the plots are written into it.
    type: path
    required: true
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Summarise a collected run and print its summary
  rdma_llm.cluster.train_report:
    run_dir: "artifacts/{{ run_id }}"
  register: report
  delegate_to: localhost
  run_once: true

- name: Show the summary
  ansible.builtin.debug:
    msg: "{{ report.lines }}"
  run_once: true
"""

RETURN = r"""
lines:
  description: The run's summary for people, one line each, as the launch prints it at the end (outcome, last step,
    validation loss and tokens/s; lost nodes, restarts, NCCL transport; the report and plot files).
  type: list
  elements: str
  returned: success
  sample: ["run r1: completed — step 30, val loss 10.9 -> 6.1, 1,234 tokens/s", "report: artifacts/r1/report.md"]
"""
