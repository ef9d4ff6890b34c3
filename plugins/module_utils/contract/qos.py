"""The inventory contract's QoS rules: one type per kind of value (contract/types.py), one rule per property
(classes distinct, shares adding up to 100, one shared value on every host, the hosts agreeing with every switch),
over every prefix that carries the values (the shared cluster_*, the hosts' rdma_qos_*, the switches'
nxos_roce_qos_*: their values as the switch play will get them, read like any switch variable).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    ALL,
    NODES,
    SWITCHES,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import (
    DSCP,
    PERCENT,
    PRIORITY,
    PROFILE,
    Check,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import RENDERED as NXOS_RENDERED
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import nxos_roce_qos_validate

QOS_CLASSES = ("roce", "cnp", "tcp")
# Per prefix: whose hosts carry it, the (RoCE, CNP, fabric TCP) DSCPs and priorities, the (RoCE, fabric TCP,
# default) bandwidth shares.
QOS_PREFIXES: dict[str, tuple[str, dict[str, tuple[str, str, str]]]] = {
    "cluster_": (
        ALL,
        {
            "dscp": ("cluster_roce_dscp", "cluster_cnp_dscp", "cluster_tcp_dscp"),
            "priority": ("cluster_nodrop_cos", "cluster_cnp_cos", "cluster_tcp_cos"),
            "share": (
                "cluster_roce_bandwidth_percent",
                "cluster_tcp_bandwidth_percent",
                "cluster_default_bandwidth_percent",
            ),
        },
    ),
    "rdma_qos_": (
        NODES,
        {
            "dscp": ("rdma_qos_roce_dscp", "rdma_qos_cnp_dscp", "rdma_qos_tcp_dscp"),
            "priority": ("rdma_qos_pfc_priority", "rdma_qos_cnp_priority", "rdma_qos_tcp_priority"),
            "share": (
                "rdma_qos_roce_bandwidth_percent",
                "rdma_qos_tcp_bandwidth_percent",
                "rdma_qos_default_bandwidth_percent",
            ),
        },
    ),
    "nxos_roce_qos_": (
        SWITCHES,
        {
            "dscp": ("nxos_roce_qos_roce_dscp", "nxos_roce_qos_cnp_dscp", "nxos_roce_qos_tcp_dscp"),
            "priority": ("nxos_roce_qos_nodrop_cos", "nxos_roce_qos_cnp_qos_group", "nxos_roce_qos_tcp_qos_group"),
            "share": (
                "nxos_roce_qos_roce_bandwidth_percent",
                "nxos_roce_qos_tcp_bandwidth_percent",
                "nxos_roce_qos_default_bandwidth_percent",
            ),
        },
    ),
}
QOS_TYPES = {"dscp": DSCP, "priority": PRIORITY, "share": PERCENT}
# Why two classes may not share a DSCP or a priority: (class, the class it collides with) -> kind -> why.
QOS_CLASH = {
    ("cnp", "roce"): {"dscp": "CNPs need their own DSCP", "priority": "CNPs need their own strict-priority class"},
    ("tcp", "roce"): {
        "dscp": "only RoCE may carry the no-drop class's DSCP (cluster_tcp_lossless: true marks fabric TCP with it "
        "instead)",
        "priority": "fabric TCP needs its own lossy class, not the no-drop one",
    },
    ("tcp", "cnp"): {
        "dscp": "fabric TCP must not ride the CNPs' strict-priority class",
        "priority": "fabric TCP must not ride the CNPs' strict-priority class",
    },
}
# The cluster_* QoS values every host, switch and node, must share.
QOS_SHARED = (
    "cluster_qos_profile",
    *(name for kind in ("dscp", "priority", "share") for name in QOS_PREFIXES["cluster_"][1][kind]),
    "cluster_tcp_lossless",
    "cluster_nccl_ib_qps_per_connection",
)


def _switch_rejected(inv: Inventory, sw: str) -> set[str]:
    """The switch variables its own rules (nxos_roce_qos_validate) refuse: rule switch_values reports them."""
    rendered = {n: inv.get(sw, n) for n in NXOS_RENDERED if inv.get(sw, n) is not None}
    rejected = {p["var"] for p in nxos_roce_qos_validate(rendered)}
    shares = {f"nxos_roce_qos_{q}_bandwidth_percent" for q in ("roce", "tcp", "default")}
    return rejected | shares if rejected & shares else rejected  # the switch reports the pair under one name


def _qos_value(inv: Inventory, host: str, name: str, check: Check, rejected: set[str]) -> frozenset | None:
    """A QoS value as a set (a switch classifies several RoCE DSCPs), or None where it is unset, not of its type or
    refused by the switch's own rules: each of those is reported once, where it is checked (no cascades)."""
    value = inv.get(host, name)
    items = value if isinstance(value, list) else [value]
    if value is None or name in rejected or not items or any(check(v) for v in items):
        return None
    return frozenset(v if as_int(v) is None else as_int(v) for v in items)


