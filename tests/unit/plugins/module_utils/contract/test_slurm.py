"""The inventory contract's Slurm rules (plugins/module_utils/contract/slurm.py, roles/slurm): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import Inventory

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.contract.inventories import Change, both, good, second_switch, setif, setv

pytestmark = pytest.mark.lint

MUNGE_KEY = "lab-only-test-key-0123456789abcdefghijklmnopqrstuvwxyz"
DB_PASSWORD = "lab-only-db-password-0123"
# roles/slurm/defaults/main.yml as the action plugin hands them over: templated (cluster_name unset here), the
# package lists left out (the contract does not read them).
# A default that is one shared default (`"{{ cluster_node_health_slurm_command }}"`) gets roles/cluster_defaults' value.
SHARED = yaml.safe_load((ROOT / "roles" / "cluster_defaults" / "defaults" / "main.yml").read_text())


def _templated(value):
    name = value.strip("{} ") if isinstance(value, str) and value.startswith("{{") else None
    return SHARED.get(name, value)


SLURM_DEFAULTS = {
    k: _templated(v)
    for k, v in yaml.safe_load((ROOT / "roles" / "slurm" / "defaults" / "main.yml").read_text()).items()
    if k != "slurm_packages"
} | {"slurm_cluster_name": "cluster"}


def slurm_on(inv: Inventory) -> None:
    """n1 is the Slurm controller (and a node); every node has the role's defaults and the one key."""
    inv.groups["slurm_controllers"] = ["n1"]
    for host in ("n1", "n2"):
        inv.hostvars[host].update(copy.deepcopy(SLURM_DEFAULTS), slurm_munge_key=MUNGE_KEY)


def slurm(*changes: Change) -> Change:
    return both(slurm_on, *changes)


def on_nodes(name: str, value) -> Change:
    return both(setv("n1", name, value), setv("n2", name, copy.deepcopy(value)))


TOPOLOGY_FIX = "so topology.conf cannot place it: describe its port as '<host> <nic>' or set slurm_topology: none"
VAULT_HINT = "(give the vault password: --vault-id <id>@prompt or --ask-vault-pass)"

