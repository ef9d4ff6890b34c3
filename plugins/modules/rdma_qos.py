#!/usr/bin/python
"""Module rdma_llm.cluster.rdma_qos: the host's RoCE QoS (rules in module_utils/host/qos.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rdma_qos
short_description: DSCP trust, PFC, ETS, DCQCN, CNP marking and RDMA-CM ToS on the fabric NICs, or why not
description:
  - Per fabric interface, with iproute2 C(dcb), maps the RoCE, CNP and fabric TCP DSCPs to their priorities
    (C(dcb app)), enables PFC on the no-drop priority only (C(dcb pfc)) and sets ETS (C(dcb ets)); turns DCQCN on
    (profile C(dcqcn)) or off (C(pfc_only)) on the no-drop priority where the driver exposes
    C(/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>) (MLNX_OFED/DOCA mlx5); sets the DSCP and priority of
    the CNPs the NIC sends where the driver exposes them (C(ecn/roce_np/cnp_dscp|cnp_802p_prio), or the inbox
    mlx5 driver's debugfs C(mlx5/<pci>/cc_params/np_cnp_*)).
  - Per RDMA device with an Ethernet port, writes C(default_roce_tos) in configfs C(rdma_cm).
  - Returns the ToS (computed here once), NCCL's environment and the DSCP fabric TCP is marked with.
  - Virtual NICs (veth, bridge ...), NICs whose driver has no DCB and hosts without RDMA devices are reported
    (C(not supported on rdma0 (veth))), not failed. A failed change on capable hardware fails.
  - Supports check mode (plans only).
options:
  interfaces:
    description: Fabric network interfaces.
    type: list
    elements: str
    required: true
  devices:
    description: RDMA devices to set the ToS on; empty means every device with an Ethernet port.
    type: list
    elements: str
    default: []
  roce_dscp:
    description: DSCP of RoCE data traffic.
    type: int
    required: true
  cnp_dscp:
    description: DSCP of CNPs.
    type: int
    required: true
  tcp_dscp:
    description: DSCP of fabric TCP (its own lossy class).
    type: int
    required: true
  pfc_priority:
    description: No-drop priority (PFC on, RoCE traffic class).
    type: int
    required: true
  cnp_priority:
    description: Priority of CNPs (strict-priority traffic class).
    type: int
    required: true
  tcp_priority:
    description: Priority and traffic class of fabric TCP.
    type: int
    required: true
  roce_bandwidth:
    description: ETS share of the no-drop traffic class (percent).
    type: int
    required: true
  tcp_bandwidth:
    description: ETS share of the fabric TCP traffic class (percent).
    type: int
    required: true
  default_bandwidth:
    description: ETS share of traffic class 0 (percent).
    type: int
    required: true
  profile:
    description: C(dcqcn) (ToS with ECT(0), DCQCN on) or C(pfc_only) (ToS without ECT, DCQCN off where exposed).
    type: str
    choices: [dcqcn, pfc_only]
    default: dcqcn
  tcp_lossless:
    description: Fabric TCP is marked with the RoCE DSCP instead of its own.
    type: bool
    default: false
  link_layer:
    description: C(ethernet) or C(infiniband) (NCCL gets NCCL_IB_SL there).
    type: str
    choices: [ethernet, infiniband]
    default: ethernet
  ib_sl:
    description: InfiniBand service level for NCCL_IB_SL.
    type: int
    default: 0
  qps_per_connection:
    description: NCCL_IB_QPS_PER_CONNECTION.
    type: int
    default: 1
  dcb:
    description: Manage DCB (app, PFC, ETS).
    type: bool
    default: true
  dcqcn:
    description: Manage DCQCN and the CNPs' marking where the driver exposes them.
    type: bool
    default: true
  roce_tos:
    description: Set the RDMA-CM default RoCE ToS.
    type: bool
    default: true
  reset_concern:
    description:
      - Before changing anything, record (the first time per value) how to put back each value this run replaces,
        under this concern of the reset record (module C(rdma_llm.cluster.reset_record), C(playbooks/reset.yml)).
    type: str
  root:
    description: Root of sysfs and configfs (tests point it at a fake tree).
    type: path
    default: /
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Set the fabric NICs' QoS from the shared values
  rdma_llm.cluster.rdma_qos:
    interfaces: [ens192]
    roce_dscp: 26
    cnp_dscp: 48
    tcp_dscp: 10
    pfc_priority: 3
    cnp_priority: 7
    tcp_priority: 1
    roce_bandwidth: 50
    tcp_bandwidth: 25
    default_bandwidth: 25
    profile: dcqcn
  register: qos
"""

