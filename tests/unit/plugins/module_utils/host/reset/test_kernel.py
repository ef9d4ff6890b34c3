"""nftables tables, kernel modules and links (module_utils/host/reset/kernel.py), and the groups a concern created
(accounts.py)."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import kernel
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.kernel import parse_links, plan_link
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import load

from tests.unit.plugins.module_utils.host.reset.fake import host


def test_nft_table_group_and_module_the_project_added_are_removed(root, system):
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("ib_core 1 0 - Live 0x0\n")
    h = host(root, system)
    record(
        h, "fw", Spec(nft_tables=["inet fabric_firewall"], groups=["rdma-llm-train"], modules=["ib_core", "ib_umad"])
    )
    system.nft["inet fabric_firewall"] = "table inet fabric_firewall {\n}\n"
    (root / "etc/group").write_text("root:x:0:\nrdma-llm-train:x:999:\n")
    (root / "proc/modules").write_text("ib_core 1 0 - Live 0x0\nib_umad 1 0 - Live 0x0\n")
    result = restore(h, "fw")
    assert result["errors"] == []
    assert "inet fabric_firewall" not in system.nft
    assert "rdma-llm-train" not in (root / "etc/group").read_text()
    assert (root / "proc/modules").read_text() == "ib_core 1 0 - Live 0x0\n", "only the module the project loaded"


def test_a_group_that_was_there_before_the_first_run_is_kept(root, system):
    """Groups are recorded present or absent at the first run only: reset removes the one the project created and
    keeps those the host had (a site's own slurm and munge), whatever later runs saw; one it would have created
    that is not there (rdma-llm-gone) is left alone (groupdel would fail on it)."""
    before = "root:x:0:\nslurm:x:64030:\nmunge:x:101:\n"
    (root / "etc/group").write_text(before)
    h = host(root, system)
    spec = Spec(groups=["slurm", "munge", "rdma-llm-train", "rdma-llm-gone"])
    assert record(h, "fw", spec)["lines"] == [
        "group slurm: present",
        "group munge: present",
        "group rdma-llm-train: absent",
        "group rdma-llm-gone: absent",
    ]
    (root / "etc/group").write_text(before + "rdma-llm-train:x:999:\n")
    assert record(h, "fw", spec)["changed"] is False  # a later run, the project's group now there
    assert load(h, "fw")["groups"] == {"slurm": True, "munge": True, "rdma-llm-train": False, "rdma-llm-gone": False}
    result = restore(h, "fw")
    assert result["errors"] == []
    assert [c for c in result["changes"] if c.startswith("groupdel")] == ["groupdel rdma-llm-train"]
    assert (root / "etc/group").read_text() == before


def test_a_table_that_was_there_before_is_loaded_again(root, system):
    system.nft["inet mine"] = "table inet mine {\n\tchain c {\n\t}\n}\n"
    h = host(root, system)
    record(h, "fw", Spec(nft_tables=["inet mine"]))
    system.nft["inet mine"] = "table inet mine {\n}\n"
    restore(h, "fw")
    assert system.nft["inet mine"] == "table inet mine {\n\tchain c {\n\t}\n}\n"


def test_links_lose_what_the_project_added_and_get_their_mtu_back(root, system):
    system.links["eth1"] = {"mtu": 9000, "addresses": [["inet6", "fe80::1", 64]], "routes": []}
    h = host(root, system)
    record(h, "rdma_netplan", Spec(links=["eth1"]))
    system.links["eth1"] = {
        "mtu": 8000,
        "addresses": [["inet", "10.78.2.11", 24], ["inet6", "fe80::1", 64]],
        "routes": [["10.78.3.0/24", "10.78.2.1", 50]],
    }
    result = restore(h, "rdma_netplan", parts=["links"])
    assert result["changes"][:3] == [
        "ip route del 10.78.3.0/24 via 10.78.2.1 dev eth1 metric 50",
        "ip addr del 10.78.2.11/24 dev eth1",
        "ip link set dev eth1 mtu 9000",
    ]
    assert system.links["eth1"] == {"mtu": 9000, "addresses": [["inet6", "fe80::1", 64]], "routes": []}


def test_a_link_that_does_not_come_back_is_an_error_and_the_record_stays(root, system, monkeypatch):
    system.links["eth1"] = {"mtu": 9000, "addresses": [], "routes": []}
    h = host(root, system)
    record(h, "rdma_netplan", Spec(links=["eth1"]))
    system.links["eth1"]["addresses"] = [["inet", "10.78.2.11", 24]]
    monkeypatch.setattr(kernel, "plan_link", lambda *a: [])  # a restore that does nothing
    result = restore(h, "rdma_netplan")
    assert result["errors"] and "not as before the first run" in result["errors"][0]
    assert not result["forgotten"] and load(h, "rdma_netplan") is not None


def test_plan_link_adds_back_what_the_project_removed():
    before = {"mtu": 1500, "addresses": [["inet", "192.0.2.5", 24]], "routes": [["198.51.100.0/24", "192.0.2.1", 0]]}
    now = {"mtu": 1500, "addresses": [["inet", "10.0.0.5", 24]], "routes": []}
    assert plan_link("ens1", before, now) == [
        ["ip", "addr", "del", "10.0.0.5/24", "dev", "ens1"],
        ["ip", "addr", "add", "192.0.2.5/24", "dev", "ens1"],
        ["ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.1", "dev", "ens1"],
    ]


def test_parse_links_keeps_static_routes_only():
    addr = json.dumps(
        [{"ifname": "eth1", "mtu": 8000, "addr_info": [{"family": "inet", "local": "10.78.2.11", "prefixlen": 24}]}]
    )
    routes = json.dumps(
        [
            {"dst": "10.78.2.0/24", "protocol": "kernel", "scope": "link"},
            {"dst": "10.78.3.0/24", "gateway": "10.78.2.1", "protocol": "static", "metric": 50},
        ]
    )
    assert parse_links(addr, [routes, "[]"]) == {
        "mtu": 8000,
        "addresses": [["inet", "10.78.2.11", 24]],
        "routes": [["10.78.3.0/24", "10.78.2.1", 50]],
    }
    assert parse_links("[]", []) is None
