"""The link flaps (plugins/module_utils/node/flaps.py) in the journal: the recording, and lines made from it."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import link_events, parse_log

from tests.unit.plugins.module_utils.node.helpers import NOW, config, fixture, judge, line, one


def flaps(text: str, cfg=None, **facts) -> dict:
    base = {"groups": ["flaps"], "rdma": [{"name": "mlx5_5", "ports": []}],
            "log": {"source": "journalctl", "text": text, "kernel": True}}  # fmt: skip
    cfg = cfg or config(interfaces=[{"name": "eth4"}, {"name": "enp1s0"}])
    return one(judge(base | facts, cfg), "link flaps")


DOWN, UP = "mlx5_core 0000:42:00.1 eth4: Link down", "mlx5_core 0000:42:00.1 eth4: Link up"


def test_link_flaps_from_the_journal() -> None:
    real = fixture("journal_links_xid.txt")
    # The kernel's lines only: systemd-networkd's `Link DOWN` and `Lost carrier` also follow the changes it makes.
    assert link_events(parse_log(real), {"eth4", "mlx5_5", "enp1s0"}) == [
        (1763366400.0, "eth4", "down"), (1763366407.0, "eth4", "up"), (1763366501.0, "mlx5_5:1", "up"),
    ]  # fmt: skip
    # The recording: eth4 down 7 s, a short flap: a warning.
    assert flaps(real) == check("link flaps", "warn", "eth4: 1 short link flap(s) in 24 h (longest 7 s)")
    # Down and not back up: an outage that is still going on.
    got = flaps(real + line(NOW - 100, DOWN))
    assert got["status"] == "fail" and got["detail"].startswith(
        "eth4: down 100 s from 2025-11-17T08:05:00Z (still down)"
    )
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 593, UP))["status"] == "warn"
    # One outage of 30 s or more fails (NVIDIA rdma_linkflap_fatal); 29 s does not.
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 570, UP))["detail"].startswith("eth4: down 30 s from")
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 571, UP))["status"] == "warn"
    # Five short flaps in the window fail (Azure check_ib_link_flapping); four warn.
    five = "".join(line(NOW - 1000 + 10 * i, DOWN) + line(NOW - 999 + 10 * i, UP) for i in range(5))
    assert flaps(five)["detail"] == "eth4: 5 link flaps in 24 h"
    assert flaps(five.split("\n", 2)[2])["status"] == "warn"
    # The RDMA core's port state on InfiniBand: DOWN ... ACTIVE.
    ib = line(NOW - 600, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN") + line(
        NOW - 500, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"
    )
    assert flaps(ib)["detail"].startswith("mlx5_5:1: down 100 s from")
    # Outside the window, before this boot, or on another interface: not counted.
    assert flaps(line(NOW - 90000, DOWN) + line(NOW - 80000, UP))["status"] == "pass"
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 500, UP), boot_time=NOW - 300)["status"] == "pass"
    other = line(NOW - 600, "mlx5_core 0000:42:00.0 eth9: Link down")
    assert flaps(other) == check("link flaps", "pass", "no link flap in 24 h on enp1s0, eth4, mlx5_5")


def test_link_flaps_skip_where_the_kernel_log_is_not_there() -> None:
    container = flaps("", log={"source": "journalctl", "text": "", "kernel": False})
    assert container["status"] == "skip" and "no kernel message" in container["detail"]
    unreadable = flaps("", log={"error": "journalctl not installed; dmesg: dmesg: read kernel buffer failed"})
    assert unreadable["status"] == "skip" and "journalctl not installed" in unreadable["detail"]
