"""Filters of the monitoring role: its Prometheus rule file, `monitoring_rules(params)` -> {"groups": [...]}
(module_utils/monitoring/rules.py; a parameter it refuses is the filter's error, naming the parameter), and what it
writes for Prometheus and Alertmanager from the inventory: `monitoring_scrape_hosts`, `monitoring_targets`,
`monitoring_alertmanager_config`, `monitoring_alertmanager_peers` (module_utils/monitoring/server.py), and a switch
poll's commands and textfile, `monitoring_switch_commands`, `monitoring_switch_textfile` (monitoring/switch.py), and
a Grafana dashboard's JSON, `monitoring_dashboard(uid, params)` (monitoring/dashboards.py)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import dashboards, rules, server, switch
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt({**rules.FILTERS, **server.FILTERS, **switch.FILTERS, **dashboards.FILTERS})
