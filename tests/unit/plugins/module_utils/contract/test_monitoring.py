"""The inventory contract's monitoring rules (plugins/module_utils/contract/monitoring.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with a monitoring head node `mon` (group
monitoring) and one change; the contract must return exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check

from tests.unit.plugins.module_utils.contract.inventories import Change, both, good, setv

pytestmark = pytest.mark.lint

DEFAULTS = {
    "monitoring_scrape_interval": "15s",
    "monitoring_evaluation_interval": "15s",
    "monitoring_retention": "15d",
    "monitoring_node_exporter_port": 9100,
    "monitoring_prometheus_port": 9090,
    "monitoring_alertmanager_port": 9093,
    "monitoring_receiver_url": "",
    "monitoring_collector_interval": "30s",
    "monitoring_reset_packages": False,
}


def monitored(inv) -> None:
    """A head node `mon` runs Prometheus; the role's defaults on every host it runs on."""
    inv.groups["monitoring"] = ["mon"]
    inv.hostvars["mon"] = {"ansible_host": "192.168.48.20"}
    for host in ("n1", "n2", "mon"):
        inv.hostvars[host].update(DEFAULTS)


def everywhere(name: str, value) -> Change:
    def change(inv) -> None:
        for host in ("n1", "n2", "mon"):
            inv.hostvars[host][name] = value

    return change


def reports(change: Change) -> list[str]:
    inv = good()
    monitored(inv)
    change(inv)
    return [str(p) for p in check(inv)]


BAD: list[tuple[str, Change, list[str]]] = [
    ("scrape-below-a-second", everywhere("monitoring_scrape_interval", "500ms"),
     ["all: monitoring_scrape_interval is 500ms: Prometheus scrapes at most once a second here (at least 1s)"]),
    ("scrape-not-a-duration", everywhere("monitoring_scrape_interval", "15 seconds"),
     ["all: monitoring_scrape_interval is not a Prometheus duration such as 15s, 1m or 15d (got '15 seconds')"]),
    ("evaluation-below-a-second", setv("mon", "monitoring_evaluation_interval", "0s"),
     ["mon: monitoring_evaluation_interval is 0s: the rules are evaluated at most once a second (at least 1s)"]),
    ("retention-below-a-day", everywhere("monitoring_retention", "23h"),
     ["all: monitoring_retention is 23h: keep at least one day of samples (1d): an alert's graph needs it"]),
    ("receiver-not-a-url", everywhere("monitoring_receiver_url", "alerts.example.org/hook"),
     ["all: monitoring_receiver_url must be an http:// or https:// URL (its scheme is not http or https)"]),
    ("receiver-without-host", everywhere("monitoring_receiver_url", "http:///hook"),
     ["all: monitoring_receiver_url must be an http:// or https:// URL with a host and no spaces"]),
    ("receiver-port-not-a-number", everywhere("monitoring_receiver_url", "http://hooks:80a/x"),
     ["all: monitoring_receiver_url must be an http:// or https:// URL (its port is not a number)"]),
    ("exporter-port-past-65535", everywhere("monitoring_node_exporter_port", 91000),
     ["all: monitoring_node_exporter_port must be an integer 1-65535 (got 91000)"]),
    ("prometheus-on-alertmanager-port", setv("mon", "monitoring_prometheus_port", 9093),
     ["mon: monitoring_alertmanager_port is 9093, the port of monitoring_prometheus_port too: each daemon needs"
      " its own"]),
    ("collector-interval-not-systemd", everywhere("monitoring_collector_interval", "0s"),
     ["all: monitoring_collector_interval must be a systemd time span such as 30s, 5min or 1h (at least 1 s)"
      " (got '0s')"]),
    ("reset-packages-not-a-boolean", everywhere("monitoring_reset_packages", "ture"),
     ["all: monitoring_reset_packages must be true or false (got 'ture')"]),
    ("grafana-folder-relative", setv("mon", "monitoring_grafana_dashboards_dir", "grafana/dashboards"),
     ["mon: monitoring_grafana_dashboards_dir must be empty, or an absolute path (got 'grafana/dashboards')"]),
    ("two-hosts-one-address", setv("mon", "ansible_host", "192.168.48.175"),
     ["n1: monitoring_address is 192.168.48.175, as mon's: each host needs its own address"]),
    ("address-with-a-path", setv("mon", "monitoring_address", "head/9090"),
     ["mon: monitoring_address is 'head/9090': no host name or address Prometheus can scrape"]),
    ("monitoring-host-by-name-behind-the-firewall", setv("mon", "ansible_host", "head.example.org"),
     ["mon: monitoring_address is 'head.example.org': the fabric firewall lets the exporters answer the monitoring"
      " hosts by IP address; give this host one (monitoring_address or ansible_host)"]),
    ("monitoring-group-empty", lambda inv: inv.groups.__setitem__("monitoring", []),
     ["inventory: group monitoring has no hosts: name the host that runs Prometheus there"]),
    ("monitoring-on-a-switch", lambda inv: inv.groups.__setitem__("monitoring", ["sw"]),
     ["sw: group monitoring holds a switch: Prometheus runs on a Linux host"]),
]  # fmt: skip


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in BAD])
def test_bad_monitoring_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected


def test_the_monitored_cluster_holds() -> None:
    assert reports(lambda inv: None) == []


@pytest.mark.parametrize(
    "change",
    [
        everywhere("monitoring_scrape_interval", "1s"),
        everywhere("monitoring_retention", "1d"),
        everywhere("monitoring_retention", "24h"),
        everywhere("monitoring_receiver_url", "https://user@hooks.example.org:8443/alerts"),
        everywhere("monitoring_collector_interval", "5min"),
        setv("mon", "monitoring_address", "[fd00::20]"),
        both(setv("mon", "ansible_host", "head"), everywhere("fabric_firewall_enabled", False)),
        setv("mon", "monitoring_grafana_dashboards_dir", "/var/lib/grafana/dashboards/rdma-llm"),
    ],
    ids=[
        "scrape-1s",
        "retention-1d",
        "retention-24h",
        "receiver-https-port",
        "collector-5min",
        "address-ipv6",
        "name-without-firewall",
        "grafana-folder",
    ],
)
def test_the_limits_themselves_are_allowed(change) -> None:
    assert reports(change) == []


def test_without_a_monitoring_host_nothing_is_checked() -> None:
    """No host in group monitoring: the role runs nowhere, its values are not read (the role's defaults)."""
    inv = good()
    for host in ("n1", "n2"):
        inv.hostvars[host].update(DEFAULTS, monitoring_scrape_interval="1ms")
    assert [str(p) for p in check(inv)] == []
