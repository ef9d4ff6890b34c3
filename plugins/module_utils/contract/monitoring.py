"""The inventory contract's monitoring rules: the monitoring role's inputs on every host it runs on (the nodes, the
Slurm controller and the hosts of group monitoring), the monitoring hosts themselves and the scrape targets, checked
before any change (roles/monitoring/README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.firewall import firewall_enabled
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import NODES, Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import (
    Check,
    boolean,
    integer,
    mapping,
    text,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import ABS_PATH, rows_on
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.firewall import scrape_addresses
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import server

MONITORING = "monitoring"
DAY = 86400


def duration(minimum: float, what: str) -> Check:
    """A Prometheus duration of at least `minimum` seconds."""

    def check(value: Any) -> str | None:
        try:
            seconds = server.duration_seconds(value)
        except RuleError as exc:
            return str(exc)
        return None if seconds >= minimum else f"is {value}: {what}"

    return check


def receiver_url(value: Any) -> str | None:
    if value in ("", None):
        return None
    try:
        server.webhook_url(value)
    except RuleError as exc:
        return str(exc)
    return None


# systemd's time span as the collector's timer takes it (OnUnitActiveSec=): one number and unit, at least 1 s.
_TIMER = text(r"^[1-9][0-9]*(s|min|h)$", "a systemd time span such as 30s, 5min or 1h (at least 1 s)")
PORT = integer(1, 65535)
MONITORING_ROWS: tuple[tuple[str, Check], ...] = (
    ("monitoring_scrape_interval", duration(1, "Prometheus scrapes at most once a second here (at least 1s)")),
    ("monitoring_evaluation_interval", duration(1, "the rules are evaluated at most once a second (at least 1s)")),
    ("monitoring_retention", duration(DAY, "keep at least one day of samples (1d): an alert's graph needs it")),
    ("monitoring_node_exporter_port", PORT),
    ("monitoring_prometheus_port", PORT),
    ("monitoring_alertmanager_port", PORT),
    ("monitoring_receiver_url", receiver_url),
    ("monitoring_alert_group_wait", duration(0.001, "must be a duration")),
    ("monitoring_alert_group_interval", duration(0.001, "must be a duration")),
    ("monitoring_alert_repeat_interval", duration(0.001, "must be a duration")),
    ("monitoring_rules", mapping()),
    ("monitoring_collector_interval", _TIMER),
    ("monitoring_textfile_dir", ABS_PATH),
    ("monitoring_node_check_state_dir", ABS_PATH),
    ("monitoring_train_root", ABS_PATH),
    ("monitoring_grafana_dashboards_dir", text(r"^(|/[^\x00-\x1f\x7f]*)$", "empty, or an absolute path")),
    ("monitoring_reset_packages", boolean()),
)
MONITORING_VARIABLES = (*(name for name, _ in MONITORING_ROWS), "monitoring_address")
# The ports of one host that must differ: each daemon binds its own.
_PORTS = ("monitoring_node_exporter_port", "monitoring_prometheus_port", "monitoring_alertmanager_port")


def monitored_hosts(inv: Inventory) -> list[str]:
    """Every host the monitoring role runs on, when there is a monitoring host: none without one."""
    if not inv.members(MONITORING):
        return []
    return list(dict.fromkeys(h for group in server.SCRAPED for h in inv.members(group)))


def monitoring_rows(inv: Inventory) -> Iterator[Problem]:
    yield from rows_on(inv, monitored_hosts(inv), MONITORING_ROWS)


def monitoring_hosts(inv: Inventory) -> Iterator[Problem]:
    """The monitoring hosts and what they scrape: a monitoring host is a host the run reaches (not a switch), each
    scraped host has its own address and port, and one host's three daemons listen on three ports."""
    monitors = inv.members(MONITORING)
    if MONITORING in inv.groups and not monitors:
        yield Problem("inventory", f"group {MONITORING}", "has no hosts: name the host that runs Prometheus there")
    if not monitors:
        return
    switches = set(inv.members("switches"))
    for host in monitors:
        if host in switches:
            yield Problem(host, f"group {MONITORING}", "holds a switch: Prometheus runs on a Linux host")
    hosts = monitored_hosts(inv)
    for host in hosts:
        ports = [(n, inv.get(host, n)) for n in _PORTS if isinstance(inv.get(host, n), int)]
        taken: dict[int, str] = {}
        for name, port in ports:
            if host not in monitors and name != "monitoring_node_exporter_port":
                continue
            if port in taken:
                yield Problem(host, name, f"is {port}, the port of {taken[port]} too: each daemon needs its own")
            taken.setdefault(port, name)
    scraped = server.scrape_hosts(inv.groups, inv.hostvars)  # what the role's targets file will hold
    refused = server.target_problems(scraped, inv.get(monitors[0], "monitoring_node_exporter_port", 9100))
    for host, why in refused:
        yield Problem(host, "monitoring_address", why)
    # The fabric firewall lets the exporters answer the monitoring hosts by address (host/firewall.py).
    if any(firewall_enabled(inv, h) for h in inv.members(NODES)):
        for item in scraped:
            bad = item["name"] in {h for h, _ in refused}
            if item["name"] in monitors and not bad and not _is_ip(str(item["address"])):
                yield Problem(
                    item["name"],
                    "monitoring_address",
                    f"is {item['address']!r}: the fabric firewall lets the exporters answer the monitoring hosts by"
                    " IP address; give this host one (monitoring_address or ansible_host)",
                )


def _is_ip(address: str) -> bool:
    """What the firewall's plan takes as a monitoring host's address (host/firewall.py scrape_addresses)."""
    try:
        scrape_addresses([address])
    except RuleError:
        return False
    return True
