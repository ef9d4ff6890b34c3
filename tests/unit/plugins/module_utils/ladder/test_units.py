"""The ladder's units and thresholds (ladder/units.py): perftest's MB/s, link rates, busbw."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import units
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import units as nc


def test_perftest_mb_per_sec_is_mebibytes() -> None:
    # 1098 MiB/s (the field notes' ib_send_bw) is 9.21 Gb/s: 37 % of a 25 GbE port, not "1 GB/s, fine".
    assert units.mib_per_s_to_gbps(1098) == pytest.approx(9.2106, abs=1e-3)
    assert units.mib_per_s_to_gbps(1) == pytest.approx(0.008388608)


@pytest.mark.parametrize(
    ("raw", "gbps"),
    [
        (25000, 25.0),
        ("100000", 100.0),
        ("100 Gb/sec (4X EDR)", 100.0),
        ("25 Gb/sec (1X EDR)", 25.0),
        ("400 Gb/sec (4X NDR)", 400.0),
        (-1, None),  # ethtool's SPEED_UNKNOWN
        ("-1", None),
        ("", None),
        (None, None),  # veth: reading /sys/class/net/<veth>/speed fails with EINVAL
    ],
)
def test_link_rate(raw, gbps) -> None:
    assert units.link_rate_gbps(raw) == gbps


def test_threshold_never_made_up() -> None:
    assert units.threshold_for(25.0, 0.9) == 22.5
    assert units.threshold_for(None, 0.9) is None


@pytest.mark.parametrize(("world", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_formula(world, factor) -> None:
    assert units.busbw(10.0, world) == pytest.approx(10.0 * factor)


@pytest.mark.parametrize(("mtu", "ib_mtu"), [(9000, 4096), (4200, 4096), (2240, 2048), (1500, 1024), (576, 512)])
def test_required_active_mtu(mtu, ib_mtu) -> None:
    assert nc.required_ib_mtu(mtu) == ib_mtu
