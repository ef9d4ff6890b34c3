"""The inventory contract of rdma-llm-cluster (docs/design.md), checked once, every error at once.

Pure Python (stdlib only): pytest imports this file directly, and the action plugin
plugins/action/inventory_contract.py feeds it every host's variables (each role's
defaults under the inventory's values, templated) and fails the play with what `check()` returns.

Each error names the host (or `all` for a value every host shares) and the variable:
``<host>: <variable> <what is wrong>``.

Adding a rule (docs/design.md, "Adding a rule to the contract"): a type/range/choice of one variable is
one row in VARIABLES; anything across fields or hosts is one function decorated with @rule. Either way,
add one row to BAD in tests/unit/plugins/module_utils/test_inventory_contract.py with the exact message.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.fabric import fabric_cidr
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import (
    DSCP_RANGE,
    PERCENT_RANGE,
    PRIORITY_RANGE,
    PROFILES,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import conf as slurm_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import values as nxos_validate
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import nxos_roce_qos_validate

NODES = "rdma_nodes"
SUBNET_MANAGERS = "subnet_managers"
SWITCHES = "switches"
UNGROUPED = "ungrouped"
ALL = "all"  # a row that applies to nodes and switches alike

# Fabric MTU per link layer (and IPoIB mode): the one place these ranges live.
# IPv4 needs 576; Nexus ports carry up to 9216; IPoIB datagram mode is the IB MTU (4096) less the
# 4-byte IPoIB header; connected mode goes up to 65520.
MTU_RANGES: dict[tuple[str, str], tuple[int, int]] = {
    ("ethernet", "datagram"): (576, 9216),
    ("infiniband", "datagram"): (576, 4092),
    ("infiniband", "connected"): (576, 65520),
}
IPV6_MTU_MIN = 1280
INTERFACE_KEYS = ("name", "addresses", "mtu", "routes", "nameservers", "ipoib_mode")
ROUTE_KEYS = ("to", "via", "metric")
NAMESERVER_KEYS = ("addresses", "search")
# netplan accepts these interface names (Linux IFNAMSIZ - 1 characters).
IFNAME_RE = r"^[A-Za-z0-9_.-]{1,15}$"
DNS_LABEL_RE = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
DOMAIN_RE = (
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@dataclass(frozen=True, order=True)
class Problem:
    host: str
    variable: str
    message: str
    # Role variables whose value repeats this one's (their default is this cluster_* value): reported once, here, and
    # still seen by a role that checks its own variables alone (check()).
    covers: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.host}: {self.variable} {self.message}"


@dataclass
class Inventory:
    """What the validator sees: group members and each host's effective, templated variables."""

    groups: dict[str, list[str]]
    hostvars: dict[str, dict[str, Any]]
    # host -> {variable: why it could not be read} (an undefined name, a vault without its password).
    unreadable: dict[str, dict[str, str]] = field(default_factory=dict)
    # Groups that must have hosts: the nodes for a cluster run; the switches for the switch role alone.
    required_groups: tuple[str, ...] = (NODES,)

    def members(self, group: str) -> list[str]:
        if group == ALL:
            return list(dict.fromkeys(self.members(NODES) + self.members(SWITCHES)))
        return list(self.groups.get(group) or [])

    def get(self, host: str, name: str, default: Any = None) -> Any:
        return self.hostvars.get(host, {}).get(name, default)


# ---------------------------------------------------------------- value checks (return what is wrong)

Check = Callable[[Any], str | None]


def integer(lo: int | None = None, hi: int | None = None, even: bool = False) -> Check:
    span = f" {lo}-{hi}" if lo is not None and hi is not None else (f" >= {lo}" if lo is not None else "")
    want = f"must be {'an even' if even else 'an'} integer{span}"

    def check(value: Any) -> str | None:
        n = as_int(value)
        bad = n is None or (lo is not None and n < lo) or (hi is not None and n > hi) or (even and n % 2)
        return f"{want} (got {value!r})" if bad else None

    return check


TRUE_WORDS, FALSE_WORDS = ("true", "yes"), ("false", "no")


def boolean() -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, bool) or str(value).lower() in TRUE_WORDS + FALSE_WORDS
        return None if ok else f"must be true or false (got {value!r})"

    return check


def is_true(value: Any) -> bool:
    """A flag as boolean() accepts it, read as Ansible reads those words."""
    return value is True or str(value).lower() in TRUE_WORDS


def boolean_or(*options: str) -> Check:
    """true or false, or one of the words `options` (rdma_modules_gpudirect: auto)."""
    flag = boolean()

    def check(value: Any) -> str | None:
        if value in options or flag(value) is None:
            return None
        return f"must be true, false or {' or '.join(options)} (got {value!r})"

    return check


def choice(*options: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in options else f"must be one of {', '.join(options)} (got {value!r})"

    return check


def text(pattern: str = r"^[^\x00-\x1f\x7f]+$", what: str = "a non-empty single-line string") -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, str) and re.fullmatch(pattern, value) is not None
        return None if ok else f"must be {what} (got {value!r})"

    return check


def list_of(item: Check, nonempty: bool = False, what: str = "a list") -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"must be {what} (got {value!r})"
        if nonempty and not value:
            return f"must be a non-empty {what.removeprefix('a ')}"
        for i, v in enumerate(value):
            why = item(v)
            if why:
                return f"[{i}] {why}"
        return None

    return check


def mapping() -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, dict) else f"must be a mapping of name to value (got {value!r})"

    return check


def networks_by_family() -> Check:
    """{ipv4: [CIDR ...], ipv6: [CIDR ...]}: network addresses (no host bits) of the family their key names."""

    def check(value: Any) -> str | None:
        want = f"must be {{ipv4: [CIDR ...], ipv6: [CIDR ...]}} of network addresses (got {value!r})"
        if not isinstance(value, dict) or set(value) != {"ipv4", "ipv6"}:
            return want
        for key, version in (("ipv4", 4), ("ipv6", 6)):
            if not isinstance(value[key], list):
                return want
            for cidr in value[key]:
                try:
                    ok = isinstance(cidr, str) and ipaddress.ip_network(cidr, strict=True).version == version
                except ValueError:
                    ok = False
                if not ok:
                    return f"{key}: {cidr!r} is not an IPv{version} network in CIDR notation (no host bits)"
        return None

    return check


def opensm_ports() -> Check:
    def check(value: Any) -> str | None:
        guids = (
            isinstance(value, list)
            and value
            and all(isinstance(v, str) and re.fullmatch(r"0x[0-9a-fA-F]{16}", v) for v in value)
        )
        return (
            None
            if value == "ALL" or guids
            else f"must be ALL or a list of 0x<16 hex digits> port GUIDs (got {value!r})"
        )

    return check


# The one type of each kind of QoS value (ranges in module_utils/host/qos_values.py): every row and rule that carries
# one uses it.
DSCP = integer(*DSCP_RANGE)
PRIORITY = integer(*PRIORITY_RANGE)
PERCENT = integer(*PERCENT_RANGE)
PROFILE = choice(*PROFILES)
# NCCL_IB_QPS_PER_CONNECTION: 1 (NCCL's default) to NCCL's NCCL_IB_MAX_QPS (src/transport/net_ib).
QPS_PER_CONNECTION = integer(1, 128)

