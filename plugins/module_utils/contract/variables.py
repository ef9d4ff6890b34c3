"""The inventory contract's rows: one per variable (its hosts, its type, whether it is required), checked where
the variable is defined; and the rules every row relies on (unreadable values, the contract's groups).

Adding a type, range, choice or pattern of one variable is one row in VARIABLES (docs/design.md, "Adding a rule to
the contract") and one row in BAD of tests/unit/plugins/module_utils/contract/test_variables.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    ALL,
    NODES,
    SUBNET_MANAGERS,
    SWITCHES,
    UNGROUPED,
    Inventory,
    Problem,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.types import (
    DNS_LABEL_RE,
    DSCP,
    IFNAME_RE,
    PERCENT,
    PRIORITY,
    PROFILE,
    QPS_PER_CONNECTION,
    Check,
    boolean,
    boolean_or,
    choice,
    integer,
    list_of,
    mapping,
    networks_by_family,
    opensm_ports,
    text,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import catalog, plan
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import doca


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
    Var("train_venv_versions_dir", NODES, ABS_PATH),
    Var("train_venv_keep", NODES, integer(1)),
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
    # gpu_stack (its plan's own checks: plugins/module_utils/gpu/)
    Var("gpu_stack_driver_version", NODES, text(plan.VERSION.pattern, "a driver version like 580.95.05")),
    Var("gpu_stack_driver_open", NODES, boolean()),
    Var("gpu_stack_kernel_flavour", NODES, text(plan.PACKAGE_NAME.pattern, "a kernel flavour (generic, aws ...)")),
    Var("gpu_stack_fabric_manager", NODES, boolean_or("auto")),
    Var("gpu_stack_dcgm_packages", NODES, list_of(text(plan.PACKAGE_NAME.pattern, "a Debian package name"))),
    Var("gpu_stack_gpus", NODES, catalog.entries_problem),
    Var("gpu_stack_check_candidates", NODES, boolean()),
    Var(
        "gpu_stack_blacklist_file",
        NODES,
        text(r"^/[A-Za-z0-9_./-]*/modprobe\.d/[A-Za-z0-9_.-]+\.conf$", "a .conf file in a modprobe.d directory"),
    ),
    Var("gpu_stack_root", NODES, ABS_PATH),
    Var("gpu_stack_reset_packages", NODES, boolean()),
    # rdma_stack
    Var("rdma_stack_doca", NODES, doca.problem),
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
    # The launch's and the ladder's listening ports, which the firewall guards too (their ports.yml).
    Var("train_launch_rdzv_port", NODES, integer(1, 65535)),
    Var("train_launch_check_port", NODES, integer(1, 65535)),
    Var("cluster_validate_pair_port", NODES, integer(1, 65535)),
    Var("cluster_validate_allreduce_port", NODES, integer(1, 65535)),
    # serve (playbooks/serve.yml): its port is guarded too; rendered values. The run and the export: its own assert
    Var("serve_port", NODES, integer(1, 65535)),
    Var("serve_device", NODES, text(r"^(auto|cpu|cuda(:[0-9]+)?)$", "auto, cpu, cuda or cuda:<n>")),
    Var("serve_dtype", NODES, choice("auto", "float32", "bfloat16", "float16")),
    Var("serve_health_timeout", NODES, integer(1)),
    Var("serve_stop_grace", NODES, integer(1)),
    Var(
        "fabric_firewall_train_group",
        NODES,
        text(r"^[a-z_][a-z0-9_-]{0,31}$", "a group name (a-z, 0-9, '_', '-', at most 32, not starting with a digit)"),
    ),
    # The launch's, the ladder's, the venv's and preflight's own switches: each is read with `| bool`, which takes a
    # mistyped word (`-e train_launch_detach=ture`) for false; refused here instead.
    Var("train_launch_resume", NODES, boolean()),
    Var("train_launch_detach", NODES, boolean()),
    Var("train_launch_eval", NODES, boolean()),
    Var("train_launch_eval_options", NODES, mapping()),
    Var("train_launch_fabric_counters", NODES, boolean()),
    Var("train_launch_allow_tcp", NODES, boolean()),
    Var("train_launch_reset_runs", NODES, boolean()),
    Var("train_launch_rejoin", NODES, boolean()),
    Var("train_launch_slurm_exclusive", NODES, boolean()),
    # Every run's logs, metrics and checkpoints; reset removes it whole: never relative to some working directory.
    Var("train_launch_root", NODES, ABS_PATH),
    Var("cluster_validate_keep_going", NODES, boolean()),
    Var("cluster_validate_gpudirect", NODES, boolean()),
    Var("train_venv_pip_compile", NODES, boolean()),
    Var("train_venv_offline", NODES, boolean()),
    Var("preflight_check_facts", NODES, boolean()),
    Var("preflight_check_switches", ALL, boolean()),
    # playbooks/reset.yml: packages the project installed go only on request
    Var("rdma_netplan_reset_packages", NODES, boolean()),
    Var("rdma_stack_reset_packages", NODES, boolean()),
    Var("rdma_qos_reset_packages", NODES, boolean()),
    Var("fabric_firewall_reset_packages", NODES, boolean()),
    Var("train_venv_reset_packages", NODES, boolean()),
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


# What Ansible says when it cannot decrypt a vaulted value (ansible/parsing/vault/__init__.py, ansible-core 2.19),
# and the hint each calls for: no secret at all, or secrets none of which decrypts the value (a password given for
# another vault id, the lab's). Any other error (a name the vault does not define: `'vault_x' is undefined`) gets
# none: the vault was read, so asking for its password would send the operator the wrong way.
VAULT_HINTS = (
    (
        ("no vault secrets found", "a vault password must be specified"),
        "give the vault password: --vault-id <id>@prompt or --ask-vault-pass",
    ),
    (
        ("decryption failed",),
        "give the vault password that encrypted it, the one given does not decrypt it: --vault-id <id>@prompt or "
        "--ask-vault-pass",
    ),
)


def vault_hint(err: str) -> str:
    """The hint for one unreadable value's error: what to do about the vault, or nothing."""
    low = err.lower()
    return next((f" ({hint})" for words, hint in VAULT_HINTS if any(w in low for w in words)), "")


def unreadable_variables(inv: Inventory) -> Iterator[Problem]:
    for host, why in sorted(inv.unreadable.items()):
        for name, err in sorted(why.items()):
            yield Problem(host, name, f"cannot be read: {err}{vault_hint(err)}")


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
        yield from per_value(var.name, values, var.check, len(hosts))


def rows_on(inv: Inventory, hosts: list[str], rows: Iterable[tuple[str, Check]]) -> Iterator[Problem]:
    """A section's rows (name, check) on `hosts`: each readable value a host has, checked once per distinct value."""
    for name, check in rows:
        values = {
            h: inv.hostvars[h][name]
            for h in hosts
            if name in inv.hostvars.get(h, {}) and name not in inv.unreadable.get(h, {})
        }
        yield from per_value(name, values, check, len(hosts))


def per_value(name: str, values: dict[str, Any], check: Check, n_hosts: int) -> Iterator[Problem]:
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