RETURN = r"""
roce_tos:
  description: The ToS byte of RoCE traffic (DSCP << 2, ECT(0) under dcqcn), for the RDMA-CM, NCCL and perftest.
  type: int
  returned: always
tcp_mark_dscp:
  description: The DSCP fabric TCP is marked with (the TCP DSCP, or the RoCE DSCP with tcp_lossless).
  type: int
  returned: always
nccl_env:
  description: NCCL_IB_TC (RoCE) or NCCL_IB_SL (InfiniBand), and NCCL_IB_QPS_PER_CONNECTION.
  type: dict
  returned: always
report:
  description: One line per finding, for people.
  type: list
  returned: always
unsupported:
  description: What could not be set and why, e.g. C(not supported on rdma0 (veth)).
  type: list
  returned: always
commands:
  description: Changes made (or that would be made in check mode), as shell lines.
  type: list
  returned: always
boot_commands:
  description: The complete wanted state as shell lines, for the boot-time unit.
  type: list
  returned: always
interfaces:
  description: Per interface, kind, driver and the state of each feature.
  type: list
  returned: always
devices:
  description: Per RDMA device port, the ToS and its state.
  type: list
  returned: always
"""

from dataclasses import fields

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos import Host, QosError, Wanted, apply, nccl_env
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import PROFILES
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import record as reset_record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import store as reset_store


def main() -> None:
    spec = {
        "interfaces": {"type": "list", "elements": "str", "required": True},
        "devices": {"type": "list", "elements": "str", "default": []},
        "roce_dscp": {"type": "int", "required": True},
        "cnp_dscp": {"type": "int", "required": True},
        "tcp_dscp": {"type": "int", "required": True},
        "pfc_priority": {"type": "int", "required": True},
        "cnp_priority": {"type": "int", "required": True},
        "tcp_priority": {"type": "int", "required": True},
        "roce_bandwidth": {"type": "int", "required": True},
        "tcp_bandwidth": {"type": "int", "required": True},
        "default_bandwidth": {"type": "int", "required": True},
        "profile": {"type": "str", "choices": list(PROFILES), "default": PROFILES[0]},
        "tcp_lossless": {"type": "bool", "default": False},
        "link_layer": {"type": "str", "choices": ["ethernet", "infiniband"], "default": "ethernet"},
        "ib_sl": {"type": "int", "default": 0},
        "qps_per_connection": {"type": "int", "default": 1},
        "dcb": {"type": "bool", "default": True},
        "dcqcn": {"type": "bool", "default": True},
        "roce_tos": {"type": "bool", "default": True},
        "reset_concern": {"type": "str"},
        "root": {"type": "path", "default": "/"},
    }
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    wanted = Wanted(**{f.name: p[f.name] for f in fields(Wanted)})

    def runner(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    host = Host(root=p["root"], run=runner, check_mode=module.check_mode)
    features = (p["devices"], p["dcb"], p["dcqcn"], p["roce_tos"])
    try:
        if p["reset_concern"] and not module.check_mode:
            # A planning pass first: what this run would replace is recorded before the first change is made.
            plan = Host(root=p["root"], run=runner, check_mode=True)
            apply(plan, p["interfaces"], wanted, *features)
            if plan.undo:
                store = reset_store.Host(root=p["root"], run=runner)
                reset_record.record(store, p["reset_concern"], reset_record.Spec(undo=plan.undo))
        result = apply(host, p["interfaces"], wanted, *features)
        result["nccl_env"] = nccl_env(p["link_layer"], wanted.tos, p["ib_sl"], p["qps_per_connection"])
    except (QosError, RuleError, reset_store.ResetError) as exc:
        module.fail_json(msg=str(exc), commands=host.commands)
    diff = {"before": "", "after": "\n".join(result["commands"]) + "\n"} if result["commands"] else None
    module.exit_json(diff=diff, **result)


if __name__ == "__main__":
    main()
