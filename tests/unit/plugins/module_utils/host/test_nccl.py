"""rdma_stack's endpoint and NCCL rules (plugins/module_utils/host/nccl.py), which the launch,
the validation ladder and the run report share: the endpoint picked from what the one sysfs reader
(rdma_sysfs_devices) returns on fake /sys/class/infiniband trees, NCCL's settings, and NCCL's log judged."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as N
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import collectives as validate_rungs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import pairing as validate_pairing
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import train as tl
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import rdma_devices

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "validate"


def test_one_module_serves_every_role_that_uses_it() -> None:
    """The launch and the ladder import rdma_stack's rules by name (a copy would let the rules drift apart)."""
    assert validate_rungs.nccl_rules is N and validate_pairing.nccl_rules is N and tl.nccl_rules is N


def fake_sysfs(
    root, layer: str, gids: list[tuple[str, str, str]], state: str = "4: ACTIVE", dev: str = "mlx5_0"
) -> None:
    """A /sys/class/infiniband tree shaped like the kernel's (Documentation/ABI/stable/sysfs-class-infiniband):
    `dev` port 1 with GIDs (value, type, netdev) at indexes 0.."""
    port = root / dev / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    (port / "link_layer").write_text(layer + "\n")
    (port / "state").write_text(state + "\n")
    for i, (gid, kind, ndev) in enumerate(gids):
        (port / "gids" / str(i)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(i)).write_text(kind + "\n")
        (port / "gid_attrs" / "ndevs" / str(i)).write_text(ndev + "\n")


def read_sysfs(tmp_path, root) -> list[dict]:
    """The one sysfs reader (module_utils/node/sysfs.py, behind rdma_stack's module) on the fake tree."""
    return rdma_devices(str(root))


# A RoCE port as mlx5 lays it out: link-local GIDs (v1, v2) first, then the IPv4-mapped ones.
ROCE_GIDS = [
    ("fe80:0000:0000:0000:0e42:a1ff:fe00:0001", "IB/RoCE v1", "rdma0"),
    ("fe80:0000:0000:0000:0e42:a1ff:fe00:0001", "RoCE v2", "rdma0"),
    ("0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1", "rdma0"),
    ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "rdma0"),
]
IB_GIDS = [("fe80:0000:0000:0000:0002:c903:0000:0001", "IB/RoCE v1", "")]


@pytest.mark.parametrize(
    ("layer", "gids", "state", "ipv4", "hca", "gid_index", "note"),
    [
        ("Ethernet", ROCE_GIDS, "4: ACTIVE", "10.0.0.1", "mlx5_0", 3, "RoCEv2 GID 3 of mlx5_0 port 1 carries 10.0.0.1"),
        ("Ethernet", ROCE_GIDS, "4: ACTIVE", "10.0.0.2", None, None, "RDMA devices mlx5_0 present, none carries"),
        ("Ethernet", [(g, t, "eth9") for g, t, _ in ROCE_GIDS], "4: ACTIVE", "10.0.0.1", None, None, "RDMA devices"),
        # Only the v1 GID carries the address: NCCL and perftest need v2 (routable) on a RoCEv2 fabric.
        ("Ethernet", ROCE_GIDS[:3], "4: ACTIVE", "10.0.0.1", None, None, "RDMA devices mlx5_0 present"),
        ("InfiniBand", IB_GIDS, "4: ACTIVE", "10.0.0.1", "mlx5_0", None, "InfiniBand port 1 of mlx5_0 (ACTIVE)"),
        # A port still waiting for the subnet manager carries no traffic.
        ("InfiniBand", IB_GIDS, "2: INIT", "10.0.0.1", None, None, "RDMA devices mlx5_0 present"),
    ],
)
def test_endpoint_from_the_sysfs_reader(tmp_path, layer, gids, state, ipv4, hca, gid_index, note) -> None:
    root = tmp_path / "infiniband"
    fake_sysfs(root, layer, gids, state)
    got = N.endpoint(read_sysfs(tmp_path, root), "rdma0", ipv4)
    assert (got["hca"], got["gid_index"]) == (hca, gid_index)
    assert got["note"].startswith(note), got
    assert got["devices"] == ["mlx5_0"]


def test_endpoint_prefers_the_roce_port_that_carries_the_address(tmp_path) -> None:
    root = tmp_path / "infiniband"
    fake_sysfs(root, "InfiniBand", IB_GIDS, dev="mlx5_0")
    fake_sysfs(root, "Ethernet", [(g, t, "rdma0") for g, t, _ in ROCE_GIDS], dev="mlx5_1")
    got = N.endpoint(read_sysfs(tmp_path, root), "rdma0", "10.0.0.1")
    assert (got["hca"], got["port"], got["gid_index"], got["link_layer"]) == ("mlx5_1", 1, 3, "Ethernet")


