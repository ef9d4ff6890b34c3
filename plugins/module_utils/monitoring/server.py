"""What the monitoring role writes for Prometheus and Alertmanager, from the inventory: the scrape targets (file
service discovery, one entry per host), Alertmanager's route and receiver, its cluster peers, and the check of
Prometheus durations the contract and the rules share.

Pure Python (stdlib only): the filters of plugins/filter/monitoring.py call it, the contract (contract/monitoring.py)
checks the same values before any change, the tests import it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import rules

# A host name or address Prometheus can dial: a DNS name, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")
_LABEL_VALUE = re.compile(r"[^\x00-\x1f\x7f]*")
# The groups whose hosts run node_exporter and are scraped: every node, the Slurm controller, the monitoring hosts.
SCRAPED = ("rdma_nodes", "slurm_controllers", "monitoring")


def duration_seconds(text) -> float:
    """Seconds of a Prometheus duration (`15s`, `1m`, `1h30m`, `15d`: the rules' own parser, rules.seconds);
    RuleError for anything else."""
    found = rules.seconds(text.strip()) if isinstance(text, str) else None
    if found is None:
        raise RuleError(f"is not a Prometheus duration such as 15s, 1m or 15d (got {text!r})")
    return found


def webhook_url(url) -> str:
    """The receiver's URL, when it is an http(s) URL with a host; RuleError naming what is wrong (never the URL:
    it may hold a password)."""
    if not isinstance(url, str) or not url.strip():
        raise RuleError("must be an http:// or https:// URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise RuleError("must be an http:// or https:// URL (its scheme is not http or https)")
    if not parts.hostname or any(c.isspace() for c in url.strip()):
        raise RuleError("must be an http:// or https:// URL with a host and no spaces")
    try:
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        raise RuleError("must be an http:// or https:// URL (its port is not a number)") from None
    return url.strip()


def target_problems(hosts: list, port) -> list:
    """(host, what is wrong) for every scraped host Prometheus could not reach as its own target: an address that is
    no host name or address, or one address and port two hosts share. hosts: [{name, address}]."""
    problems, owner = [], {}
    for host in sorted({str(h["name"]): h for h in hosts}.values(), key=lambda h: str(h["name"])):
        name, address = str(host["name"]), str(host.get("address") or host["name"])
        if not _HOST.fullmatch(address):
            problems.append((name, f"is {address!r}: no host name or address Prometheus can scrape"))
        elif f"{address}:{port}" in owner:
            problems.append((name, f"is {address}, as {owner[f'{address}:{port}']}'s: each host needs its own address"))
        else:
            owner[f"{address}:{port}"] = name
    return problems


def targets(hosts: list, port: int, cluster: str = "") -> list:
    """The file_sd document of one scrape job: one entry per host (`<address>:<port>`), labelled with the host's
    inventory name as `instance` (alerts name hosts, not addresses) and the cluster's name; sorted by name, so the
    same inventory writes the same file. hosts: [{name, address}]; a host listed twice is one target."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RuleError(f"port {port!r} is not a TCP port")
    if not _LABEL_VALUE.fullmatch(str(cluster)):
        raise RuleError(f"the cluster name {cluster!r} holds control characters")
    problems = target_problems(hosts, port)
    if problems:
        raise RuleError("; ".join(f"{name}: monitoring_address {why}" for name, why in problems))
    unique = sorted({str(h["name"]): h for h in hosts}.values(), key=lambda h: str(h["name"]))
    return [
        {
            "targets": [f"{h.get('address') or h['name']}:{port}"],
            "labels": {"instance": str(h["name"]), **({"cluster": str(cluster)} if cluster else {})},
        }
        for h in unique
    ]


def alertmanager_config(receiver_url: str, group_wait: str, group_interval: str, repeat_interval: str) -> dict:
    """Alertmanager's configuration: every alert to one webhook (resolved ones too), grouped by alert and host; no
    receiver URL: a receiver that sends nowhere (the alerts stay in Alertmanager's API and UI)."""
    for name, value in (("group_wait", group_wait), ("group_interval", group_interval), ("repeat", repeat_interval)):
        try:
            duration_seconds(value)
        except RuleError as exc:
            raise RuleError(f"the alert {name} {exc}") from None
    receiver: dict = {"name": "rdma-llm"}
    if receiver_url:
        receiver["webhook_configs"] = [{"url": webhook_url(receiver_url), "send_resolved": True}]
    return {
        "route": {
            "receiver": "rdma-llm",
            "group_by": ["alertname", "instance"],
            "group_wait": group_wait,
            "group_interval": group_interval,
            "repeat_interval": repeat_interval,
        },
        "receivers": [receiver],
    }


def alertmanager_peers(addresses: list, own: str, port: int = 9094) -> list:
    """Alertmanager's --cluster arguments: none of its gossip with one monitoring host (an empty listen address turns
    clustering off), else every other monitoring host as a peer on the gossip port (Alertmanager's default 9094)."""
    others = sorted({str(a) for a in addresses if str(a) != str(own)})
    if not others:
        return ["--cluster.listen-address="]
    return [f"--cluster.listen-address=0.0.0.0:{port}"] + [f"--cluster.peer={a}:{port}" for a in others]


def scrape_hosts(groups: dict, hostvars: dict, only: tuple = SCRAPED) -> list:
    """[{name, address}] of every host of SCRAPED (or of the groups `only` names; a group the inventory lacks adds
    none), in the inventory's order: the address is the host's `monitoring_address`, else its `ansible_host`, else
    its name."""
    names = dict.fromkeys(h for g in ([only] if isinstance(only, str) else only) for h in groups.get(g) or [])
    out = []
    for name in names:
        own = hostvars.get(name) or {}
        out.append({"name": name, "address": own.get("monitoring_address") or own.get("ansible_host") or name})
    return out


def prometheus_urls(groups: dict, hostvars: dict, port) -> list:
    """Each monitoring host's Prometheus, `http://<address>:<port>` (an IPv6 address in brackets): what a run's
    report links to."""
    out = []
    for host in scrape_hosts(groups, hostvars, "monitoring"):
        address = str(host["address"])
        if ":" in address and not address.startswith("["):
            address = f"[{address}]"
        out.append(f"http://{address}:{int(port)}")
    return out


FILTERS = {
    "monitoring_prometheus_urls": prometheus_urls,
    "monitoring_scrape_hosts": scrape_hosts,
    "monitoring_targets": targets,
    "monitoring_alertmanager_config": alertmanager_config,
    "monitoring_alertmanager_peers": alertmanager_peers,
}
