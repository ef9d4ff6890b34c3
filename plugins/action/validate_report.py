"""Action: report.md and the bandwidth heatmap beside a ladder's verdict.json (module_utils/ladder/report.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import report as validate_report
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.report import report_action

ActionModule = report_action(validate_report, "folder", "files")