def _roce(ifname: str, last: str, offset: int = 0) -> list[tuple[str, str, str]]:
    """A RoCE port's GIDs for 10.0.<n>.1 on `ifname`, its RoCE v2 one at index 3 + offset."""
    lead = [(f"fe80:0000:0000:0000:0e42:a1ff:fe00:00{i:02x}", "IB/RoCE v1", "") for i in range(offset)]
    mapped = f"0000:0000:0000:0000:0000:ffff:0a00:{last}"
    return [
        *lead,
        *((g, t, ifname) for g, t, _ in ROCE_GIDS[:2]),
        (mapped, "IB/RoCE v1", ifname),
        (mapped, "RoCE v2", ifname),
    ]


RAIL_IFS = [
    {"name": "ens1f0", "addresses": ["10.0.0.1/24"]},
    {"name": "ens2f0", "addresses": ["fd00::1/64", "10.0.1.1/24"]},
    {"name": "ens3f0", "addresses": ["10.0.2.1/24"]},  # no RDMA device carries it: not a rail
]


def test_rails_one_per_fabric_interface_that_carries_its_address(tmp_path) -> None:
    """A node with a NIC per GPU: NCCL gets every rail, not the first NIC only (1/8 of an 8-rail node's bandwidth)."""
    root = tmp_path / "infiniband"
    fake_sysfs(root, "Ethernet", _roce("ens1f0", "0001"), dev="mlx5_0")
    fake_sysfs(root, "Ethernet", _roce("ens2f0", "0101"), dev="mlx5_1")
    got = N.rails(read_sysfs(tmp_path, root), RAIL_IFS)
    assert (got["hca"], got["gid_index"]) == ("mlx5_0", 3)
    assert [(r["hca"], r["port"], r["gid_index"], r["interface"]) for r in got["rails"]] == [
        ("mlx5_0", 1, 3, "ens1f0"), ("mlx5_1", 1, 3, "ens2f0")]  # fmt: skip
    assert got["note"].endswith("; rails mlx5_0:1 (ens1f0), mlx5_1:1 (ens2f0)")
    env = N.nccl_env(got, {"NCCL_IB_TC": 106}, "ens1f0")
    assert env == {"NCCL_SOCKET_IFNAME": "=ens1f0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "3",
                   "NCCL_IB_TC": "106"}  # fmt: skip


def test_rails_with_different_gid_indexes_leave_the_index_to_nccl(tmp_path) -> None:
    root = tmp_path / "infiniband"
    fake_sysfs(root, "Ethernet", _roce("ens1f0", "0001"), dev="mlx5_0")
    fake_sysfs(root, "Ethernet", _roce("ens2f0", "0101", offset=2), dev="mlx5_1")
    got = N.rails(read_sysfs(tmp_path, root), RAIL_IFS)
    assert [r["gid_index"] for r in got["rails"]] == [3, 5]
    env = N.nccl_env(got)
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1" and "NCCL_IB_GID_INDEX" not in env
    assert "GID indexes differ" in got["note"]


