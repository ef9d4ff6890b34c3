"""Cabling as the inventory says: the port map, its contradictions, and LLDP from both ends (samples in
tests/fixtures/cabling/, see its README)."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.switches import evaluate_cabling

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "cabling"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


# The leaf-spine lab's map (lab.cluster.fabric_plan): lab-node1, lab-node3 on lab-leaf1, lab-node2 on lab-leaf2.
PORTS = {
    "lab-leaf1": [
        {"name": "Ethernet1/1", "description": "lab-node1 rdma0"},
        {"name": "Ethernet1/2", "description": "lab-node3 rdma0"},
        {"name": "Ethernet1/8", "description": "lab-spine1 Ethernet1/1"},
    ],
    "lab-leaf2": [
        {"name": "Ethernet1/1", "description": "lab-node2 rdma0"},
        {"name": "Ethernet1/8", "description": "lab-spine1 Ethernet1/2"},
    ],
    "lab-spine1": [
        {"name": "Ethernet1/1", "description": "lab-leaf1 Ethernet1/8"},
        {"name": "Ethernet1/2", "description": "lab-leaf2 Ethernet1/8"},
    ],
}
HOSTS = ["lab-node1", "lab-node2", "lab-node3"]
NAMES = {h: h for h in HOSTS} | {sw: sw for sw in PORTS}


def test_parsers_read_what_the_tools_print() -> None:
    seen = cabling.parse_nxos_lldp(fixture("nxos_lldp_neighbors_detail.txt"))
    assert seen["Ethernet1/2"] == {"system_name": "lab-node3.lab", "port_id": "ee41.2c9d.ec6e",
                                   "port_description": "rdma0", "chassis_id": "ee41.2c9d.ec6e"}  # fmt: skip
    assert seen["Ethernet1/8"]["port_id"] == "Ethernet1/1" and seen["Ethernet1/8"]["system_name"] == "lab-spine1"
    assert seen["Ethernet1/5"]["port_id"] is None and seen["Ethernet1/5"]["port_description"] == "eth1"
    assert sorted(seen) == ["Ethernet1/1", "Ethernet1/2", "Ethernet1/5", "Ethernet1/8"]
    assert cabling.parse_nxos_lldp(fixture("nxos_lldp_off.txt")) is None
    host = cabling.parse_lldpcli(fixture("lldpcli_json0_host.json"))
    assert host == {"rdma0": {"system_name": "lab-leaf1", "port_id": "Ethernet1/2",
                              "port_description": "lab-node3 rdma0", "chassis_id": "fa:23:72:68:b9:bc"}}  # fmt: skip
    peer = cabling.parse_lldpcli(fixture("lldpcli_json0_peer_host.json"))["swp2"]
    assert peer["port_id"] == "ee:41:2c:9d:ec:6e" and peer["port_description"] == "rdma0", peer
    assert cabling.parse_lldpcli(fixture("lldpcli_json0_none.json")) == {}
    assert cabling.parse_lldpcli("lldpcli: command not found") is None
    assert cabling.mac("ee41.2c9d.ec6e") == cabling.mac("EE:41:2C:9D:EC:6E") == "ee412c9dec6e"
    assert cabling.port_name("Eth1/1/2") == "Ethernet1/1/2" and cabling.port_name("rdma0") == "rdma0"


def test_links_from_descriptions_or_keys() -> None:
    links = cabling.links(PORTS, NAMES)
    assert links[1] == {"switch": "lab-leaf1", "port": "Ethernet1/2", "peer": "lab-node3", "peer_port": "rdma0",
                        "kind": "host", "source": "description"}  # fmt: skip
    assert links[2]["kind"] == "switch" and links[2]["peer_port"] == "Ethernet1/1"
    keyed = {"sw": [{"name": "Eth1/3", "description": "rack 4 GPU box", "peer": "lab-node2", "peer_port": "ens1f0"}]}
    assert cabling.links(keyed, NAMES)[0] | {} == {"switch": "sw", "port": "Ethernet1/3", "peer": "lab-node2",
                                                  "peer_port": "ens1f0", "kind": "host", "source": "keys"}  # fmt: skip
    # A description naming nobody known: no far end.
    assert cabling.links({"sw": [{"name": "Ethernet1/4", "description": "spare"}]}, NAMES)[0]["peer"] is None
    assert list(cabling.map_problems(links, HOSTS)) == []


def test_names_take_short_forms_and_hostnames() -> None:
    """What a description, a `peer` key or LLDP may call a node or switch: its inventory name, its short form (a
    switch's LLDP sends its hostname), a node's common_hostname; an exact name wins over another's short form."""
    names = cabling.names(["n1.dc.example", "leaf1"], ["leaf1.dc.example", "spine1.dc.example"], {"leaf1": "gpu7"}.get)
    assert names == {
        "n1.dc.example": "n1.dc.example", "n1": "n1.dc.example", "leaf1": "leaf1", "gpu7": "leaf1",
        "leaf1.dc.example": "leaf1.dc.example", "spine1.dc.example": "spine1.dc.example", "spine1": "spine1.dc.example",
    }  # fmt: skip
    uplink = {"leaf1.dc.example": [{"name": "Ethernet1/49", "description": "spine1 Ethernet1/1"}]}
    assert cabling.links(uplink, names)[0]["peer"] == "spine1.dc.example"


def test_a_map_that_cannot_be_true_is_refused() -> None:
    # The same NIC on two leaves; an uplink whose far end lists another port back; a peer nobody knows.
    ports = json.loads(json.dumps(PORTS))
    ports["lab-leaf2"].append({"name": "Ethernet1/3", "description": "lab-node3 rdma0"})
    ports["lab-spine1"][1]["description"] = "lab-leaf2 Ethernet1/7"
    ports["lab-leaf2"].append({"name": "Ethernet1/4", "peer": "lab-node9", "peer_port": "eth0"})
    problems = list(cabling.map_problems(cabling.links(ports, NAMES), HOSTS))
    assert problems == [
        ("lab-leaf2", "nxos_roce_qos_host_interfaces",
         "lab-node3 rdma0 is on lab-leaf1 Ethernet1/2 and on lab-leaf2 Ethernet1/3: one cable cannot end on two ports"),
        ("lab-leaf2", "nxos_roce_qos_host_interfaces",
         "lab-leaf2 Ethernet1/4: peer 'lab-node9' is no host or switch of the inventory"),
        ("lab-leaf2", "nxos_roce_qos_uplink_interfaces",
         "lab-leaf2 Ethernet1/8 goes to lab-spine1 Ethernet1/2, whose own entry goes to lab-leaf2 Ethernet1/7"),
        ("lab-spine1", "nxos_roce_qos_uplink_interfaces",
         "lab-spine1 Ethernet1/2 goes to lab-leaf2 Ethernet1/7, which lab-leaf2 does not list as a RoCE port"),
    ], problems  # fmt: skip


def _leaf1(**swap) -> str:
    """lab-leaf1's `show lldp neighbors detail` (the recorded layout) with the hosts on Eth1/1 and Eth1/2 as given."""
    text = fixture("nxos_lldp_neighbors_detail.txt")
    for old, new in swap.items():
        text = text.replace(f"System Name: {old}.lab", f"System Name: {new}.tmp")
    return text.replace(".tmp", ".lab")


def test_lldp_agrees_with_the_map() -> None:
    links = [ln for ln in cabling.links(PORTS, NAMES) if ln["switch"] == "lab-leaf1"]
    checks = cabling.compare(links, {"lab-leaf1": cabling.parse_nxos_lldp(_leaf1())}, {}, NAMES)
    assert [(c["where"], c["status"]) for c in checks] == [
        ("lab-leaf1 Ethernet1/1", "pass"), ("lab-leaf1 Ethernet1/2", "pass"), ("lab-leaf1 Ethernet1/8", "pass")
    ]  # fmt: skip
    # The host's own view (lldpd's json0): lab-node3 rdma0 sees lab-leaf1 Ethernet1/2.
    host = {"lab-node3": cabling.parse_lldpcli(fixture("lldpcli_json0_host.json"))}
    checks = cabling.compare(links, {}, host, NAMES)
    assert [(c["where"], c["status"], c["detail"]) for c in checks if c["where"].startswith("lab-node3")] == [
        ("lab-node3 rdma0", "pass", "lab-node3 rdma0 <-> lab-leaf1 Ethernet1/2")
    ]
    assert {c["status"] for c in checks if c["where"].startswith("lab-leaf1")} == {"skip"}  # leaf1 not read


def test_a_swapped_or_missing_cable_is_named_with_both_ends() -> None:
    links = [ln for ln in cabling.links(PORTS, NAMES) if ln["switch"] == "lab-leaf1"]
    swapped = cabling.parse_nxos_lldp(_leaf1(**{"lab-node1": "lab-node3", "lab-node3": "lab-node1"}))
    checks = {c["where"]: c for c in cabling.compare(links, {"lab-leaf1": swapped}, {}, NAMES)}
    assert checks["lab-leaf1 Ethernet1/1"]["detail"] == (
        "lab-leaf1 Ethernet1/1: LLDP sees lab-node3.lab rdma0; the inventory has lab-node1 rdma0 there"
    )
    assert checks["lab-leaf1 Ethernet1/2"]["status"] == "fail" and checks["lab-leaf1 Ethernet1/8"]["status"] == "pass"
    missing = cabling.parse_nxos_lldp(_leaf1())
    del missing["Ethernet1/2"]
    checks = {c["where"]: c for c in cabling.compare(links, {"lab-leaf1": missing}, {}, NAMES)}
    assert checks["lab-leaf1 Ethernet1/2"] == {
        "where": "lab-leaf1 Ethernet1/2",
        "status": "fail",
        "detail": "lab-leaf1 Ethernet1/2: no LLDP neighbour; the inventory has lab-node3 rdma0 there",
    }
    # The right host on its other NIC: the port is named, not just the host.
    other = cabling.parse_nxos_lldp(_leaf1())
    other["Ethernet1/2"] = other["Ethernet1/2"] | {"port_description": "rdma1", "port_id": "0c42.0000.0001"}
    checks = {c["where"]: c for c in cabling.compare(links, {"lab-leaf1": other}, {}, NAMES)}
    assert checks["lab-leaf1 Ethernet1/2"]["status"] == "fail", checks
    # ... unless its port id is that NIC's MAC (lldpd's default port id): then it is the NIC the map names.
    macs = {"lab-node3": {"rdma0": "0c:42:00:00:00:01"}}
    checks = {c["where"]: c for c in cabling.compare(links, {"lab-leaf1": other}, {}, NAMES, macs)}
    assert checks["lab-leaf1 Ethernet1/2"]["status"] == "pass", checks
    # A host's lldpd that sees another switch port than the map.
    host = {"lab-node1": cabling.parse_lldpcli(fixture("lldpcli_json0_host.json"))}
    checks = {c["where"]: c for c in cabling.compare(links, {}, host, NAMES)}
    assert checks["lab-node1 rdma0"]["detail"] == (
        "lab-node1 rdma0: LLDP sees lab-leaf1 lab-node3 rdma0; the inventory has lab-leaf1 Ethernet1/1 there"
    )


def test_cabling_rung() -> None:
    hostvars = {h: {} for h in HOSTS} | {sw: {"nxos_roce_qos_host_interfaces": [p for p in ports if "node" in
                                                                              p["description"]],
                                              "nxos_roce_qos_uplink_interfaces": [p for p in ports if "node" not in
                                                                                  p["description"]]}
                                         for sw, ports in PORTS.items()}  # fmt: skip
    switches = list(PORTS)
    swapped = _leaf1(**{"lab-node1": "lab-node3", "lab-node3": "lab-node1"})
    rung = evaluate_cabling(hostvars, switches, HOSTS, {"lab-leaf1": swapped})
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["lab-node1", "lab-node3"] and rung["value"] == 2, rung
    assert rung["reason"].startswith("lab-leaf1 Ethernet1/1: LLDP sees lab-node3.lab rdma0; the inventory has")
    assert rung["notes"] == ["lab-leaf1 Ethernet1/5: LLDP sees spare-server eth1, a port the inventory does not list"]
    good = evaluate_cabling(hostvars, switches, HOSTS, {"lab-leaf1": _leaf1()}, {"lab-node2": None})
    assert good["status"] == "pass" and good["bad_hosts"] == [], good
    assert good["reason"].startswith("3 link end(s) as the inventory says; not seen: ")
    assert "no lldpd on lab-node2" in good["reason"], good["reason"]
    # The ladder on some nodes (--limit): the others' cables are judged from the switches all the same, by name.
    limited = evaluate_cabling(hostvars, switches, HOSTS, {"lab-leaf1": _leaf1()}, {"lab-node1": None})
    assert limited["status"] == "pass" and limited["bad_hosts"] == [], limited
    off = evaluate_cabling(hostvars, switches, HOSTS, {sw: fixture("nxos_lldp_off.txt") for sw in switches})
    assert off["status"] == "skip" and "LLDP off on lab-leaf1 (feature lldp)" in off["reason"], off
    assert evaluate_cabling(hostvars, [], HOSTS, {})["status"] == "skip"