def _shown(value: frozenset) -> Any:
    return next(iter(value)) if len(value) == 1 else sorted(value)


def _on_hosts(found: dict[tuple[str, str], list[str]], hosts: list[str]) -> Iterator[Problem]:
    """Each problem on the hosts that have it, or on `all` when every host of the group does."""
    for (name, message), who in found.items():
        for host in [ALL] if len(who) == len(hosts) > 1 else who:
            yield Problem(host, name, message)


def _qos_values(inv: Inventory, host: str, prefix: str, kind: str) -> tuple[frozenset | None, ...]:
    group, names = QOS_PREFIXES[prefix]
    rejected = _switch_rejected(inv, host) if group == SWITCHES else set()
    return tuple(_qos_value(inv, host, n, QOS_TYPES[kind], rejected) for n in names[kind])


def qos_shared_with_switch(inv: Inventory) -> Iterator[Problem]:
    hosts = inv.members(ALL)
    for name in QOS_SHARED:
        values = {repr(inv.get(h, name)) for h in hosts if inv.get(h, name) is not None}
        if len(values) > 1:
            yield Problem(
                ALL,
                name,
                f"differs between hosts ({', '.join(sorted(values))}): the switch and every node must use one value",
            )


def _clashes(values: tuple[frozenset | None, ...]) -> list[tuple[int, int]]:
    """(i, j), j < i: classes i and j share a value."""
    return [
        (i, j)
        for i in range(len(values))
        for j in range(i)
        if values[i] is not None and values[j] is not None and values[i] & values[j]
    ]


QosFinding = dict[tuple, tuple[str, str, tuple]]  # property -> (variable, message, the values it is about)


def _qos_problems(inv: Inventory, findings: Callable[[Inventory, str, str], QosFinding]) -> Iterator[Problem]:
    """The problems findings(inv, host, prefix) finds under every prefix, each on its hosts or `all`. A role's
    finding that repeats the cluster_* one of its host with the same values (the role's default is that value) is
    not reported again: the cluster_* problem covers the role's variable."""
    found: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    covers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for prefix, (group, _) in QOS_PREFIXES.items():
        hosts = inv.members(group)
        for host in hosts:
            shared = findings(inv, host, "cluster_") if prefix != "cluster_" else {}
            for key, (name, message, values) in findings(inv, host, prefix).items():
                if key in shared and shared[key][2] == values:
                    covers[shared[key][:2]].add(name)
                else:
                    found.setdefault((name, message), (hosts, []))[1].append(host)
    for (name, message), (hosts, who) in found.items():
        for host in [ALL] if len(who) == len(hosts) > 1 else who:
            yield Problem(host, name, message, tuple(sorted(covers[(name, message)])))


def class_clashes(inv: Inventory, host: str, prefix: str) -> QosFinding:
    names = QOS_PREFIXES[prefix][1]
    out: QosFinding = {}
    for kind in ("dscp", "priority"):
        values = _qos_values(inv, host, prefix, kind)
        for i, j in _clashes(values):
            other = names[kind][j]
            where = f"is in {other} {_shown(values[j])}" if len(values[j]) > 1 else f"equals {other}"
            why = QOS_CLASH[(QOS_CLASSES[i], QOS_CLASSES[j])][kind]
            out[(kind, i, j)] = (names[kind][i], f"{_shown(values[i])} {where}: {why}", (values[i], values[j]))
    return out