def test_rails_on_infiniband_are_the_active_ports(tmp_path) -> None:
    root = tmp_path / "infiniband"
    fake_sysfs(root, "InfiniBand", IB_GIDS, dev="mlx5_0")
    fake_sysfs(root, "InfiniBand", IB_GIDS, state="1: DOWN", dev="mlx5_1")
    fake_sysfs(root, "InfiniBand", IB_GIDS, dev="mlx5_2")
    got = N.rails(read_sysfs(tmp_path, root), [{"name": "ib0", "addresses": ["10.1.0.1/16"]}])
    assert got["hca"] == "mlx5_0" and [r["hca"] for r in got["rails"]] == ["mlx5_0", "mlx5_2"]
    assert N.nccl_env(got) == {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_2:1"}


def test_no_rails_without_an_endpoint_on_the_fabric_interface(tmp_path) -> None:
    root = tmp_path / "infiniband"
    fake_sysfs(root, "Ethernet", _roce("ens2f0", "0101"), dev="mlx5_1")
    got = N.rails(read_sysfs(tmp_path, root), RAIL_IFS)
    assert got["hca"] is None and got["rails"] == [] and N.nccl_env(got, {"NCCL_IB_TC": 106}) == {}
    assert N.rails([], [])["note"] == "no RDMA device found"


def test_endpoint_without_devices(tmp_path) -> None:
    assert N.endpoint(read_sysfs(tmp_path, tmp_path / "none"), "rdma0", "10.0.0.1")["note"] == "no RDMA device found"
    assert N.endpoint(None, "rdma0", "")["hca"] is None


def test_roce_gid_of_address() -> None:
    assert N.roce_gid_of("192.168.250.201") == "0000:0000:0000:0000:0000:ffff:c0a8:fac9"


@pytest.mark.parametrize(
    ("ep", "qos", "env"),
    [
        ({"hca": "mlx5_0", "port": 1, "gid_index": 3}, {"NCCL_IB_TC": 106},
         {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}),
        ({"hca": "mlx5_2", "port": 1, "gid_index": None}, {"NCCL_IB_SL": 3},
         {"NCCL_IB_HCA": "=mlx5_2:1", "NCCL_IB_SL": "3"}),
        # No RDMA endpoint: NCCL uses sockets, a traffic class would mean nothing.
        ({"hca": None, "devices": ["mlx5_0"]}, {"NCCL_IB_TC": 106}, {}),
        (None, None, {}),
    ],
)  # fmt: skip
def test_nccl_env_follows_the_endpoint(ep, qos, env) -> None:
    assert N.nccl_env(ep, qos) == env
    assert N.nccl_env(ep, qos, "ens1") == {"NCCL_SOCKET_IFNAME": "=ens1", **env}


def test_nccl_names_match_exactly() -> None:
    """NCCL reads NCCL_IB_HCA and NCCL_SOCKET_IFNAME as prefixes unless they start with "=": on a node with twelve
    HCAs, "mlx5_1:1" would also take mlx5_10 and mlx5_11 (other rails, other subnets)."""
    env = N.nccl_env({"hca": "mlx5_1", "port": 1, "gid_index": 3}, None, "ens1")
    assert env["NCCL_IB_HCA"] == "=mlx5_1:1" and env["NCCL_SOCKET_IFNAME"] == "=ens1"


def _nccl(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize(
    ("fixture", "expected", "require_gdr", "statuses"),
    [
        ("nccl_roce_gdr.txt", True, True, [("nccl transport", "pass"), ("gpudirect rdma", "pass")]),
        ("nccl_roce_no_gdr.txt", True, True, [("nccl transport", "pass"), ("gpudirect rdma", "fail")]),
        ("nccl_roce_no_gdr.txt", True, False, [("nccl transport", "pass"), ("gpudirect rdma", "skip")]),
        ("nccl_socket.txt", True, True, [("nccl transport", "fail")]),
        ("nccl_socket.txt", False, True, [("nccl transport", "skip")]),
    ],
)
def test_transport_checks_on_recorded_logs(fixture, expected, require_gdr, statuses) -> None:
    checks = N.transport_checks(N.parse_nccl_log(_nccl(fixture)), expected, require_gdr)
    assert [(c, s) for c, s, _ in checks] == statuses


def test_a_real_nccl_log_recorded_on_an_h100() -> None:
    """NCCL 2.28.9 as the ladder's probe recorded it (one rank on an H100, no RDMA device): read as the fall-back
    to sockets, and its socket interface is not taken for an HCA."""
    nccl = N.parse_nccl_log(_nccl("nccl_h100_one_rank.txt"))
    assert (nccl["version"], nccl["network"], nccl["no_device"]) == ("2.28.9+cuda13.0", "Socket", True)
    assert (nccl["devices"], nccl["gdr_hca"], nccl["channels"], nccl["warnings"]) == ([], {}, 0, [])
    assert N.transport_checks(nccl, True) == [
        ("nccl transport", "fail", "NCCL fell back to TCP sockets, not RDMA (NET/IB found no device)")
    ]


def test_transport_checks_on_an_empty_log() -> None:
    assert N.transport_checks(N.parse_nccl_log([]), True) == [
        ("nccl transport", "skip", "NCCL's log does not show its transport"),
        ("gpudirect rdma", "skip", "NCCL's log does not show GPUDirect RDMA"),
    ]


@pytest.mark.parametrize(
    ("local", "env"),
    [
        ({"rdma_qos": {"nccl_env": {"NCCL_IB_TC": 106}, "mark_tcp": True}}, {"NCCL_IB_TC": 106}),
        (
            {"rdma_qos": {"nccl_env": {"NCCL_IB_TC": "104", "NCCL_IB_QPS_PER_CONNECTION": "4"}}},
            {"NCCL_IB_TC": "104", "NCCL_IB_QPS_PER_CONNECTION": "4"},
        ),
        ({"rdma_qos": {"nccl_env": {"NCCL_IB_SL": 3}}}, {"NCCL_IB_SL": 3}),
        ({"rdma_qos": {"nccl_env": {}}}, {}),  # a fact without a class for NCCL
        ({"other": {}}, {}),  # rdma_qos never ran on this host
        ({}, {}),
        (None, {}),
    ],
)
def test_qos_env_from_the_local_facts(local, env) -> None:
    """The one place that knows where rdma_qos's fact keeps NCCL's traffic class (the launch and the ladder)."""
    assert N.qos_env(local) == env
    assert N.nccl_env({"hca": "mlx5_0", "port": 1, "gid_index": 3}, N.qos_env(local), "ens1") == {
        "NCCL_SOCKET_IFNAME": "=ens1", "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3",
        **{k: str(v) for k, v in env.items()}}  # fmt: skip
    fact = N.qos_fact(local)
    assert fact == ((local or {}).get("rdma_qos") or {}) and N.qos_env(local) == dict(fact.get("nccl_env") or {})
