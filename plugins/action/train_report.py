"""Action: summarise a collected run into report.json, report.md and plots (module_utils/launch/report.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as train_report
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.report import report_action

ActionModule = report_action(train_report, "run_dir", "lines")