# ---------------------------------------------------------------- variables: one row per variable


@dataclass(frozen=True)
class Var:
    name: str
    group: str  # whose hosts carry it: rdma_nodes, switches or all
    check: Check
    required: bool = False


ABS_PATH = text(r"^/[^\x00-\x1f\x7f]*$", "an absolute path")
VARIABLES: tuple[Var, ...] = (
    # Shared cluster_* variables (docs/design.md, "Inventory contract").
    Var("cluster_name", ALL, text()),
    Var("cluster_fabric_interfaces", NODES, list_of(mapping(), nonempty=True, what="a list of interfaces"), True),
    Var("cluster_rdma_devices", NODES, list_of(text(r"^[A-Za-z0-9_.-]+$", "an RDMA device name"))),
    Var("cluster_link_layer", ALL, choice("ethernet", "infiniband")),
    Var("cluster_node_rank", NODES, integer(0)),
    # QoS (group_vars/all/qos.yml): the types here; distinct classes, shares and agreement in the QoS rules below.
    Var("cluster_qos_profile", ALL, PROFILE),
    Var("cluster_roce_dscp", ALL, DSCP),
    Var("cluster_cnp_dscp", ALL, DSCP),
    Var("cluster_tcp_dscp", ALL, DSCP),
    Var("cluster_nodrop_cos", ALL, PRIORITY),
    Var("cluster_cnp_cos", ALL, PRIORITY),
    Var("cluster_tcp_cos", ALL, PRIORITY),
    Var("cluster_roce_bandwidth_percent", ALL, PERCENT),
    Var("cluster_tcp_bandwidth_percent", ALL, PERCENT),
    Var("cluster_default_bandwidth_percent", ALL, PERCENT),
    Var("cluster_tcp_lossless", ALL, boolean()),
    Var("cluster_nccl_ib_qps_per_connection", ALL, QPS_PER_CONNECTION),
    Var("cluster_train_venv", NODES, ABS_PATH),
    # common
    Var("common_hostname", NODES, text(DNS_LABEL_RE, "a hostname (letters, digits, '-', at most 63)")),
    Var("common_hosts_group", NODES, text(r"^[A-Za-z0-9_]+$", "an inventory group name")),
    Var("common_hosts_fabric_suffix", NODES, text(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,40}[A-Za-z0-9])?$", "a DNS label")),
    Var("common_hosts_alias_hostname", NODES, boolean()),
    Var("common_hosts_drop_loopback_hostname", NODES, boolean()),
    # rdma_netplan
    Var(
        "rdma_netplan_file",
        NODES,
        text(r"^/etc/netplan/[A-Za-z0-9_.-]+\.yaml$", "a .yaml file directly in /etc/netplan"),
    ),
    Var("rdma_netplan_renderer", NODES, choice("networkd", "NetworkManager")),
    Var("rdma_netplan_install", NODES, boolean()),
    Var("rdma_netplan_package", NODES, text(r"^[a-z0-9][a-z0-9.+-]+$", "a Debian package name")),
    Var("rdma_netplan_apply", NODES, boolean()),
    Var("rdma_netplan_peers_group", NODES, text(r"^[A-Za-z0-9_]+$", "an inventory group name")),
    Var("rdma_netplan_check_peers", NODES, boolean()),
    Var("rdma_netplan_connect_timeout", NODES, integer(1)),
    Var("rdma_netplan_check_retries", NODES, integer(1)),
    Var("rdma_netplan_revert_after", NODES, integer(0)),
    # rdma_modules
    Var("rdma_modules_list", NODES, list_of(text(r"^[a-z0-9_-]+$", "a module name (a-z, 0-9, '_', '-')"), True)),
    Var(
        "rdma_modules_file",
        NODES,
        text(
            r"^/[A-Za-z0-9_./-]*/modules-load\.d/[A-Za-z0-9_.-]+\.conf$", "a .conf file in a modules-load.d directory"
        ),
    ),
    Var("rdma_modules_load", NODES, boolean()),
    Var("rdma_modules_gpudirect", NODES, boolean_or("auto")),
    Var("rdma_modules_gpudirect_list", NODES, list_of(text(r"^[a-z0-9_-]+$", "a module name (a-z, 0-9, '_', '-')"))),
    # rdma_stack
    Var("rdma_stack_packages", NODES, list_of(text(r"^[a-z0-9][a-z0-9.+-]+$", "a Debian package name"))),
    Var("rdma_stack_apt_cache_valid_time", NODES, integer(0)),
    Var("rdma_stack_link_layer", NODES, choice("ethernet", "infiniband")),
    Var("rdma_stack_opensm_force", NODES, boolean()),
    Var("rdma_stack_opensm_group", NODES, text(r"^[A-Za-z0-9_]+$", "an inventory group name")),
    Var("rdma_stack_opensm_priority", NODES, integer(0, 15)),
    Var("rdma_stack_opensm_ports", NODES, opensm_ports()),
    Var("rdma_stack_opensm_options", NODES, mapping()),
    Var("rdma_stack_expected_devices", NODES, list_of(text(r"^[A-Za-z0-9_.-]+$", "an RDMA device name"))),
    Var("rdma_stack_expected_devices_strict", NODES, boolean()),
    Var("rdma_stack_local_fact", NODES, boolean()),
    # rdma_qos (host QoS; distinct classes, shares and switch agreement: the QoS rules below)
    Var("rdma_qos_interfaces", NODES, list_of(text(IFNAME_RE, "an interface name"))),
    Var("rdma_qos_devices", NODES, list_of(text(r"^[A-Za-z0-9_.-]+$", "an RDMA device name"))),
    Var("rdma_qos_link_layer", NODES, choice("ethernet", "infiniband")),
    Var("rdma_qos_profile", NODES, PROFILE),
    Var("rdma_qos_roce_dscp", NODES, DSCP),
    Var("rdma_qos_cnp_dscp", NODES, DSCP),
    Var("rdma_qos_tcp_dscp", NODES, DSCP),
    Var("rdma_qos_pfc_priority", NODES, PRIORITY),
    Var("rdma_qos_cnp_priority", NODES, PRIORITY),
    Var("rdma_qos_tcp_priority", NODES, PRIORITY),
    Var("rdma_qos_roce_bandwidth_percent", NODES, PERCENT),
    Var("rdma_qos_tcp_bandwidth_percent", NODES, PERCENT),
    Var("rdma_qos_default_bandwidth_percent", NODES, PERCENT),
    Var("rdma_qos_tcp_lossless", NODES, boolean()),
    Var("rdma_qos_nccl_ib_qps_per_connection", NODES, QPS_PER_CONNECTION),
    Var("rdma_qos_ib_sl", NODES, integer(0, 15)),
    Var("rdma_qos_dcb", NODES, boolean()),
    Var("rdma_qos_dcqcn", NODES, boolean()),
    Var("rdma_qos_roce_tos", NODES, boolean()),
    Var("rdma_qos_mark_tcp", NODES, boolean()),
    # Rendered into the nftables rules: network addresses only (no injection).
    Var("rdma_qos_mark_networks", NODES, networks_by_family()),
    Var("rdma_qos_local_fact", NODES, boolean()),
    # node_health (rdma-node-check and its config; the thresholds' keys and values: rule node_health_thresholds)
    Var("node_health_interfaces", NODES, list_of(mapping(), nonempty=True, what="a list of interfaces")),
    Var("node_health_link_layer", NODES, choice("ethernet", "infiniband")),
    Var("node_health_devices", NODES, list_of(text(r"^[A-Za-z0-9_.-]+$", "an RDMA device name"))),
    Var("node_health_modules", NODES, list_of(text(r"^[a-z0-9_-]+$", "a module name (a-z, 0-9, '_', '-')"))),
    Var("node_health_gpus", NODES, integer(0)),
    Var("node_health_line_rate_gbps", NODES, integer(0)),
    Var("node_health_thresholds", NODES, mapping()),
    Var("node_health_venv", NODES, ABS_PATH),
    Var("node_health_baseline", NODES, boolean()),
    Var("node_health_command", NODES, ABS_PATH),
    Var("node_health_slurm_command", NODES, ABS_PATH),
    Var("node_health_config_file", NODES, ABS_PATH),
    Var("node_health_state_dir", NODES, ABS_PATH),
    Var("node_health_check_now", NODES, boolean()),
    # fabric_firewall (its ports leave SSH alone: rule fabric_firewall_leaves_ssh)
    Var("fabric_firewall_enabled", NODES, boolean()),
    Var("fabric_firewall_interfaces", NODES, list_of(mapping(), nonempty=True, what="a list of interfaces")),
    Var("fabric_firewall_group", NODES, text(r"^[A-Za-z0-9_]+$", "an inventory group name")),
    Var("fabric_firewall_extra_ports", NODES, list_of(integer(1, 65535))),
    Var(
        "fabric_firewall_train_group",
        NODES,
        text(r"^[a-z_][a-z0-9_-]{0,31}$", "a group name (a-z, 0-9, '_', '-', at most 32, not starting with a digit)"),
    ),
    # playbooks/reset.yml: packages the project installed go only on request
    Var("rdma_netplan_reset_packages", NODES, boolean()),
    Var("rdma_stack_reset_packages", NODES, boolean()),
    Var("rdma_qos_reset_packages", NODES, boolean()),
    Var("fabric_firewall_reset_packages", NODES, boolean()),
    # nxos_roce_qos: ranges, names and CLI safety of the rendered values are the role's own rules
    # (switch_values below); the booleans are checked here. The switch play runs last: checked first here.
    Var("nxos_roce_qos_pfc_watchdog", SWITCHES, boolean()),
    Var("nxos_roce_qos_lldp", SWITCHES, boolean()),
    Var("nxos_roce_qos_pfc_watchdog_per_port", SWITCHES, boolean()),
    Var("nxos_roce_qos_save", SWITCHES, boolean()),
    Var("nxos_roce_qos_backup", SWITCHES, boolean()),
)

