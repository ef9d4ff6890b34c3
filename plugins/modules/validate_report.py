#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.validate_report (plugins/action/validate_report.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_report
short_description: Write a validation ladder's report.md and bandwidth heatmap beside its verdict.json
description:
  - Runs on the controller (no module is sent to a host); in check mode it writes nothing.
  - An action plugin; this file only documents it.
options:
  folder:
    description: One ladder run's folder (artifacts/validate/<time>) holding its verdict.json.
    type: path
    required: true
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
# After the ladder wrote verdict.json (as roles/cluster_validate/tasks/verdict.yml does)
- name: Write report.md and the bandwidth heatmap
  rdma_llm.cluster.validate_report:
    folder: artifacts/validate/20261126T120000
  delegate_to: localhost
  run_once: true
  check_mode: false
"""

RETURN = r"""
files:
  description: The files written beside verdict.json (report.md, and bandwidth.png where pairs were measured).
  type: list
  elements: path
  returned: success
  sample: ["artifacts/validate/20261126T120000/report.md", "artifacts/validate/20261126T120000/bandwidth.png"]
"""
