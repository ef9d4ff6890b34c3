"""The inventory contract's QoS rules (plugins/module_utils/contract/qos.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with one change; the contract must return
exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.switch import NXOS_RENDERED
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.values import nxos_roce_qos_validate

from tests.unit.plugins.module_utils.contract.inventories import Change, both, cases, good, on_all, reports, setv

pytestmark = pytest.mark.lint


SHARES = "must add up to 100 (the egress shares of the RoCE, fabric TCP and default classes)"
TCP_NOT_ROCE = (
    "only RoCE may carry the no-drop class's DSCP (cluster_tcp_lossless: true marks fabric TCP with it instead)"
)

# id, change to the good inventory, exact errors (str(Problem))
BAD: list[tuple[str, Change, list[str]]] = [
    (
        "qos-host-nodrop-differs-from-switch",
        setv("sw", "nxos_roce_qos_nodrop_cos", 1),
        [
            "all: rdma_qos_pfc_priority 3 differs from sw's nxos_roce_qos_nodrop_cos 1: host and switch must agree",
            "sw: nxos_roce_qos_tcp_qos_group must be a queue of the 4q scheme ([1, 2, 3]) other than the no-drop (1) and CNP (2) queues: fabric TCP is lossy, got 1",
        ],
    ),
    (
        "qos-host-cnp-class-differs-from-switch",
        setv("n2", "rdma_qos_cnp_priority", 7),
        ["n2: rdma_qos_cnp_priority 7 differs from sw's nxos_roce_qos_cnp_qos_group 2: host and switch must agree"],
    ),
    (
        "qos-host-dscp-not-classified",
        on_all("rdma_qos_roce_dscp", 24),
        ["all: rdma_qos_roce_dscp 24 is not classified by sw (nxos_roce_qos_roce_dscp [26])"],
    ),
    (
        "qos-host-cnp-dscp-equals-roce",
        on_all("rdma_qos_cnp_dscp", 26),
        [
            "all: rdma_qos_cnp_dscp 26 equals rdma_qos_roce_dscp: CNPs need their own DSCP",
            "all: rdma_qos_cnp_dscp 26 differs from sw's nxos_roce_qos_cnp_dscp 48: host and switch must agree",
        ],
    ),
    (
        "qos-host-cnp-priority-is-pfc",
        setv("n1", "rdma_qos_cnp_priority", 3),
        [
            "n1: rdma_qos_cnp_priority 3 equals rdma_qos_pfc_priority: CNPs need their own strict-priority class",
            "n1: rdma_qos_cnp_priority 3 differs from sw's nxos_roce_qos_cnp_qos_group 2: host and switch must agree",
        ],
    ),
    (
        "qos-host-ets-not-100",
        both(on_all("rdma_qos_roce_bandwidth_percent", 40), setv("sw", "nxos_roce_qos_roce_bandwidth_percent", 40)),
        [
            f"all: rdma_qos_roce_bandwidth_percent 40 + rdma_qos_tcp_bandwidth_percent 25 + "
            f"rdma_qos_default_bandwidth_percent 25 {SHARES}",
            f"sw: nxos_roce_qos_roce_bandwidth_percent 40 + nxos_roce_qos_tcp_bandwidth_percent 25 + "
            f"nxos_roce_qos_default_bandwidth_percent 25 {SHARES}",
        ],
    ),
    (
        "qos-cluster-shares-not-100",
        on_all("cluster_tcp_bandwidth_percent", 30),
        [
            f"all: cluster_roce_bandwidth_percent 50 + cluster_tcp_bandwidth_percent 30 + "
            f"cluster_default_bandwidth_percent 25 {SHARES}"
        ],
    ),
    (
        # What a real run hands over: the role's and the switch's defaults repeat the cluster_* shares; one report.
        "qos-shares-inherited-reported-once",
        both(
            on_all("cluster_tcp_bandwidth_percent", 30),
            on_all("rdma_qos_tcp_bandwidth_percent", 30),
            setv("sw", "nxos_roce_qos_tcp_bandwidth_percent", 30),
        ),
        [
            f"all: cluster_roce_bandwidth_percent 50 + cluster_tcp_bandwidth_percent 30 + "
            f"cluster_default_bandwidth_percent 25 {SHARES}"
        ],
    ),
    (
        "qos-host-tcp-shares-differ-from-switch",
        both(on_all("rdma_qos_tcp_bandwidth_percent", 20), on_all("rdma_qos_default_bandwidth_percent", 30)),
        [
            "all: rdma_qos_tcp_bandwidth_percent 20 differs from sw's nxos_roce_qos_tcp_bandwidth_percent 25: host and "
            "switch must agree",
            "all: rdma_qos_default_bandwidth_percent 30 differs from sw's nxos_roce_qos_default_bandwidth_percent 25: "
            "host and switch must agree",
        ],
    ),
    (
        "qos-host-profile-differs-from-switch",
        setv("sw", "nxos_roce_qos_profile", "pfc_only"),
        ["all: rdma_qos_profile dcqcn differs from sw's nxos_roce_qos_profile pfc_only: host and switch must agree"],
    ),
    (
        "qos-tcp-dscp-is-roce",
        on_all("cluster_tcp_dscp", 26),
        [f"all: cluster_tcp_dscp 26 equals cluster_roce_dscp: {TCP_NOT_ROCE}"],
    ),
    (
        # The role's and the switch's defaults repeat the clash of the cluster_* values: reported there, once.
        "qos-tcp-dscp-inherited-reported-once",
        both(on_all("cluster_tcp_dscp", 26), on_all("rdma_qos_tcp_dscp", 26), setv("sw", "nxos_roce_qos_tcp_dscp", 26)),
        [f"all: cluster_tcp_dscp 26 equals cluster_roce_dscp: {TCP_NOT_ROCE}"],
    ),
    (
        "qos-host-tcp-dscp-is-cnp",
        setv("n2", "rdma_qos_tcp_dscp", 48),
        [
            "n2: rdma_qos_tcp_dscp 48 equals rdma_qos_cnp_dscp: fabric TCP must not ride the CNPs' strict-priority "
            "class",
            "n2: rdma_qos_tcp_dscp 48 differs from sw's nxos_roce_qos_tcp_dscp 10: host and switch must agree",
        ],
    ),
    (
        "qos-switch-tcp-dscp-in-roce-list",
        both(setv("sw", "nxos_roce_qos_roce_dscp", [24, 26]), setv("sw", "nxos_roce_qos_tcp_dscp", 24)),
        # The switch's own rules refuse it (one report: the contract steps aside for a value they refuse).
        [
            "sw: nxos_roce_qos_tcp_dscp must be a DSCP value 0-63 other than the RoCE and CNP values (fabric TCP needs its own class), got 24"
        ],
    ),
    (
        "qos-tcp-cos-is-cnp",
        on_all("cluster_tcp_cos", 2),
        ["all: cluster_tcp_cos 2 equals cluster_cnp_cos: fabric TCP must not ride the CNPs' strict-priority class"],
    ),
    (
        "qos-host-tcp-priority-differs-from-switch",
        setv("n1", "rdma_qos_tcp_priority", 4),
        ["n1: rdma_qos_tcp_priority 4 differs from sw's nxos_roce_qos_tcp_qos_group 1: host and switch must agree"],
    ),
    (
        "qos-tcp-dscp-differs-per-host",
        setv("n1", "cluster_tcp_dscp", 12),
        ["all: cluster_tcp_dscp differs between hosts (10, 12): the switch and every node must use one value"],
    ),
    (
        "qos-cnp-cos-differs",
        both(setv("n1", "cluster_cnp_cos", 2), setv("sw", "cluster_cnp_cos", 7)),
        ["all: cluster_cnp_cos differs between hosts (2, 7): the switch and every node must use one value"],
    ),
    (
        "cnp-equals-roce",
        on_all("cluster_cnp_dscp", 26),
        ["all: cluster_cnp_dscp 26 equals cluster_roce_dscp: CNPs need their own DSCP"],
    ),
    (
        "qos-differs-per-host",
        setv("n2", "cluster_roce_dscp", 24),
        ["all: cluster_roce_dscp differs between hosts (24, 26): the switch and every node must use one value"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), cases(BAD))
def test_bad_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected


def test_a_role_alone_sees_the_cluster_clash_its_defaults_repeat() -> None:
    """cluster_cnp_cos on the no-drop CoS, as a real run hands it over: the host's and the switch's defaults repeat
    it. Reported once, under cluster_*; rdma_qos used alone (its own variables only) still fails on it, and so does
    the switch role alone."""
    inv = good()
    both(
        on_all("cluster_cnp_cos", 3), on_all("rdma_qos_cnp_priority", 3), setv("sw", "nxos_roce_qos_cnp_qos_group", 3)
    )(inv)
    clash = "all: cluster_cnp_cos 3 equals cluster_nodrop_cos: CNPs need their own strict-priority class"
    assert [str(p) for p in check(inv)] == [clash]
    assert [str(p) for p in check(inv, ("rdma_qos_",))] == [clash]
    # The switch role used alone still refuses it: its own rules (its tasks/assert.yml) see the repeated value.
    rendered = {n: inv.get("sw", n) for n in NXOS_RENDERED if inv.get("sw", n) is not None}
    assert [p["var"] for p in nxos_roce_qos_validate(rendered)] == ["nxos_roce_qos_cnp_qos_group"]
    assert [str(p) for p in check(inv, ("common_",))] == []
