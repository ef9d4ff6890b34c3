"""The QoS values host and switch share, defined once: what a DSCP, a CoS, a priority and a bandwidth share may be,
the QoS profiles, and the ToS byte RoCE traffic carries.

The inventory contract types every DSCP, priority and share variable with these ranges (cluster_*, rdma_qos_*,
and the switch's values it compares), the switch's value rules (switch/values.py) check what they render into NX-OS
with them, and rdma_qos computes the one ToS the RDMA-CM, NCCL (NCCL_IB_TC) and perftest (--tclass) get with
roce_tos(): nothing else writes the ranges or the formula. Stdlib only, so the switch's validator can import it too.
Tested in tests/unit/plugins/module_utils/host/test_qos.py, and as the switch reads them in
tests/unit/plugins/module_utils/switch/test_queues.py.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

# The 6-bit DSCP field of the IPv4 ToS / IPv6 traffic class byte (RFC 2474, section 3).
DSCP_RANGE = (0, 63)
# The 3-bit 802.1p priority (PCP) field: what a switch's CoS or qos-group value may be, the default class 0 included
# (the switch's `set qos-group` of class-default).
COS_RANGE = (0, 7)
# An 802.1p priority that is a class of its own: the host's DCB priority and traffic class, the switch's CoS,
# qos-group and queue. 0 is the default class every other priority shares (and a 4-queue Nexus has queues 1-3
# besides it: the switch's queue schemes, switch/queues.py, narrow this).
PRIORITY_RANGE = (COS_RANGE[0] + 1, COS_RANGE[1])
# An egress bandwidth share: the host's ETS tc-bw, the switch's `bandwidth remaining percent`.
PERCENT_RANGE = (0, 100)

# cluster_qos_profile. dcqcn: PFC, WRED-ECN on the switches and DCQCN on the NICs, RoCE sent ECN-capable (NVIDIA's
# lossless RoCE recipe, `cma_roce_tos -t 106`). pfc_only: PFC alone, no ECN marking, DCQCN off where the driver
# lets the host turn it off (Meta, SIGCOMM 2024: over a year at 400G with PFC and no transport congestion control).
PROFILES = ("dcqcn", "pfc_only")
# ECN field of the ToS byte (RFC 3168, section 5).
NOT_ECT = 0b00
ECT0 = 0b10


def roce_tos(dscp: int, profile: str) -> int:
    """The ToS byte RoCE traffic carries: the DSCP in the upper six bits; ECT(0) in the ECN bits under dcqcn (a
    WRED-ECN queue then marks CE instead of dropping, and the receiver answers with CNPs), Not-ECT under pfc_only
    (no switch marks). DSCP 26: 106 and 104."""
    if profile not in PROFILES:
        raise RuleError(f"QoS profile {profile!r} must be one of {', '.join(PROFILES)}")
    if not DSCP_RANGE[0] <= dscp <= DSCP_RANGE[1]:
        raise RuleError(f"DSCP {dscp} must lie within {DSCP_RANGE[0]}-{DSCP_RANGE[1]}")
    return dscp << 2 | (ECT0 if profile == "dcqcn" else NOT_ECT)