def shares_off(inv: Inventory, host: str, prefix: str) -> QosFinding:
    names = QOS_PREFIXES[prefix][1]["share"]
    values = _qos_values(inv, host, prefix, "share")
    if None in values or sum(map(_shown, values)) == 100:
        return {}
    roce, tcp, default = map(_shown, values)
    message = (
        f"{roce} + {names[1]} {tcp} + {names[2]} {default} must add up to 100 (the egress shares of the RoCE, fabric "
        "TCP and default classes)"
    )
    return {("share",): (names[0], message, values)}


def qos_classes_distinct(inv: Inventory) -> Iterator[Problem]:
    """RoCE, CNPs and fabric TCP: three DSCPs, three priorities, under every prefix."""
    yield from _qos_problems(inv, class_clashes)


def qos_shares_add_up(inv: Inventory) -> Iterator[Problem]:
    """The RoCE, fabric TCP and default shares add up to 100 under every prefix: the hosts' ETS and the switch's
    queuing policy split what strict priority (the CNPs) leaves."""
    yield from _qos_problems(inv, shares_off)


# The hosts' QoS (rdma_qos) against each switch's (nxos_roce_qos): (host variable, switch variable, their type).
QOS_HOST_SWITCH = (
    ("rdma_qos_profile", "nxos_roce_qos_profile", PROFILE),
    ("rdma_qos_pfc_priority", "nxos_roce_qos_nodrop_cos", PRIORITY),
    ("rdma_qos_cnp_priority", "nxos_roce_qos_cnp_qos_group", PRIORITY),
    ("rdma_qos_tcp_priority", "nxos_roce_qos_tcp_qos_group", PRIORITY),
    ("rdma_qos_cnp_dscp", "nxos_roce_qos_cnp_dscp", DSCP),
    ("rdma_qos_tcp_dscp", "nxos_roce_qos_tcp_dscp", DSCP),
    ("rdma_qos_roce_bandwidth_percent", "nxos_roce_qos_roce_bandwidth_percent", PERCENT),
    ("rdma_qos_tcp_bandwidth_percent", "nxos_roce_qos_tcp_bandwidth_percent", PERCENT),
    ("rdma_qos_default_bandwidth_percent", "nxos_roce_qos_default_bandwidth_percent", PERCENT),
)


def _host_qos_problems(inv: Inventory, host: str) -> Iterator[tuple[str, str]]:
    roce = _qos_value(inv, host, "rdma_qos_roce_dscp", DSCP, set())
    for sw in inv.members(SWITCHES):
        rejected = _switch_rejected(inv, sw)
        classified = _qos_value(inv, sw, "nxos_roce_qos_roce_dscp", DSCP, rejected)
        if roce is not None and classified is not None and not roce <= classified:
            dscps = inv.get(sw, "nxos_roce_qos_roce_dscp")
            yield "rdma_qos_roce_dscp", f"{_shown(roce)} is not classified by {sw} (nxos_roce_qos_roce_dscp {dscps})"
        for name, sw_name, check in QOS_HOST_SWITCH:
            mine = _qos_value(inv, host, name, check, set())
            theirs = _qos_value(inv, sw, sw_name, check, rejected)
            if mine is not None and theirs is not None and mine != theirs:
                yield name, f"{_shown(mine)} differs from {sw}'s {sw_name} {_shown(theirs)}: host and switch must agree"


def host_qos(inv: Inventory) -> Iterator[Problem]:
    """The hosts' QoS is what every switch expects (`all` when every node disagrees alike)."""
    nodes = inv.members(NODES)
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host in nodes:
        for name, message in _host_qos_problems(inv, host):
            seen[(name, message)].append(host)
    yield from _on_hosts(seen, nodes)
