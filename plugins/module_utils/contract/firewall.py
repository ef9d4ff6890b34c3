"""The inventory contract's fabric_firewall rules: the firewall never guards SSH, every port it guards is a port,
and its allow-list is the fabric's, checked before any change (the firewall play's own plan runs fifth)."""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import ALL, NODES, Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import FALSE_WORDS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.firewall import fabric_firewall_plan
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

# The ports the firewall guards besides fabric_firewall_extra_ports: what the launch's, the ladder's and the model
# server's ports.yml publish (roles/train_launch, roles/cluster_validate, roles/serve: tasks/ports.yml), one variable
# each; the pair tests' port is the first rail's, + 1 per further rail.
LISTEN_PORTS = (
    "train_launch_rdzv_port",
    "train_launch_check_port",
    "cluster_validate_pair_port",
    "cluster_validate_allreduce_port",
    "serve_port",
)
FIREWALL_VARIABLES = ("ansible_port", "fabric_firewall_extra_ports", *LISTEN_PORTS)


def firewall_enabled(inv: Inventory, host: str) -> bool:
    """Whether the fabric firewall runs on the host (fabric_firewall_enabled, on by default)."""
    value = inv.get(host, "fabric_firewall_enabled", True)
    return value is not False and str(value).lower() not in FALSE_WORDS


def _guarded(inv: Inventory, host: str) -> list[tuple[str, int]]:
    """(variable, port) of every port the firewall guards on the host; a value that is no integer is the row's."""
    ports = inv.get(host, "fabric_firewall_extra_ports")
    out = [("fabric_firewall_extra_ports", n) for p in (ports if isinstance(ports, list) else []) if (n := as_int(p))]
    rails = max(len(inv.get(host, "cluster_fabric_interfaces") or []), 1)
    for name in LISTEN_PORTS:
        n = as_int(inv.get(host, name))
        if n is not None:
            out += [(name, n + rail) for rail in range(rails if name == "cluster_validate_pair_port" else 1)]
    return out


def fabric_firewall_leaves_ssh(inv: Inventory) -> Iterator[Problem]:
    """The fabric firewall guards the project's ports on every address: SSH (22, or the node's ansible_port) is never
    one of them, so the controller's connection is never filtered (a rendezvous on the SSH port would reset every new
    SSH connection); and each is a TCP port (the pair tests' last rail's included)."""
    hosts = [h for h in inv.members(NODES) if firewall_enabled(inv, h)]
    found: dict[tuple[str, str], set[str]] = {}  # (variable, message) -> hosts
    for host in hosts:
        ssh = {22, as_int(inv.get(host, "ansible_port")) or 22}
        seen: set[str] = set()
        for name, port in _guarded(inv, host):
            if name in seen:
                continue
            if port in ssh:
                why = f"has {port}, the SSH port: the firewall never guards SSH"
            elif not 1 <= port <= 65535 and name == "cluster_validate_pair_port":
                why = f"gives the pair tests port {port} on the last rail: it must be 1-65535"
            else:
                continue
            seen.add(name)
            found.setdefault((name, why), set()).add(host)
    yield from _by_hosts(found, hosts)


def _by_hosts(found: dict[tuple[str, str], set[str]], hosts: list[str]) -> Iterator[Problem]:
    """One problem per (variable, message): `all` when every host has it."""
    for (name, why), where in sorted(found.items()):
        if len(hosts) > 1 and where == set(hosts):
            yield Problem(ALL, name, why)
        else:
            yield from (Problem(host, name, why) for host in sorted(where))


def listen_ports_distinct(inv: Inventory) -> Iterator[Problem]:
    """The project's servers each listen on a port of their own on a node (the rendezvous, the pre-flight all-reduce,
    the ladder's pair tests and all-reduce, the model server): on one port the later server cannot bind, or, worse, a
    client reaches the wrong one. Named on the later variable of LISTEN_PORTS, with the one it meets."""
    hosts = inv.members(NODES)
    found: dict[tuple[str, str], set[str]] = {}
    for host in hosts:
        owner: dict[int, str] = {}
        for name, port in [g for g in _guarded(inv, host) if g[0] != "fabric_firewall_extra_ports"]:
            first = owner.setdefault(port, name)
            if first != name:
                why = f"has {port}, also {first}'s: two of the project's servers cannot listen on one port"
                found.setdefault((name, why), set()).add(host)
    yield from _by_hosts(found, hosts)


def fabric_firewall_allow_list(inv: Inventory) -> Iterator[Problem]:
    """The firewall lets in the fabric of its group's hosts: a group with no host would drop every fabric packet, and
    each node's plan (the role's own rule, host/firewall.py) must hold: an IPv4 fabric address, addresses that parse."""
    nodes = [h for h in inv.members(NODES) if firewall_enabled(inv, h)]
    for host in nodes:
        group = inv.get(host, "fabric_firewall_group", NODES)
        members = inv.members(str(group))
        if not members:
            yield Problem(
                host,
                "fabric_firewall_group",
                f"{group!r} has no hosts: the firewall's allow-list would be empty and drop every fabric packet",
            )
            continue
        own = inv.get(host, "fabric_firewall_interfaces")
        if own is None or own == inv.get(host, "cluster_fabric_interfaces"):
            continue  # the role's default: the fabric's own rules (contract/fabric.py) check those interfaces
        try:
            fabric_firewall_plan([inv.get(m, "fabric_firewall_interfaces") or [] for m in members], own, [])
        except RuleError as exc:
            yield Problem(host, "fabric_firewall_interfaces", str(exc).removeprefix("fabric_firewall: "))
