"""What the monitoring role writes for Prometheus and Alertmanager (plugins/module_utils/monitoring/server.py)."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import server


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15), ("1m", 60), ("1h30m", 5400), ("15d", 15 * 86400), ("2w", 14 * 86400), ("1y", 365 * 86400),
     ("500ms", 0.5), ("0s", 0), (30, None)],
)  # fmt: skip
def test_prometheus_durations(text, seconds) -> None:
    if seconds is None:  # a bare number is no duration in Prometheus's configuration
        with pytest.raises(RuleError):
            server.duration_seconds(text)
    else:
        assert server.duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "15 s", "1m1h", "s", "1.5m", True, None, "15sec"])
def test_what_is_no_duration(text) -> None:
    with pytest.raises(RuleError, match="is not a Prometheus duration"):
        server.duration_seconds(text)


def test_targets_one_per_host_named_by_inventory_name() -> None:
    hosts = [
        {"name": "n2", "address": "10.0.0.2"},
        {"name": "n1", "address": "10.0.0.1"},
        {"name": "head", "address": None},
        {"name": "n1", "address": "10.0.0.1"},  # in two groups: one target
    ]
    assert server.targets(hosts, 9100, "lab") == [
        {"targets": ["head:9100"], "labels": {"instance": "head", "cluster": "lab"}},
        {"targets": ["10.0.0.1:9100"], "labels": {"instance": "n1", "cluster": "lab"}},
        {"targets": ["10.0.0.2:9100"], "labels": {"instance": "n2", "cluster": "lab"}},
    ]
    assert server.targets(hosts[:1], 9100) == [{"targets": ["10.0.0.2:9100"], "labels": {"instance": "n2"}}]


@pytest.mark.parametrize(
    ("hosts", "port", "message"),
    [
        ([{"name": "a", "address": "10.0.0.1"}, {"name": "b", "address": "10.0.0.1"}], 9100,
         "b: monitoring_address is 10.0.0.1, as a's: each host needs its own address"),
        ([{"name": "a", "address": "10.0.0.1/24"}], 9100, "a: monitoring_address is '10.0.0.1/24': no host name"),
        ([{"name": "a", "address": "a\nb"}], 9100, "no host name or address"),
        ([{"name": "a", "address": "a"}], 0, "port 0 is not a TCP port"),
        ([{"name": "a", "address": "a"}], 65536, "port 65536 is not a TCP port"),
        ([{"name": "a", "address": "a"}], True, "is not a TCP port"),
    ],
)  # fmt: skip
def test_targets_refused(hosts, port, message) -> None:
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        server.targets(hosts, port)


def test_scrape_hosts_read_every_scraped_group_once_in_inventory_order() -> None:
    groups = {"rdma_nodes": ["n1", "n2"], "slurm_controllers": ["n1"], "monitoring": ["head"], "switches": ["sw"]}
    hostvars = {"n1": {"ansible_host": "10.0.0.1"}, "n2": {"ansible_host": "10.0.0.2", "monitoring_address": "f2"},
                "head": {}, "sw": {"ansible_host": "10.0.0.9"}}  # fmt: skip
    assert server.scrape_hosts(groups, hostvars) == [
        {"name": "n1", "address": "10.0.0.1"},
        {"name": "n2", "address": "f2"},
        {"name": "head", "address": "head"},
    ]
    assert server.scrape_hosts({"rdma_nodes": ["n1"]}, hostvars) == [{"name": "n1", "address": "10.0.0.1"}]
    # The monitoring hosts alone (Alertmanager's peers, Prometheus's Alertmanagers).
    assert server.scrape_hosts(groups, hostvars, "monitoring") == [{"name": "head", "address": "head"}]


def test_alertmanager_sends_every_alert_to_the_webhook_resolved_too() -> None:
    config = server.alertmanager_config("https://hooks.example.org/a", "30s", "5m", "4h")
    assert config["route"] == {"receiver": "rdma-llm", "group_by": ["alertname", "instance"], "group_wait": "30s",
                               "group_interval": "5m", "repeat_interval": "4h"}  # fmt: skip
    assert config["receivers"] == [
        {"name": "rdma-llm", "webhook_configs": [{"url": "https://hooks.example.org/a", "send_resolved": True}]}
    ]
    # No URL: a receiver that sends nowhere (Alertmanager needs one), the alerts stay in its API.
    assert server.alertmanager_config("", "30s", "5m", "4h")["receivers"] == [{"name": "rdma-llm"}]


@pytest.mark.parametrize(
    ("url", "message"),
    [("ftp://u:secret@h/x", "its scheme is not http or https"), ("http://u:secret@", "with a host"),
     ("http://u:secret@h x/", "no spaces"), ("http://u:secret@h:x/", "its port is not a number"),
     (7, "must be an http")],
)  # fmt: skip
def test_a_receiver_that_is_no_url_is_refused_without_printing_it(url, message) -> None:
    with pytest.raises(RuleError, match=message) as exc:
        server.alertmanager_config(url, "30s", "5m", "4h")
    assert "secret" not in str(exc.value)


def test_alertmanager_durations_checked() -> None:
    with pytest.raises(RuleError, match="the alert group_interval is not a Prometheus duration"):
        server.alertmanager_config("", "30s", "5 minutes", "4h")


def test_alertmanager_gossips_only_with_other_monitoring_hosts() -> None:
    assert server.alertmanager_peers(["head"], "head") == ["--cluster.listen-address="]
    assert server.alertmanager_peers(["m2", "m1", "m3"], "m1") == [
        "--cluster.listen-address=0.0.0.0:9094",
        "--cluster.peer=m2:9094",
        "--cluster.peer=m3:9094",
    ]


def test_prometheus_urls_are_the_monitoring_hosts_addresses() -> None:
    groups = {"monitoring": ["head", "head2", "head3"], "rdma_nodes": ["n1"]}
    hostvars = {"head": {"ansible_host": "10.0.0.5"}, "head2": {"monitoring_address": "fd00::20"},
                "head3": {"monitoring_address": "[fd00::21]"}, "n1": {"ansible_host": "10.0.0.6"}}  # fmt: skip
    assert server.prometheus_urls(groups, hostvars, "9090") == [
        "http://10.0.0.5:9090",
        "http://[fd00::20]:9090",
        "http://[fd00::21]:9090",
    ]
    assert server.prometheus_urls({"rdma_nodes": ["n1"]}, hostvars, 9090) == []