SLURM_BAD: list[tuple[str, Change, list[str]]] = [
    (
        "slurm-two-controllers",
        slurm(lambda inv: inv.groups.__setitem__("slurm_controllers", ["n1", "n2"])),
        [
            "inventory: group slurm_controllers holds n1, n2: put exactly one host there (a backup SlurmctldHost "
            "needs a StateSaveLocation both controllers share, which the slurm role does not set up)"
        ],
    ),
    (
        "slurm-controller-is-a-switch",
        slurm(lambda inv: inv.groups.__setitem__("slurm_controllers", ["sw"])),
        [
            "sw: group slurm_controllers holds a host that is also in switches",
            "sw: slurm_munge_key is required on every Slurm host: one key, in ansible-vault (roles/slurm/README.md)",
        ],
    ),
    (
        "slurm-controller-name",
        slurm(
            lambda inv: inv.groups.__setitem__("slurm_controllers", ["head_1.lab"]),
            lambda inv: inv.hostvars.__setitem__(
                "head_1.lab", {"ansible_host": "192.168.48.5", "slurm_munge_key": MUNGE_KEY}
            ),
        ),
        [
            "head_1.lab: inventory_hostname must start with a hostname (letters, digits, '-', at most 63): "
            "slurmctld checks SlurmctldHost against it"
        ],
    ),
    (
        "slurm-address",
        slurm(setv("n2", "ansible_host", "node 2")),
        ["n2: ansible_host 'node 2' must be an IP address or a DNS name: Slurm's NodeAddr and SlurmctldHost use it"],
    ),
    (
        "slurm-munge-key-missing",
        slurm(lambda inv: [inv.hostvars[h].pop("slurm_munge_key") for h in ("n1", "n2")]),
        ["all: slurm_munge_key is required on every Slurm host: one key, in ansible-vault (roles/slurm/README.md)"],
    ),
    (
        "slurm-munge-key-short",
        slurm(setv("n2", "slurm_munge_key", "short")),
        ["n2: slurm_munge_key must be a string of at least 32 characters (munged refuses a shorter key)"],
    ),
    (
        "slurm-munge-keys-differ",
        slurm(setv("n2", "slurm_munge_key", MUNGE_KEY.upper())),
        ["all: slurm_munge_key differs between Slurm hosts (n1, n2): MUNGE needs the same key on every host"],
    ),
    (
        "slurm-munge-key-vault-without-password",
        slurm(
            lambda inv: inv.unreadable.update(
                {h: {"slurm_munge_key": "Attempting to decrypt but no vault secrets found."} for h in ("n1", "n2")}
            )
        ),
        [
            f"n1: slurm_munge_key cannot be read: Attempting to decrypt but no vault secrets found. {VAULT_HINT}",
            f"n2: slurm_munge_key cannot be read: Attempting to decrypt but no vault secrets found. {VAULT_HINT}",
        ],
    ),
    (
        # The vault file was read with the password given, but defines no such name: the hint would mislead.
        "slurm-munge-key-undefined-in-the-vault",
        slurm(
            lambda inv: inv.unreadable.update(
                {h: {"slurm_munge_key": "'vault_slurm_munge_key' is undefined"} for h in ("n1", "n2")}
            )
        ),
        [
            "n1: slurm_munge_key cannot be read: 'vault_slurm_munge_key' is undefined",
            "n2: slurm_munge_key cannot be read: 'vault_slurm_munge_key' is undefined",
        ],
    ),
    (
        "slurm-reset-packages-not-a-bool",
        slurm(on_nodes("slurm_reset_packages", "ture")),
        ["all: slurm_reset_packages must be true or false (got 'ture')"],
    ),
    (
        "slurm-partition-unknown-group",
        slurm(on_nodes("slurm_partitions", {"train": "rdma_nodes", "gpu": "gpu_nodes"})),
        ["all: slurm_partitions[gpu] names group 'gpu_nodes', which has no hosts in the inventory (a misspelt group?)"],
    ),
    (
        "slurm-partition-not-nodes",
        slurm(
            lambda inv: inv.groups.__setitem__("login", ["sw"]),
            on_nodes("slurm_partitions", {"train": "rdma_nodes", "login": "login"}),
        ),
        [
            "all: slurm_partitions[login] names group login, which holds sw, not in rdma_nodes: only rdma nodes run "
            "slurmd"
        ],
    ),
    (
        "slurm-default-partition",
        slurm(on_nodes("slurm_partition_default", "gpu")),
        ["all: slurm_partition_default 'gpu' is not one of slurm_partitions (train)"],
    ),
    (
        "slurm-network-word",
        slurm(on_nodes("slurm_node_network", "ib")),
        ["all: slurm_node_network must be one of management, fabric (got 'ib')"],
    ),
    (
        "slurm-topology-unplaced",
        slurm(second_switch),
        [
            f"n1: slurm_topology auto: no port of sw, sw2 names n1 first in its description "
            f"(nxos_roce_qos_host_interfaces), {TOPOLOGY_FIX}",
            f"n2: slurm_topology auto: no port of sw, sw2 names n2 first in its description "
            f"(nxos_roce_qos_host_interfaces), {TOPOLOGY_FIX}",
        ],
    ),
    (
        "slurm-gpus-disagree-with-the-ladder",
        slurm(setv("n1", "slurm_node_gpus", 4), on_nodes("cluster_validate_gpus_per_node", 8)),
        [
            "n1: slurm_node_gpus 4 differs from cluster_validate_gpus_per_node 8: the ladder and the scheduler must "
            "expect the same GPUs"
        ],
    ),
    (
        "slurm-gpus-above-the-ladder",
        slurm(setv("n1", "slurm_node_gpus", 16), on_nodes("cluster_validate_gpus_per_node", 8)),
        [
            "n1: slurm_node_gpus 16 differs from cluster_validate_gpus_per_node 8: the ladder and the scheduler must "
            "expect the same GPUs"
        ],
    ),
    (
        "slurm-no-gpus-where-the-ladder-expects-them",
        slurm(setv("n1", "slurm_node_gpus", 0), on_nodes("cluster_validate_gpus_per_node", 8)),
        [
            "n1: slurm_node_gpus 0 differs from cluster_validate_gpus_per_node 8: the ladder and the scheduler must "
            "expect the same GPUs"
        ],
    ),
    (
        # A negative count is its own problem only: it is compared with nothing.
        "slurm-gpus-negative",
        slurm(setv("n1", "slurm_node_gpus", -1), on_nodes("cluster_validate_gpus_per_node", 8)),
        ["n1: slurm_node_gpus must be an integer >= 0 (got -1)"],
    ),
    (
        "slurm-gpus-word",
        slurm(setv("n1", "slurm_node_gpus", "eight")),
        ["n1: slurm_node_gpus must be an integer >= 0 (got 'eight')"],
    ),
    (
        "slurm-config-node-line",
        slurm(on_nodes("slurm_config", {"NodeName": "evil CPUs=1"})),
        ["all: slurm_config sets NodeName, which the slurm role renders from the inventory (groups, slurm_partitions)"],
    ),
    (
        "slurm-config-injection",
        slurm(on_nodes("slurm_config", {"MaxJobCount": "1\nNodeName=evil"})),
        ["all: slurm_config MaxJobCount: the value must be one line"],
    ),
    (
        "slurm-health-check-relative",
        slurm(on_nodes("slurm_health_check_program", "nhc")),
        ["all: slurm_health_check_program must be an absolute path without spaces, or empty (got 'nhc')"],
    ),
    (
        "slurm-prolog-relative",
        slurm(on_nodes("slurm_prolog", "rdma-node-health-prolog")),
        ["all: slurm_prolog must be an absolute path without spaces, or empty (got 'rdma-node-health-prolog')"],
    ),
    (
        "slurm-accounting-without-password",
        slurm(on_nodes("slurm_accounting", True)),
        [
            "n1: slurm_accounting_password is required with slurm_accounting: the password of slurmdbd's MariaDB "
            "user, in ansible-vault (roles/slurm/README.md)"
        ],
    ),
    (
        "slurm-accounting-password-breaks-its-line",
        slurm(on_nodes("slurm_accounting", "yes"), setv("n1", "slurm_accounting_password", DB_PASSWORD + " #")),
        [
            "n1: slurm_accounting_password must be 16-128 printable ASCII characters without spaces, '#', quotes or "
            "backslashes (slurmdbd.conf reads it on one line)"
        ],
    ),
    (
        "slurm-accounting-database-name",
        slurm(
            on_nodes("slurm_accounting", True),
            setv("n1", "slurm_accounting_password", DB_PASSWORD),
            on_nodes("slurm_accounting_database", "acct`; DROP"),
        ),
        ["all: slurm_accounting_database must be a MariaDB name (A-Za-z0-9_, at most 32) (got 'acct`; DROP')"],
    ),
    (
        "slurm-accounting-word",
        slurm(on_nodes("slurm_accounting", "maybe")),
        ["all: slurm_accounting must be true or false (got 'maybe')"],
    ),
]


