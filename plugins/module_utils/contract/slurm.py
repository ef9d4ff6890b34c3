"""The inventory contract's Slurm rules (roles/slurm), on when slurm_controllers has hosts: the role's rows, one
controller, the MUNGE key and the accounting password (never printed), partitions, topology, GPUs, slurm.conf keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.cabling import aliases
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.fabric import as_address
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    ALL,
    NODES,
    SWITCHES,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.switch import switch_ports
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import (
    DNS_LABEL_RE,
    DOMAIN_RE,
    boolean,
    choice,
    integer,
    is_true,
    mapping,
    text,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import Var, per_value
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import conf as slurm_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.topology import topology as place_on_switches

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
    Var("slurm_configless", ALL, boolean()),
    Var("slurm_accounting", ALL, boolean()),
    Var("slurm_reset_packages", ALL, boolean()),
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


def slurm_rows(inv: Inventory) -> Iterator[Problem]:
    hosts = _slurm_hosts(inv) or inv.members(NODES)
    for var in SLURM_ROWS:
        scope = [h for h in hosts if var.group != NODES or h in inv.members(NODES)]
        values = {
            h: inv.hostvars[h][var.name]
            for h in scope
            if var.name in inv.hostvars.get(h, {}) and var.name not in inv.unreadable.get(h, {})
        }
        yield from per_value(var.name, values, var.check, len(scope))


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
            and as_address(addr) is None
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
    names = aliases(inv, nodes, switches)
    ports = {sw: switch_ports(inv, sw) for sw in switches}
    placed = place_on_switches(ports, nodes, names, {h: h for h in nodes})
    for host in placed["unplaced"]:
        yield Problem(
            host,
            "slurm_topology",
            f"auto: no port of {', '.join(switches)} names {host} first in its description "
            "(nxos_roce_qos_host_interfaces), so topology.conf cannot place it: describe its port as "
            "'<host> <nic>' or set slurm_topology: none",
        )


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