# Variables the rules read besides the rows above; the action plugin templates exactly these.
EXTRA_VARIABLES = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_password",
    "ansible_ssh_pass",
    "ansible_ssh_private_key_file",
)


def needed_variables() -> list[str]:
    qos = [n for _, names in QOS_PREFIXES.values() for trio in names.values() for n in trio]
    qos += [sw for _, sw, _ in QOS_HOST_SWITCH]
    return list(
        dict.fromkeys(
            [v.name for v in VARIABLES] + list(EXTRA_VARIABLES) + list(NXOS_RENDERED) + qos + list(SLURM_VARIABLES)
        )
    )


# ---------------------------------------------------------------- rules across fields and hosts

Rule = Callable[[Inventory], Iterable[Problem]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    """Register a cross-field rule; rules run in the order they are written."""
    RULES.append(fn)
    return fn


@rule
def unreadable_variables(inv: Inventory) -> Iterator[Problem]:
    for host, why in sorted(inv.unreadable.items()):
        for name, err in sorted(why.items()):
            hint = (
                " (give the vault password: --vault-id <id>@prompt or --ask-vault-pass)"
                if "vault" in err.lower() or "decrypt" in err.lower()
                else ""
            )
            yield Problem(host, name, f"cannot be read: {err}{hint}")


@rule
def group_membership(inv: Inventory) -> Iterator[Problem]:
    nodes = inv.members(NODES)
    for group in inv.required_groups:
        if not inv.members(group):
            yield Problem("inventory", f"group {group}", "has no hosts (a misspelt group name leaves it empty)")
    for host in inv.members(UNGROUPED):
        yield Problem(
            host, "groups", f"puts the host in no group of the contract ({NODES}, {SUBNET_MANAGERS}, {SWITCHES})"
        )
    for host in inv.members(SUBNET_MANAGERS):
        if host not in nodes:
            yield Problem(host, f"group {SUBNET_MANAGERS}", f"holds a host that is not in {NODES}")
    for host in inv.members(SWITCHES):
        if host in nodes:
            yield Problem(host, f"group {SWITCHES}", f"holds a host that is also in {NODES}")


@rule
def variable_rows(inv: Inventory) -> Iterator[Problem]:
    for var in VARIABLES:
        hosts = inv.members(var.group)
        values: dict[str, Any] = {}
        for host in hosts:
            if var.name in inv.unreadable.get(host, {}):
                continue
            if var.name not in inv.hostvars.get(host, {}):
                if var.required:
                    yield Problem(host, var.name, "is required (see docs/design.md)")
                continue
            values[host] = inv.hostvars[host][var.name]
        yield from _per_value(var.name, values, var.check, len(hosts))


def _per_value(name: str, values: dict[str, Any], check: Check, n_hosts: int) -> Iterator[Problem]:
    """One problem per distinct bad value: `all` when every host has the same one (group_vars/all)."""
    by_value: dict[str, list[str]] = defaultdict(list)
    for host, value in values.items():
        by_value[repr(value)].append(host)
    for hosts in by_value.values():
        why = check(values[hosts[0]])
        if not why:
            continue
        if len(hosts) == n_hosts and n_hosts > 1:
            yield Problem(ALL, name, why)
        else:
            for host in hosts:
                yield Problem(host, name, why)


def _iface_label(iface: Any, i: int) -> str:
    name = iface.get("name") if isinstance(iface, dict) else None
    return f"cluster_fabric_interfaces[{name if isinstance(name, str) and name else i}]"


def _interfaces(inv: Inventory, host: str) -> list[dict]:
    ifaces = inv.get(host, "cluster_fabric_interfaces")
    return [i for i in ifaces if isinstance(i, dict)] if isinstance(ifaces, list) else []


def _link_layer(inv: Inventory, host: str) -> str:
    # rdma_stack_link_layer carries the effective value (cluster_link_layer or the role's default).
    layer = inv.get(host, "rdma_stack_link_layer", inv.get(host, "cluster_link_layer"))
    return layer if layer in ("ethernet", "infiniband") else "ethernet"


def _interface(s: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    """A host address with an explicit prefix length (netaddr and netplan read a bare address as /32)."""
    if not isinstance(s, str) or not re.fullmatch(r"[0-9A-Fa-f:.]+/[0-9]{1,3}", s):
        return None
    try:
        iface = ipaddress.ip_interface(s)
    except ValueError:
        return None
    net = iface.network
    if net.num_addresses > 2 and iface.ip in (net.network_address, net.broadcast_address) and iface.version == 4:
        return None
    return iface


def _address(s: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(s) if isinstance(s, str) else None
    except ValueError:
        return None


def _network(s: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    if not isinstance(s, str) or "/" not in s:
        return None
    try:
        return ipaddress.ip_network(s, strict=True)
    except ValueError:
        return None


@rule
def fabric_interfaces(inv: Inventory) -> Iterator[Problem]:
    """Shape, names, addresses, MTU (by link layer and address family), routes and resolvers."""
    for host in inv.members(NODES):
        ifaces = inv.get(host, "cluster_fabric_interfaces")
        if not isinstance(ifaces, list):
            continue
        layer = _link_layer(inv, host)
        names = Counter(i.get("name") for i in ifaces if isinstance(i, dict))
        for i, iface in enumerate(ifaces):
            if not isinstance(iface, dict):
                continue
            label = _iface_label(iface, i)
            unknown = sorted(set(iface) - set(INTERFACE_KEYS))
            if unknown:
                yield Problem(
                    host, label, f"has unknown key(s) {', '.join(unknown)} (known: {', '.join(INTERFACE_KEYS)})"
                )
            name = iface.get("name")
            if not isinstance(name, str) or not re.fullmatch(IFNAME_RE, name):
                yield Problem(
                    host, f"{label}.name", f"must be a Linux interface name (at most 15 of A-Za-z0-9_.-), got {name!r}"
                )
            elif names[name] > 1:
                yield Problem(host, f"{label}.name", "is listed twice")
            addrs = iface.get("addresses")
            parsed = []
            if not isinstance(addrs, list) or not addrs:
                yield Problem(
                    host, f"{label}.addresses", "must list at least one address in CIDR form (192.168.250.201/24)"
                )
            else:
                for a in addrs:
                    ip = _interface(a)
                    if ip is None:
                        yield Problem(
                            host,
                            f"{label}.addresses",
                            f"has {a!r}, which is not a host address with a prefix length such as 192.168.250.201/24",
                        )
                    else:
                        parsed.append(ip)
            yield from _mtu(host, label, iface, layer, parsed)
            yield from _routes(host, label, iface, parsed)
            yield from _nameservers(host, label, iface)


def _mtu(host: str, label: str, iface: dict, layer: str, addrs: list) -> Iterator[Problem]:
    mode = iface.get("ipoib_mode", "datagram")
    if "ipoib_mode" in iface and (layer != "infiniband" or mode not in ("datagram", "connected")):
        yield Problem(
            host,
            f"{label}.ipoib_mode",
            f"must be datagram or connected, and only on an infiniband fabric (got {mode!r} on {layer})",
        )
        return
    if iface.get("mtu") is None:
        return
    lo, hi = MTU_RANGES[(layer, mode)]
    if any(a.version == 6 for a in addrs):
        lo = max(lo, IPV6_MTU_MIN)
    if integer(lo, hi)(iface["mtu"]):
        where = (
            layer + (f", IPoIB {mode} mode" if layer == "infiniband" else "") + (", IPv6" if lo == IPV6_MTU_MIN else "")
        )
        yield Problem(host, f"{label}.mtu", f"{iface['mtu']!r} must lie within {lo}-{hi} ({where})")


def _routes(host: str, label: str, iface: dict, addrs: list) -> Iterator[Problem]:
    routes = iface.get("routes")
    if routes is None:
        return
    if not isinstance(routes, list):
        yield Problem(host, f"{label}.routes", f"must be a list of routes (got {routes!r})")
        return
    for r in routes:
        if not isinstance(r, dict):
            yield Problem(host, f"{label}.routes", f"has {r!r}, which is not a route (to, via, metric)")
            continue
        to, via = r.get("to"), r.get("via")
        where = f"{label}.routes"
        prefix = f"has route to {to!r} via {via!r}:"
        unknown = sorted(set(r) - set(ROUTE_KEYS))
        if unknown:
            yield Problem(host, where, f"{prefix} unknown key(s) {', '.join(unknown)} (known: {', '.join(ROUTE_KEYS)})")
        if to in ("default", "0.0.0.0/0", "::/0"):
            yield Problem(
                host,
                where,
                f"{prefix} a default route over the fabric would take the management path; list the remote fabric "
                "networks instead",
            )
            continue
        net, gw = _network(to), _address(via)
        if net is None:
            yield Problem(host, where, f"{prefix} 'to' must be a network in CIDR form (192.168.251.0/24)")
        if gw is None:
            yield Problem(host, where, f"{prefix} 'via' must be an address")
        elif net is not None and net.version != gw.version:
            yield Problem(host, where, f"{prefix} 'to' and 'via' are of different address families")
        elif addrs and not any(a.version == gw.version and gw in a.network and gw != a.ip for a in addrs):
            yield Problem(
                host,
                where,
                f"{prefix} 'via' must be an address inside one of {', '.join(map(str, addrs))} (not the host's own)",
            )
        if r.get("metric") is not None and integer(0)(r["metric"]):
            yield Problem(host, where, f"{prefix} 'metric' must be a non-negative integer")


def _nameservers(host: str, label: str, iface: dict) -> Iterator[Problem]:
    ns = iface.get("nameservers")
    if ns is None:
        return
    if not isinstance(ns, dict):
        yield Problem(host, f"{label}.nameservers", f"must be a mapping with addresses and search (got {ns!r})")
        return
    unknown = sorted(set(ns) - set(NAMESERVER_KEYS))
    if unknown:
        yield Problem(
            host, f"{label}.nameservers", f"has unknown key(s) {', '.join(unknown)} (known: addresses, search)"
        )
    for a in ns.get("addresses") or []:
        if _address(a) is None:
            yield Problem(host, f"{label}.nameservers.addresses", f"has {a!r}, which is not an IP address")
    for d in ns.get("search") or []:
        if not isinstance(d, str) or not re.fullmatch(DOMAIN_RE, d):
            yield Problem(host, f"{label}.nameservers.search", f"has {d!r}, which is not a domain name")


def fabric_address(inv: Inventory, host: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    """The design's fabric address (module_utils/host/fabric.py), as an interface (address and prefix)."""
    cidr = fabric_cidr(_interfaces(inv, host))
    return _interface(cidr) if cidr is not None else None


@rule
def fabric_address_family(inv: Inventory) -> Iterator[Problem]:
    # netplan renders IPv6 addresses and routes, but the rendezvous endpoint, /etc/hosts and the RoCE
    # GID choice use the fabric address as IPv4: an IPv6 address is accepted after it, not as it.
    for host in inv.members(NODES):
        fa = fabric_address(inv, host)
        if fa is not None and fa.version == 6:
            label = _iface_label(_interfaces(inv, host)[0], 0)
            yield Problem(
                host,
                f"{label}.addresses",
                f"starts with {fa}: the fabric address (first address of the first interface) must be IPv4; IPv6 "
                "addresses may follow it",
            )


@rule
def unique_across_nodes(inv: Inventory) -> Iterator[Problem]:
    owners: dict[str, list[str]] = defaultdict(list)
    for host in inv.members(NODES):
        for iface in _interfaces(inv, host):
            for a in iface.get("addresses") or []:
                ip = _interface(a)
                if ip is not None:
                    owners[str(ip.ip)].append(host)
    for addr, hosts in owners.items():
        if len(hosts) > 1:
            for host in sorted(set(hosts)):
                yield Problem(
                    host,
                    "cluster_fabric_interfaces",
                    f"has fabric address {addr}, also on {', '.join(sorted(set(hosts) - {host})) or 'this host twice'}",
                )
    names: dict[str, list[str]] = defaultdict(list)
    for host in inv.members(NODES):
        names[str(inv.get(host, "common_hostname", host.split(".")[0]))].append(host)
    for name, hosts in names.items():
        for host in hosts if len(hosts) > 1 else []:
            yield Problem(
                host, "common_hostname", f"{name!r} is also the hostname of {', '.join(h for h in hosts if h != host)}"
            )


@rule
def node_ranks(inv: Inventory) -> Iterator[Problem]:
    nodes = inv.members(NODES)
    ranks = {h: as_int(inv.get(h, "cluster_node_rank")) for h in nodes if inv.get(h, "cluster_node_rank") is not None}
    count = Counter(r for r in ranks.values() if r is not None)
    for host, r in ranks.items():
        if r is None:
            continue  # the type row reports it
        if not 0 <= r < len(nodes):
            yield Problem(
                host, "cluster_node_rank", f"{r} must lie within 0-{len(nodes) - 1} ({len(nodes)} nodes in {NODES})"
            )
        elif count[r] > 1:
            others = ", ".join(h for h, o in ranks.items() if o == r and h != host)
            yield Problem(host, "cluster_node_rank", f"{r} is also the rank of {others}")


@rule
def fabric_off_management(inv: Inventory) -> Iterator[Problem]:
    """A fabric subnet holding a management address (ansible_host) would pull the controller's path onto it."""
    mgmt = {h: _address(inv.get(h, "ansible_host")) for h in inv.members(ALL)}
    for host in inv.members(NODES):
        for iface in _interfaces(inv, host):
            for a in iface.get("addresses") or []:
                ip = _interface(a)
                if ip is None:
                    continue
                inside = sorted(
                    h for h, m in mgmt.items() if m is not None and m.version == ip.version and m in ip.network
                )
                if inside:
                    yield Problem(
                        host,
                        f"{_iface_label(iface, 0)}.addresses",
                        f"has {a}, whose subnet holds the management address (ansible_host) of {', '.join(inside)}: "
                        "the fabric must not overlap the management network",
                    )


def _reach(iface: dict) -> list:
    """The networks one fabric interface reaches: its subnets and its routes' destinations."""
    nets = [ip.network for ip in map(_interface, iface.get("addresses") or []) if ip is not None]
    return nets + [n for n in (_network(r.get("to")) for r in iface.get("routes") or [] if isinstance(r, dict)) if n]


@rule
def peers_reachable(inv: Inventory) -> Iterator[Problem]:
    """Each node reaches every peer's fabric address on one of its subnets or through one of its routes."""
    nodes = inv.members(NODES)
    fabric = {h: fabric_address(inv, h) for h in nodes}
    for host in nodes:
        nets = []
        addrs = [a for i in _interfaces(inv, host) for a in (i.get("addresses") or [])]
        if not addrs or None in map(_interface, addrs):
            continue  # its own addresses are reported already
        for iface in _interfaces(inv, host):
            nets += _reach(iface)
        if not nets:
            continue
        for peer, fa in fabric.items():
            if peer == host or fa is None or fa.version != 4:
                continue
            if not any(n.version == fa.version and fa.ip in n for n in nets):
                yield Problem(
                    host,
                    "cluster_fabric_interfaces",
                    f"reaches no subnet or route holding {peer}'s fabric address {fa.ip}: put it on a shared subnet "
                    "or add a route",
                )


def _rail(iface: dict) -> tuple[Any, list]:
    """(first IPv4 address, the networks it reaches) of one fabric interface."""
    ips = [ip.ip for ip in map(_interface, iface.get("addresses") or []) if ip is not None and ip.version == 4]
    return (ips[0] if ips else None), _reach(iface)


@rule
def rails_by_position(inv: Inventory) -> Iterator[Problem]:
    """Rail i (the i-th fabric interface, after the first) reaches rail i of every peer through its own subnets or
    routes: the ladder's pair tests and NCCL's rail-aligned rings meet rail i with rail i, so rails listed in
    another order on one node would be tested, and trained, across rails."""
    nodes = inv.members(NODES)
    rails = {h: [(_iface_label(iface, i), *_rail(iface)) for i, iface in enumerate(_interfaces(inv, h))] for h in nodes}
    for host in nodes:
        for i, (label, addr, nets) in enumerate(rails[host][1:], start=1):
            if addr is None or not nets:
                continue  # no IPv4 address on this rail: nothing to meet by address
            for peer in nodes:
                theirs = rails[peer][i][1] if peer != host and i < len(rails[peer]) else None
                if theirs is not None and not any(theirs in n for n in nets):
                    yield Problem(
                        host,
                        f"{label}.addresses",
                        f"(rail {i + 1}) reaches no subnet or route holding {peer}'s rail {i + 1} address {theirs}: "
                        f"rail {i + 1} of every node must share a subnet (or a route), as the pair tests and NCCL's "
                        "rail-aligned rings meet rail i with rail i",
                    )


@rule
def netplan_revert_after_connect(inv: Inventory) -> Iterator[Problem]:
    """The host must not revert a good change while the controller may still be reconnecting."""
    for host in inv.members(NODES):
        after = as_int(inv.get(host, "rdma_netplan_revert_after"))
        wait = as_int(inv.get(host, "rdma_netplan_connect_timeout"))
        if after and wait and after <= wait:
            yield Problem(
                host,
                "rdma_netplan_revert_after",
                f"{after} must exceed rdma_netplan_connect_timeout ({wait}) or be 0 (off)",
            )


@rule
def link_layer(inv: Inventory) -> Iterator[Problem]:
    nodes = inv.members(NODES)
    layers = {h: _link_layer(inv, h) for h in nodes}
    if len(set(layers.values())) > 1:
        for host in nodes:
            yield Problem(
                host, "cluster_link_layer", f"is {layers[host]}, other nodes have another: one fabric, one link layer"
            )
    if "infiniband" in layers.values() and not inv.members(SUBNET_MANAGERS):
        yield Problem("inventory", f"group {SUBNET_MANAGERS}", "is empty: an InfiniBand fabric needs a subnet manager")


# ---------------------------------------------------------------- QoS: one type per kind of value, one rule per
# property, over every prefix that carries the values (the shared cluster_*, the hosts' rdma_qos_*, the switches'
# nxos_roce_qos_*: their values as the switch play will get them, read like any switch variable).

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


@rule
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


def _class_clashes(inv: Inventory, host: str, prefix: str) -> QosFinding:
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


def _shares_off(inv: Inventory, host: str, prefix: str) -> QosFinding:
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


@rule
def qos_classes_distinct(inv: Inventory) -> Iterator[Problem]:
    """RoCE, CNPs and fabric TCP: three DSCPs, three priorities, under every prefix."""
    yield from _qos_problems(inv, _class_clashes)


@rule
def qos_shares_add_up(inv: Inventory) -> Iterator[Problem]:
    """The RoCE, fabric TCP and default shares add up to 100 under every prefix: the hosts' ETS and the switch's
    queuing policy split what strict priority (the CNPs) leaves."""
    yield from _qos_problems(inv, _shares_off)


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


@rule
def host_qos(inv: Inventory) -> Iterator[Problem]:
    """The hosts' QoS is what every switch expects (`all` when every node disagrees alike)."""
    nodes = inv.members(NODES)
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host in nodes:
        for name, message in _host_qos_problems(inv, host):
            seen[(name, message)].append(host)
    yield from _on_hosts(seen, nodes)


# The variables the switch role renders into the device config (its validator's input), as it lists them.
NXOS_RENDERED = nxos_validate.RENDERED


def _inherited_clash(inv: Inventory, sw: str, var: str) -> bool:
    """The switch's `var` only repeats a cluster_* mistake: every switch value of its kind (DSCPs, queues, shares)
    equals its cluster_* counterpart and rule qos_classes or qos_shares already reports the cluster_* values."""
    switch_kinds, cluster_kinds = QOS_PREFIXES["nxos_roce_qos_"][1], QOS_PREFIXES["cluster_"][1]
    kind = next((k for k, names in switch_kinds.items() if var in names), None)
    if kind is None:
        return False
    for mine, shared in zip(switch_kinds[kind], cluster_kinds[kind], strict=True):
        value, default = inv.get(sw, mine), inv.get(sw, shared)
        if value is None or default is None or _as_set(value) != _as_set(default):
            return False
    flagged = {
        name for finding in (_class_clashes, _shares_off) for name, _, _ in finding(inv, sw, "cluster_").values()
    }
    return bool(flagged & set(cluster_kinds[kind]))


def _as_set(value: Any) -> frozenset:
    items = value if isinstance(value, list) else [value]
    return frozenset(v if as_int(v) is None else as_int(v) for v in items)


@rule
def switch_values(inv: Inventory) -> Iterator[Problem]:
    """Every value rendered into the switch config: ranges, consistency, NX-OS names, no CLI injection. A value
    that only repeats a cluster_* mistake is reported once, under the cluster_* name (as the hosts' are)."""
    for sw in inv.members(SWITCHES):
        if "variables" in inv.unreadable.get(sw, {}):
            continue
        values = {n: inv.get(sw, n) for n in NXOS_RENDERED if inv.get(sw, n) is not None}
        for p in nxos_roce_qos_validate(values):
            if _inherited_clash(inv, sw, p["var"]):
                continue
            msg = p["msg"].removeprefix(f"{p['var']}: ").removeprefix(p["var"]).lstrip()
            yield Problem(sw, p["var"], msg)


def _switch_ports(inv: Inventory, sw: str) -> list[dict]:
    ports = inv.get(sw, "nxos_roce_qos_interfaces")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


@rule
def host_mtu_fits_switch(inv: Inventory) -> Iterator[Problem]:
    """On a RoCE fabric every switch port and the no-drop class must carry the hosts' largest frame."""
    biggest: tuple[int, str] | None = None
    for host in inv.members(NODES):
        if _link_layer(inv, host) != "ethernet":
            return
        for iface in _interfaces(inv, host):
            m = as_int(iface.get("mtu"))
            if m is None or integer(*MTU_RANGES[("ethernet", "datagram")])(m):
                continue  # unset (kernel default) or reported as out of range
            if biggest is None or m > biggest[0]:
                biggest = (m, f"{host} {_iface_label(iface, 0)}")
    if biggest is None:
        return
    for sw in inv.members(SWITCHES):
        class_mtu = as_int(inv.get(sw, "nxos_roce_qos_mtu"))
        if class_mtu is not None and integer(1500, 9216, even=True)(class_mtu):
            class_mtu = None  # the switch's own rules report it
        if class_mtu is not None and class_mtu < biggest[0]:
            yield Problem(
                sw,
                "nxos_roce_qos_mtu",
                f"{class_mtu} is below the hosts' fabric MTU {biggest[0]} ({biggest[1]}): no-drop frames would be "
                "discarded",
            )
        for p in _switch_ports(inv, sw):
            m = as_int(p.get("mtu", class_mtu))
            if m is not None and not integer(576, 9216, even=True)(m) and m < biggest[0]:
                yield Problem(
                    sw,
                    f"nxos_roce_qos_interfaces[{p.get('name')}].mtu",
                    f"{m} is below the hosts' fabric MTU {biggest[0]} ({biggest[1]}): frames would be dropped",
                )


@rule
def switch_credentials(inv: Inventory) -> Iterator[Problem]:
    for sw in inv.members(SWITCHES):
        if set(inv.unreadable.get(sw, {})) & {"variables", "ansible_user", "ansible_password"}:
            continue  # reported as unreadable (a vault without its password)
        if not inv.get(sw, "ansible_user"):
            yield Problem(
                sw, "ansible_user", "must be set for the switch (the example inventory takes it from vault.yml)"
            )
        if not (
            inv.get(sw, "ansible_password")
            or inv.get(sw, "ansible_ssh_pass")
            or inv.get(sw, "ansible_ssh_private_key_file")
        ):
            yield Problem(
                sw,
                "ansible_password",
                "(or ansible_ssh_private_key_file) must be set for the switch (the example inventory takes it from "
                "vault.yml)",
            )


@rule
def node_health_thresholds(inv: Inventory) -> Iterator[Problem]:
    """The thresholds rdma-node-check would refuse (unknown key, bad value): its own check, run here so a bad value
    stops the play before any host changes, not the command on the node."""

    def refused(value: Any) -> str | None:
        try:
            node_check.resolve({"interfaces": [{"name": "any"}], "thresholds": value})
        except node_check.ConfigError as exc:
            return str(exc).removeprefix("config: ")
        return None

    hosts = inv.members(NODES)
    values = {h: inv.get(h, "node_health_thresholds") for h in hosts}
    values = {h: v for h, v in values.items() if isinstance(v, dict)}  # not a mapping: the row reports it
    yield from _per_value("node_health_thresholds", values, refused, len(hosts))


# ------------------------------------------------------------- Slurm (roles/slurm): on when slurm_controllers has hosts

SLURM_CONTROLLERS = "slurm_controllers"
# The Slurm role's inputs, checked on every Slurm host (the controller and the nodes); own rows, not VARIABLES rows,
# so that they also cover a controller that is not a node, and so that the munge key is never printed.
# A program slurmd runs by path (HealthCheckProgram, Prolog): no arguments, so no spaces; empty for none.
PROGRAM_OR_EMPTY = text(r"^(/[^\x00-\x20\x7f]*)?$", "an absolute path without spaces, or empty")
SLURM_ROWS: tuple[Var, ...] = (
    Var(
        "slurm_cluster_name", ALL, text(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$", "a cluster name (A-Za-z0-9_-, at most 40)")
    ),
    Var("slurm_node_network", ALL, choice("management", "fabric")),
    Var("slurm_partitions", ALL, mapping()),
    Var("slurm_partition_default", ALL, text(r"^[A-Za-z0-9_-]+$", "a partition name (A-Za-z0-9_-)")),
    Var("slurm_topology", ALL, choice("auto", "none")),
    Var("slurm_config", ALL, mapping()),
    Var("slurm_health_check_program", ALL, PROGRAM_OR_EMPTY),
    Var("slurm_prolog", ALL, PROGRAM_OR_EMPTY),
    Var("slurm_health_check_interval", ALL, integer(1)),
    Var("slurm_daemon_timeout", ALL, integer(1)),
    Var("slurm_apt_cache_valid_time", ALL, integer(0)),
    Var("slurm_node_gpus", NODES, integer(0)),
    Var("slurm_accounting", ALL, boolean()),
    Var("slurm_accounting_database", ALL, text(slurm_rules.DB_NAME_RE, "a MariaDB name (A-Za-z0-9_, at most 32)")),
    Var("slurm_accounting_user", ALL, text(slurm_rules.DB_NAME_RE, "a MariaDB name (A-Za-z0-9_, at most 32)")),
)
SLURM_VARIABLES = (
    *(v.name for v in SLURM_ROWS),
    "slurm_munge_key",
    "slurm_accounting_password",
    "cluster_validate_gpus_per_node",
)
# munged refuses a shorter key: `Keyfile must be at least 32 bytes` (MUNGE_KEY_LEN_MIN_BYTES, munge 0.5.15).
MUNGE_KEY_MIN = 32


def _slurm_hosts(inv: Inventory) -> list[str]:
    """The Slurm hosts (the controller and every node), or none when no host is in slurm_controllers."""
    controllers = inv.members(SLURM_CONTROLLERS)
    return list(dict.fromkeys(controllers + inv.members(NODES))) if controllers else []


@rule
def slurm_rows(inv: Inventory) -> Iterator[Problem]:
    hosts = _slurm_hosts(inv) or inv.members(NODES)
    for var in SLURM_ROWS:
        scope = [h for h in hosts if var.group != NODES or h in inv.members(NODES)]
        values = {
            h: inv.hostvars[h][var.name]
            for h in scope
            if var.name in inv.hostvars.get(h, {}) and var.name not in inv.unreadable.get(h, {})
        }
        yield from _per_value(var.name, values, var.check, len(scope))


@rule
def slurm_controller(inv: Inventory) -> Iterator[Problem]:
    """One controller, a host of the inventory that is not a switch, with a usable name and address."""
    controllers = inv.members(SLURM_CONTROLLERS)
    if len(controllers) > 1:
        yield Problem(
            "inventory",
            f"group {SLURM_CONTROLLERS}",
            f"holds {', '.join(controllers)}: put exactly one host there (a backup SlurmctldHost needs a "
            "StateSaveLocation both controllers share, which the slurm role does not set up)",
        )
    for host in controllers:
        if host in inv.members(SWITCHES):
            yield Problem(host, f"group {SLURM_CONTROLLERS}", f"holds a host that is also in {SWITCHES}")
        elif host not in inv.members(NODES) and not re.fullmatch(DNS_LABEL_RE, host.split(".")[0]):
            yield Problem(
                host,
                "inventory_hostname",
                "must start with a hostname (letters, digits, '-', at most 63): slurmctld "
                "checks SlurmctldHost against it",
            )
    for host in _slurm_hosts(inv):
        addr = inv.get(host, "ansible_host")
        if (
            addr is not None
            and _address(addr) is None
            and not (isinstance(addr, str) and re.fullmatch(DOMAIN_RE, addr))
        ):
            yield Problem(
                host,
                "ansible_host",
                f"{addr!r} must be an IP address or a DNS name: Slurm's NodeAddr and SlurmctldHost use it",
            )


# slurmdbd.conf holds the password on one `StoragePass=` line, where `#` starts a comment and Slurm's parser takes
# quotes and backslashes as its own: printable ASCII without those and without spaces, long enough to mean it.
DB_PASSWORD_RE = r"^[!$-&(-\[\]-~]{16,128}$"


@rule
def slurm_accounting_password(inv: Inventory) -> Iterator[Problem]:
    """With accounting on, the controller's password for slurmdbd's database user: present and one slurmdbd.conf
    reads back whole; never printed."""
    for host in inv.members(SLURM_CONTROLLERS)[:1]:
        on = is_true(inv.get(host, "slurm_accounting", False))
        if not on or "slurm_accounting_password" in inv.unreadable.get(host, {}):
            continue
        password = inv.get(host, "slurm_accounting_password")
        if password is None or password == "":
            yield Problem(
                host,
                "slurm_accounting_password",
                "is required with slurm_accounting: the password of slurmdbd's MariaDB user, in ansible-vault "
                "(roles/slurm/README.md)",
            )
        elif not isinstance(password, str) or not re.fullmatch(DB_PASSWORD_RE, password):
            yield Problem(
                host,
                "slurm_accounting_password",
                "must be 16-128 printable ASCII characters without spaces, '#', quotes or backslashes (slurmdbd.conf "
                "reads it on one line)",
            )


@rule
def slurm_munge_key(inv: Inventory) -> Iterator[Problem]:
    """One MUNGE key, on every Slurm host, long enough for munged; never printed."""
    hosts = [h for h in _slurm_hosts(inv) if "slurm_munge_key" not in inv.unreadable.get(h, {})]
    if not hosts:
        return  # Slurm is off, or every key is reported as unreadable already
    missing, short, keys = [], [], {}
    for host in hosts:
        key = inv.get(host, "slurm_munge_key")
        if key is None or key == "":
            missing.append(host)
        elif not isinstance(key, str) or len(key) < MUNGE_KEY_MIN:
            short.append(host)
        else:
            keys[host] = key
    everyone = len(hosts) > 1

    def where(bad: list[str]) -> list[str]:
        return [ALL] if everyone and len(bad) == len(hosts) else bad

    for host in where(missing):
        yield Problem(
            host,
            "slurm_munge_key",
            "is required on every Slurm host: one key, in ansible-vault (roles/slurm/README.md)",
        )
    for host in where(short):
        yield Problem(
            host,
            "slurm_munge_key",
            f"must be a string of at least {MUNGE_KEY_MIN} characters (munged refuses a shorter key)",
        )
    if len(set(keys.values())) > 1:
        yield Problem(
            ALL,
            "slurm_munge_key",
            f"differs between Slurm hosts ({', '.join(sorted(keys))}): MUNGE needs the same key on every host",
        )


@rule
def slurm_partitions(inv: Inventory) -> Iterator[Problem]:
    """Each partition names an inventory group of rdma_nodes hosts; the default partition is one of them."""
    nodes = inv.members(NODES)
    for host in _slurm_hosts(inv)[:1]:
        wanted = inv.get(host, "slurm_partitions")
        if not isinstance(wanted, dict):
            return  # the row reports it
        for name, group in wanted.items():
            label = f"slurm_partitions[{name}]"
            if not re.fullmatch(r"^[A-Za-z0-9_-]+$", str(name)):
                yield Problem(ALL, label, "must be named with A-Za-z0-9_- only")
            members = inv.groups.get(group) if isinstance(group, str) else None
            if not members:
                yield Problem(
                    ALL, label, f"names group {group!r}, which has no hosts in the inventory (a misspelt group?)"
                )
                continue
            strays = [h for h in members if h not in nodes]
            if strays:
                yield Problem(
                    ALL,
                    label,
                    f"names group {group}, which holds {', '.join(strays)}, not in {NODES}: only rdma nodes run slurmd",
                )
        default = inv.get(host, "slurm_partition_default")
        if isinstance(default, str) and default not in wanted:
            yield Problem(
                ALL,
                "slurm_partition_default",
                f"{default!r} is not one of slurm_partitions ({', '.join(map(str, wanted))})",
            )


def _aliases(inv: Inventory, nodes: list[str], switches: list[str]) -> dict[str, str]:
    """alias -> inventory host or switch, as a port's description or LLDP may name it (cabling.names)."""
    return cabling.names(nodes, switches, lambda h: inv.get(h, "common_hostname"))


@rule
def cabling_map(inv: Inventory) -> Iterator[Problem]:
    """The switches' port map can be true (module_utils/ladder/cabling.py): no host NIC or switch port at the far end of
    two ports, no `peer` that is no inventory name, every uplink listed back by its far end."""
    switches = inv.members(SWITCHES)
    if any("variables" in inv.unreadable.get(sw, {}) for sw in switches):
        return  # reported as unreadable
    names = _aliases(inv, inv.members(NODES), switches)
    links = cabling.links({sw: _switch_ports(inv, sw) for sw in switches}, names)
    for where, var, message in cabling.map_problems(links, list(inv.hostvars)):
        yield Problem(where, var, message)


@rule
def slurm_topology(inv: Inventory) -> Iterator[Problem]:
    """With slurm_topology auto on a fabric of several switches, a port of some switch names every node (the
    first word of its description), so topology.conf holds every node (topology.conf(5): "All nodes in the
    network must be connected to at least one switch")."""
    hosts = _slurm_hosts(inv)
    if not hosts or inv.get(hosts[0], "slurm_topology", "auto") != "auto":
        return
    switches = inv.members(SWITCHES)
    if any("variables" in inv.unreadable.get(sw, {}) for sw in switches):
        return  # reported as unreadable
    nodes = inv.members(NODES)
    names = _aliases(inv, nodes, switches)
    ports = {sw: _switch_ports(inv, sw) for sw in switches}
    placed = slurm_rules.topology(ports, nodes, names, {h: h for h in nodes})
    for host in placed["unplaced"]:
        yield Problem(
            host,
            "slurm_topology",
            f"auto: no port of {', '.join(switches)} names {host} first in its description "
            "(nxos_roce_qos_host_interfaces), so topology.conf cannot place it: describe its port as "
            "'<host> <nic>' or set slurm_topology: none",
        )


@rule
def slurm_gpus(inv: Inventory) -> Iterator[Problem]:
    """A node's declared GPUs agree with what the validation ladder expects of every node."""
    for host in inv.members(NODES) if _slurm_hosts(inv) else []:
        declared = as_int(inv.get(host, "slurm_node_gpus"))
        expected = as_int(inv.get(host, "cluster_validate_gpus_per_node"))
        if declared is not None and expected and declared >= 0 and declared != expected:
            yield Problem(
                host,
                "slurm_node_gpus",
                f"{declared} differs from cluster_validate_gpus_per_node {expected}: the ladder and the scheduler "
                "must expect the same GPUs",
            )


@rule
def slurm_config_keys(inv: Inventory) -> Iterator[Problem]:
    """slurm_config: slurm.conf keys, one line each, none of those the inventory decides (nodes, partitions,
    the controller)."""
    for host in _slurm_hosts(inv)[:1]:
        extra = inv.get(host, "slurm_config")
        for key, value in extra.items() if isinstance(extra, dict) else ():
            if not re.fullmatch(slurm_rules.CONF_KEY_RE, str(key)):
                yield Problem(ALL, "slurm_config", f"has {key!r}, which is not a slurm.conf key (letters and digits)")
            elif str(key).lower() in slurm_rules.STRUCTURE_KEYS:
                yield Problem(
                    ALL,
                    "slurm_config",
                    f"sets {key}, which the slurm role renders from the inventory (groups, slurm_partitions)",
                )
            elif not re.fullmatch(slurm_rules.SINGLE_LINE_RE, str(value)):
                yield Problem(ALL, "slurm_config", f"{key}: the value must be one line")


@rule
def fabric_firewall_leaves_ssh(inv: Inventory) -> Iterator[Problem]:
    """The fabric firewall guards the project's ports on every address: SSH (22, or the node's ansible_port) is never
    one of them, so the controller's connection is never filtered."""
    hosts = inv.members(NODES)
    found: dict[str, str] = {}
    for host in hosts:
        ports = inv.get(host, "fabric_firewall_extra_ports")
        if not isinstance(ports, list):  # not a list: the row reports it
            continue
        ssh = {22, as_int(inv.get(host, "ansible_port")) or 22}
        hit = sorted({as_int(p) for p in ports} & ssh)
        if hit:
            found[host] = f"has {hit[0]}, the SSH port: the firewall never guards SSH"
    if len(hosts) > 1 and len(found) == len(hosts) and len(set(found.values())) == 1:
        yield Problem(ALL, "fabric_firewall_extra_ports", next(iter(found.values())))
        return
    for host, why in found.items():
        yield Problem(host, "fabric_firewall_extra_ports", why)


def check(inv: Inventory, variables: tuple[str, ...] = ()) -> list[Problem]:
    """Every problem of the inventory, in rule order, each once; only those whose variable starts with
    one of `variables` when given (a role used alone checks its own variables)."""
    seen: dict[Problem, None] = {}
    for fn in RULES:
        for p in fn(inv):
            if not variables or p.variable.startswith(variables) or any(c.startswith(variables) for c in p.covers):
                seen.setdefault(p)
    return list(seen)


def report(problems: list[Problem]) -> str:
    return f"the inventory breaks {len(problems)} rule(s) of the contract (docs/design.md):\n" + "\n".join(
        f"  {p}" for p in problems
    )