def test_a_slurm_cluster_passes() -> None:
    inv = good()
    slurm_on(inv)
    assert [str(p) for p in check(inv)] == []


def test_slurm_gpus_equal_to_the_ladders_pass() -> None:
    inv = good()
    slurm(on_nodes("slurm_node_gpus", 8), on_nodes("cluster_validate_gpus_per_node", 8))(inv)
    assert [str(p) for p in check(inv)] == []
    # Without the ladder's count (0: not checked) any declared count is the scheduler's alone.
    on_nodes("slurm_node_gpus", 4)(inv)
    on_nodes("cluster_validate_gpus_per_node", 0)(inv)
    assert [str(p) for p in check(inv)] == []


def test_a_leaf_spine_slurm_cluster_whose_ports_name_the_nodes_passes() -> None:
    inv = good()
    slurm(second_switch)(inv)
    inv.hostvars["sw"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1", "description": "n1 ens192"}]
    inv.hostvars["sw2"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1", "description": "n2 ens192"}]
    assert [str(p) for p in check(inv)] == []
    on_nodes("slurm_topology", "none")(inv)
    inv.hostvars["sw2"]["nxos_roce_qos_interfaces"] = [{"name": "Ethernet1/1"}]
    assert [str(p) for p in check(inv)] == []


def test_without_a_controller_slurm_asks_nothing() -> None:
    """No host in slurm_controllers: the Slurm play runs nowhere, no key is needed; the role's defaults (layered
    under every node) still have to be valid."""
    inv = good()
    slurm_on(inv)
    inv.groups["slurm_controllers"] = []
    for host in ("n1", "n2"):
        inv.hostvars[host].pop("slurm_munge_key")
    assert [str(p) for p in check(inv)] == []
    on_nodes("slurm_topology", "always")(inv)
    assert [str(p) for p in check(inv)] == ["all: slurm_topology must be one of auto, none (got 'always')"]


def test_the_munge_key_is_never_printed() -> None:
    for key in ("short-secret", MUNGE_KEY.upper()):
        inv = good()
        slurm(setv("n2", "slurm_munge_key", key))(inv)
        problems = " ".join(str(p) for p in check(inv))
        assert problems and key not in problems and MUNGE_KEY not in problems


def test_accounting_with_its_password_passes_and_the_password_is_never_printed() -> None:
    inv = good()
    slurm(on_nodes("slurm_accounting", True), setv("n1", "slurm_accounting_password", DB_PASSWORD))(inv)
    assert [str(p) for p in check(inv)] == []
    # Only the controller runs slurmdbd: the nodes need no password.
    assert "slurm_accounting_password" not in inv.hostvars["n2"]
    for bad in ("short-pass", DB_PASSWORD + "'"):
        setv("n1", "slurm_accounting_password", bad)(inv)
        problems = " ".join(str(p) for p in check(inv))
        assert problems and bad not in problems


def test_slurm_rules_are_checked_by_the_role_alone() -> None:
    """roles/slurm/tasks/assert.yml's prefixes keep the Slurm problems and leave the others to their roles."""
    inv = good()
    slurm(setv("n2", "slurm_munge_key", "short"), setif("mtu", 100000))(inv)
    prefixes = ("slurm_", "group slurm_controllers", "ansible_host", "inventory_hostname")
    assert [str(p) for p in check(inv, prefixes)] == [
        "n2: slurm_munge_key must be a string of at least 32 characters (munged refuses a shorter key)"
    ]


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in SLURM_BAD])
def test_bad_slurm_inventory_names_host_and_variable(change, expected) -> None:
    inv = good()
    change(inv)
    assert [str(p) for p in check(inv)] == expected
