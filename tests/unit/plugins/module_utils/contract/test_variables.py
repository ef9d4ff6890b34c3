"""The inventory contract's rows, one per variable (plugins/module_utils/contract/variables.py): exact messages
for types, ranges, choices and patterns, required variables and the contract's groups.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.monitoring import MONITORING_ROWS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.rolling import ROLLING_ROWS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.slurm import SLURM_ROWS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.variables import VARIABLES

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.contract.inventories import Change, cases, on_all, reports, setv

pytestmark = pytest.mark.lint


# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "no-interfaces",
        setv("n1", "cluster_fabric_interfaces", []),
        ["n1: cluster_fabric_interfaces must be a non-empty list of interfaces"],
    ),
    (
        "interfaces-missing",
        lambda inv: inv.hostvars["n1"].pop("cluster_fabric_interfaces"),
        ["n1: cluster_fabric_interfaces is required (see docs/design.md)"],
    ),
    (
        "bad-hostname",
        setv("n1", "common_hostname", "node_1"),
        ["n1: common_hostname must be a hostname (letters, digits, '-', at most 63) (got 'node_1')"],
    ),
    (
        "rank-not-a-number",
        setv("n2", "cluster_node_rank", "one"),
        ["n2: cluster_node_rank must be an integer >= 0 (got 'one')"],
    ),
    ("roce-dscp-64", on_all("cluster_roce_dscp", 64), ["all: cluster_roce_dscp must be an integer 0-63 (got 64)"]),
    (
        "qos-mark-host-address",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": ["192.168.250.201/24"], "ipv6": []}),
        [
            "n1: rdma_qos_mark_networks ipv4: '192.168.250.201/24' is not an IPv4 network in CIDR notation (no host bits)"
        ],
    ),
    (
        "qos-mark-injection",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": ["10.0.0.0/8 } accept; {"], "ipv6": []}),
        [
            "n1: rdma_qos_mark_networks ipv4: '10.0.0.0/8 } accept; {' is not an IPv4 network in CIDR notation (no host bits)"
        ],
    ),
    (
        "qos-mark-family",
        setv("n1", "rdma_qos_mark_networks", {"ipv4": [], "ipv6": ["10.0.0.0/8"]}),
        ["n1: rdma_qos_mark_networks ipv6: '10.0.0.0/8' is not an IPv6 network in CIDR notation (no host bits)"],
    ),
    (
        "qos-mark-shape",
        setv("n1", "rdma_qos_mark_networks", ["192.168.250.0/24"]),
        [
            "n1: rdma_qos_mark_networks must be {ipv4: [CIDR ...], ipv6: [CIDR ...]} of network addresses "
            "(got ['192.168.250.0/24'])"
        ],
    ),
    (
        "qos-host-priority-0",
        setv("n1", "rdma_qos_pfc_priority", 0),
        ["n1: rdma_qos_pfc_priority must be an integer 1-7 (got 0)"],
    ),
    (
        "qos-share-type",
        on_all("cluster_tcp_bandwidth_percent", 101),
        ["all: cluster_tcp_bandwidth_percent must be an integer 0-100 (got 101)"],
    ),
    (
        "qos-profile-choice",
        on_all("cluster_qos_profile", "lossless"),
        ["all: cluster_qos_profile must be one of dcqcn, pfc_only (got 'lossless')"],
    ),
    (
        "qos-host-tcp-dscp-type",
        setv("n1", "rdma_qos_tcp_dscp", 64),
        ["n1: rdma_qos_tcp_dscp must be an integer 0-63 (got 64)"],
    ),
    (
        "qos-tcp-lossless-type",
        on_all("cluster_tcp_lossless", "maybe"),
        ["all: cluster_tcp_lossless must be true or false (got 'maybe')"],
    ),
    (
        "qos-qps-per-connection-0",
        on_all("cluster_nccl_ib_qps_per_connection", 0),
        ["all: cluster_nccl_ib_qps_per_connection must be an integer 1-128 (got 0)"],
    ),
    ("nodrop-cos-9", on_all("cluster_nodrop_cos", 9), ["all: cluster_nodrop_cos must be an integer 1-7 (got 9)"]),
    (
        "link-layer-unknown",
        on_all("cluster_link_layer", "roce"),
        ["all: cluster_link_layer must be one of ethernet, infiniband (got 'roce')"],
    ),
    (
        "empty-node-group",
        lambda inv: inv.groups.__setitem__("rdma_nodes", []),
        [
            "inventory: group rdma_nodes has no hosts (a misspelt group name leaves it empty)",
            "n1: group subnet_managers holds a host that is not in rdma_nodes",
        ],
    ),
    (
        "subnet-manager-not-a-node",
        lambda inv: inv.groups.__setitem__("subnet_managers", ["sw"]),
        ["sw: group subnet_managers holds a host that is not in rdma_nodes"],
    ),
    (
        "host-in-no-group",
        lambda inv: inv.groups.__setitem__("ungrouped", ["n3"]),
        ["n3: groups puts the host in no group of the contract (rdma_nodes, subnet_managers, switches)"],
    ),
    (
        "module-name-injection",
        setv("n1", "rdma_modules_list", ["ib_umad", "mlx5_ib; reboot"]),
        ["n1: rdma_modules_list [1] must be a module name (a-z, 0-9, '_', '-') (got 'mlx5_ib; reboot')"],
    ),
    (
        "gpudirect-mode-word",
        setv("n1", "rdma_modules_gpudirect", "always"),
        ["n1: rdma_modules_gpudirect must be true, false or auto (got 'always')"],
    ),
    (
        "gpudirect-module-injection",
        setv("n1", "rdma_modules_gpudirect_list", ["nvidia_peermem\nreboot"]),
        [
            "n1: rdma_modules_gpudirect_list [0] must be a module name (a-z, 0-9, '_', '-') (got 'nvidia_peermem\\nreboot')"
        ],
    ),
    (
        "serve-port-zero",
        setv("n1", "serve_port", 0),
        ["n1: serve_port must be an integer 1-65535 (got 0)"],
    ),
    (
        "serve-dtype-word",
        setv("n1", "serve_dtype", "half"),
        ["n1: serve_dtype must be one of auto, float32, bfloat16, float16 (got 'half')"],
    ),
    (
        "serve-health-timeout-zero",
        setv("n1", "serve_health_timeout", 0),
        ["n1: serve_health_timeout must be an integer >= 1 (got 0)"],
    ),
    (
        "gpu-driver-version",
        setv("n1", "gpu_stack_driver_version", "580"),
        ["n1: gpu_stack_driver_version must be a driver version like 580.95.05 (got '580')"],
    ),
    (
        "gpu-driver-version-injection",
        setv("n1", "gpu_stack_driver_version", "580.95.05 nvidia-driver-575"),
        ["n1: gpu_stack_driver_version must be a driver version like 580.95.05 (got '580.95.05 nvidia-driver-575')"],
    ),
    (
        "gpu-fabric-manager-word",
        setv("n1", "gpu_stack_fabric_manager", "nvswitch"),
        ["n1: gpu_stack_fabric_manager must be true, false or auto (got 'nvswitch')"],
    ),
    (
        "gpu-kernel-flavour",
        setv("n1", "gpu_stack_kernel_flavour", "generic hwe"),
        ["n1: gpu_stack_kernel_flavour must be a kernel flavour (generic, aws ...) (got 'generic hwe')"],
    ),
    (
        "gpu-dcgm-package",
        setv("n1", "gpu_stack_dcgm_packages", ["datacenter-gpu-manager-4-cuda12", "-o APT::Get=x"]),
        ["n1: gpu_stack_dcgm_packages [1] must be a Debian package name (got '-o APT::Get=x')"],
    ),
    (
        "gpu-catalog-entry-id",
        setv("n1", "gpu_stack_gpus", {"10de:2901": {"architecture": "blackwell"}}),
        ["n1: gpu_stack_gpus '10de:2901': a device id is 4 lower-case hex digits, as sysfs shows it (2330)"],
    ),
    (
        "gpu-catalog-entry-architecture",
        setv("n1", "gpu_stack_gpus", {"2901": {"name": "B200"}}),
        [
            "n1: gpu_stack_gpus 2901: needs an architecture, one of volta, turing, ampere, ada, hopper, blackwell (got {'name': 'B200'})"
        ],
    ),
    (
        "doca-without-repository",
        setv("n1", "rdma_stack_doca", {"version": "3.2.1"}),
        ["n1: rdma_stack_doca DOCA needs its repository: repository is required with a version"],
    ),
    (
        "gpu-blacklist-file",
        setv("n1", "gpu_stack_blacklist_file", "/etc/nouveau.conf"),
        ["n1: gpu_stack_blacklist_file must be a .conf file in a modprobe.d directory (got '/etc/nouveau.conf')"],
    ),
    (
        "netplan-file-outside",
        setv("n1", "rdma_netplan_file", "/etc/fabric.yaml"),
        ["n1: rdma_netplan_file must be a .yaml file directly in /etc/netplan (got '/etc/fabric.yaml')"],
    ),
    (
        "opensm-priority-16",
        setv("n1", "rdma_stack_opensm_priority", 16),
        ["n1: rdma_stack_opensm_priority must be an integer 0-15 (got 16)"],
    ),
    (
        "opensm-ports-bad",
        setv("n1", "rdma_stack_opensm_ports", ["0x12"]),
        ["n1: rdma_stack_opensm_ports must be ALL or a list of 0x<16 hex digits> port GUIDs (got ['0x12'])"],
    ),
    (
        "node-health-gpus-negative",
        setv("n2", "node_health_gpus", -1),
        ["n2: node_health_gpus must be an integer >= 0 (got -1)"],
    ),
    (
        "node-health-command-relative",
        setv("n1", "node_health_command", "rdma-node-check"),
        ["n1: node_health_command must be an absolute path (got 'rdma-node-check')"],
    ),
    (
        "firewall-port-not-a-number",
        setv("n1", "fabric_firewall_extra_ports", ["ssh"]),
        ["n1: fabric_firewall_extra_ports [0] must be an integer 1-65535 (got 'ssh')"],
    ),
    (
        "firewall-train-group",
        on_all("fabric_firewall_train_group", "Train Group"),
        [
            "all: fabric_firewall_train_group must be a group name (a-z, 0-9, '_', '-', at most 32, not starting with "
            "a digit) (got 'Train Group')"
        ],
    ),
    (
        "reset-packages-not-a-bool",
        setv("n1", "rdma_stack_reset_packages", "sometimes"),
        ["n1: rdma_stack_reset_packages must be true or false (got 'sometimes')"],
    ),
    (
        # `-e train_launch_detach=ture` reaches every host: refused (as `| bool` would read it as false).
        "launch-detach-typo-from-extra-vars",
        on_all("train_launch_detach", "ture"),
        ["all: train_launch_detach must be true or false (got 'ture')"],
    ),
    (
        "validate-keep-going-typo",
        setv("n2", "cluster_validate_keep_going", "yse"),
        ["n2: cluster_validate_keep_going must be true or false (got 'yse')"],
    ),
    (
        "launch-root-relative",
        setv("n1", "train_launch_root", "runs"),
        ["n1: train_launch_root must be an absolute path (got 'runs')"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected


def boolean_defaults() -> dict[str, str]:
    """Every role default whose value is a YAML boolean: {variable: role}."""
    found = {}
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            if isinstance(value, bool):
                found[name] = path.parts[-3]
    return found


def test_every_boolean_default_has_a_boolean_row() -> None:
    """A role's flag is read with `| bool`, which takes a mistyped word for false: each one must have a row (VARIABLES
    or the Slurm, monitoring or rolling rows) that refuses `ture` and takes true and false, so the next flag a role adds cannot escape."""
    found = boolean_defaults()
    assert len(found) > 30, found  # the sweep reads the roles (a wrong path would find none)
    rows = {v.name: v.check for v in VARIABLES + SLURM_ROWS} | dict(MONITORING_ROWS) | dict(ROLLING_ROWS)
    missing = sorted(f"{role}: {name}" for name, role in found.items() if name not in rows)
    assert missing == [], "add a Var(name, <group>, boolean()) row in contract/variables.py"
    loose = sorted(
        name
        for name in found
        if rows[name]("ture") is None or rows[name](True) or rows[name](False) or rows[name]("no")
    )
    assert loose == [], "these rows do not check a boolean"
