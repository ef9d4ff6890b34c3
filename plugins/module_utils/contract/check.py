"""The inventory contract of rdma-llm-cluster (docs/design.md), checked once, every error at once.

Pure Python (stdlib only): pytest imports this package directly, and the action plugin
plugins/action/inventory_contract.py feeds it every host's variables (each role's
defaults under the inventory's values, templated) and fails the play with what `check()` returns.

Each error names the host (or `all` for a value every host shares) and the variable:
``<host>: <variable> <what is wrong>``. One file per section: contract/inventory.py (what the rules see and
report), contract/types.py (the value checks), contract/variables.py (one row per variable), then the rules of
contract/fabric.py, qos.py, switch.py, node_health.py, slurm.py, cabling.py, firewall.py, monitoring.py and
rolling.py; RULES below runs them, in order.

Adding a rule (docs/design.md, "Adding a rule to the contract"): a type/range/choice of one variable is
one row in VARIABLES (contract/variables.py); anything across fields or hosts is one function in its section's
file, listed in RULES. Either way, add one row with the exact message to BAD in that section's
tests/unit/plugins/module_utils/contract/test_<section>.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.cabling import cabling_map
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.fabric import (
    fabric_address_family,
    fabric_interfaces,
    fabric_off_management,
    link_layer,
    netplan_revert_after_connect,
    node_ranks,
    peers_reachable,
    rails_by_position,
    rails_on_every_node,
    unique_across_nodes,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.firewall import (
    fabric_firewall_allow_list,
    fabric_firewall_leaves_ssh,
    listen_ports_distinct,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import Inventory, Problem
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.monitoring import (
    MONITORING_VARIABLES,
    monitoring_hosts,
    monitoring_rows,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.node_health import node_health_thresholds
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.qos import (
    QOS_HOST_SWITCH,
    QOS_PREFIXES,
    host_qos,
    qos_classes_distinct,
    qos_shared_with_switch,
    qos_shares_add_up,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.rolling import ROLLING_VARIABLES, rolling_rows
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.slurm import (
    SLURM_VARIABLES,
    slurm_accounting_password,
    slurm_config_keys,
    slurm_controller,
    slurm_gpus,
    slurm_munge_key,
    slurm_partitions,
    slurm_rows,
    slurm_topology,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.switch import (
    NXOS_RENDERED,
    host_mtu_fits_switch,
    switch_credentials,
    switch_values,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import (
    EXTRA_VARIABLES,
    VARIABLES,
    group_membership,
    unreadable_variables,
    variable_rows,
)

Rule = Callable[[Inventory], Iterable[Problem]]
# Every rule across fields and hosts, in the order they run: check() reports in this order.
RULES: tuple[Rule, ...] = (
    unreadable_variables,
    group_membership,
    variable_rows,
    fabric_interfaces,
    fabric_address_family,
    unique_across_nodes,
    node_ranks,
    fabric_off_management,
    peers_reachable,
    rails_by_position,
    rails_on_every_node,
    netplan_revert_after_connect,
    link_layer,
    qos_shared_with_switch,
    qos_classes_distinct,
    qos_shares_add_up,
    host_qos,
    switch_values,
    host_mtu_fits_switch,
    switch_credentials,
    node_health_thresholds,
    slurm_rows,
    slurm_controller,
    slurm_accounting_password,
    slurm_munge_key,
    slurm_partitions,
    cabling_map,
    slurm_topology,
    slurm_gpus,
    slurm_config_keys,
    fabric_firewall_leaves_ssh,
    listen_ports_distinct,
    fabric_firewall_allow_list,
    monitoring_rows,
    monitoring_hosts,
    rolling_rows,
)


def needed_variables() -> list[str]:
    qos = [n for _, names in QOS_PREFIXES.values() for trio in names.values() for n in trio]
    qos += [sw for _, sw, _ in QOS_HOST_SWITCH]
    return list(
        dict.fromkeys(
            [v.name for v in VARIABLES]
            + list(EXTRA_VARIABLES)
            + list(NXOS_RENDERED)
            + qos
            + list(SLURM_VARIABLES)
            + list(MONITORING_VARIABLES)
            + list(ROLLING_VARIABLES)
        )
    )


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
