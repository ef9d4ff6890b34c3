#!/usr/bin/python
"""Module rdma_llm.cluster.rdma_qos: the host's RoCE QoS (rules in module_utils/rdma_qos.py)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.rdma_qos import Host, QosError, Wanted, apply

DOCUMENTATION = r"""
module: rdma_qos
short_description: Trust DSCP, PFC, ETS, DCQCN and the RDMA-CM ToS on the fabric NICs, or report why not
description:
  - Per fabric interface, with iproute2 C(dcb), maps DSCP to priorities (C(dcb app)), enables PFC on the
    no-drop priority only (C(dcb pfc)) and sets ETS (C(dcb ets)); enables DCQCN on the no-drop priority where the
    driver exposes C(/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>) (mlx5).
  - Per RDMA device with an Ethernet port, writes C(default_roce_tos) in configfs C(rdma_cm).
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
  roce_dscp: {description: DSCP of RoCE data traffic., type: int, required: true}
  cnp_dscp: {description: DSCP of CNPs., type: int, required: true}
  pfc_priority: {description: No-drop priority (PFC on, RoCE traffic class)., type: int, required: true}
  cnp_priority: {description: Priority of CNPs (strict-priority traffic class)., type: int, required: true}
  roce_bandwidth: {description: ETS share of the no-drop traffic class (percent)., type: int, required: true}
  default_bandwidth: {description: ETS share of traffic class 0 (percent)., type: int, required: true}
  tos_ecn: {description: ECN bits (0-3) added to DSCP << 2 in the RDMA-CM ToS., type: int, default: 0}
  dcb: {description: Manage DCB (app, PFC, ETS)., type: bool, default: true}
  dcqcn: {description: Enable DCQCN on the no-drop priority where the driver exposes it., type: bool, default: true}
  roce_tos: {description: Set the RDMA-CM default RoCE ToS., type: bool, default: true}
  root: {description: Root of sysfs and configfs (tests point it at a fake tree)., type: path, default: /}
author: rdma-llm-cluster
"""

RETURN = r"""
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


def main() -> None:
    spec = {
        "interfaces": {"type": "list", "elements": "str", "required": True},
        "devices": {"type": "list", "elements": "str", "default": []},
        "roce_dscp": {"type": "int", "required": True},
        "cnp_dscp": {"type": "int", "required": True},
        "pfc_priority": {"type": "int", "required": True},
        "cnp_priority": {"type": "int", "required": True},
        "roce_bandwidth": {"type": "int", "required": True},
        "default_bandwidth": {"type": "int", "required": True},
        "tos_ecn": {"type": "int", "default": 0},
        "dcb": {"type": "bool", "default": True},
        "dcqcn": {"type": "bool", "default": True},
        "roce_tos": {"type": "bool", "default": True},
        "root": {"type": "path", "default": "/"},
    }
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    wanted = Wanted(
        **{
            k: p[k]
            for k in (
                "roce_dscp",
                "cnp_dscp",
                "pfc_priority",
                "cnp_priority",
                "roce_bandwidth",
                "default_bandwidth",
                "tos_ecn",
            )
        }
    )

    def runner(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    host = Host(root=p["root"], run=runner, check_mode=module.check_mode)
    try:
        result = apply(host, p["interfaces"], wanted, p["devices"], p["dcb"], p["dcqcn"], p["roce_tos"])
    except QosError as exc:
        module.fail_json(msg=str(exc), commands=host.commands)
    diff = {"before": "", "after": "\n".join(result["commands"]) + "\n"} if result["commands"] else None
    module.exit_json(diff=diff, **result)


if __name__ == "__main__":
    main()
