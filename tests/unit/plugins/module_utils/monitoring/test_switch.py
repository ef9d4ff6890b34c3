"""The Nexus switches' RoCE counters as metrics (monitoring/switch.py), read by the ladder's own parsers.
Samples: tests/fixtures/validate/nxos_pfc.txt and nxos_queuing.txt (the layouts of Cisco's NX-OS QoS guide, counter
values ours; see that folder's README) and BRIEF below."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import switch

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import fixture, names, parse, series, value

# Real `show interface brief` of a Nexus (its mgmt0, Ethernet and loopback tables), cut to its first ports and the
# two states that matter here: networktocode/ntc-templates
# tests/cisco_nxos/show_interface_brief/cisco_nxos_show_interface_brief.raw @1d344ff.
BRIEF = """
--------------------------------------------------------------------------------
Port   VRF          Status IP Address                              Speed    MTU
--------------------------------------------------------------------------------
mgmt0  --           up     10.1.100.220                            100      1500

--------------------------------------------------------------------------------
Ethernet      VLAN    Type Mode   Status  Reason                   Speed     Port
Interface                                                                    Ch #
--------------------------------------------------------------------------------
Eth1/1        1       eth  access up      none                        10G(D) --
Eth1/2        1       eth  access up      none                        10G(D) --
Eth1/3        1       eth  access up      none                        10G(D) --
Eth1/4        1       eth  access down    Link not connected         auto(D) --
Eth1/5        --      eth  routed down    Administratively down      auto(D) --

--------------------------------------------------------------------------------
Interface     Status     Description
--------------------------------------------------------------------------------
Lo0           up         --
"""
READ = {"pfc": fixture("validate/nxos_pfc.txt"), "queuing": fixture("validate/nxos_queuing.txt"), "brief": BRIEF}


def test_a_ports_pauses_drops_and_ecn_marks() -> None:
    text = switch.textfile({"leaf1": READ})
    where = {"switch": "leaf1", "port": "Ethernet1/1"}
    assert value(text, "rdma_llm_switch_up", switch="leaf1") == 1
    # RxPPP 1234, TxPPP 5678 on Ethernet1/1 in the PFC show.
    assert value(text, "rdma_llm_switch_port_pfc_pause_frames_total", **where, direction="received") == 1234
    assert value(text, "rdma_llm_switch_port_pfc_pause_frames_total", **where, direction="sent") == 5678
    # QOS GROUP 3: 3 WRED/AFD & tail drops, 4711 ECN-marked; QOS GROUP 0: 12 drops.
    assert value(text, "rdma_llm_switch_port_drops_total", **where, qos_group=3) == 3
    assert value(text, "rdma_llm_switch_port_drops_total", **where, qos_group=0) == 12
    assert value(text, "rdma_llm_switch_port_ecn_marked_total", **where, qos_group=3) == 4711
    assert value(text, "rdma_llm_switch_port_ingress_drops_total", **where) == 2
    assert {dict(k)["qos_group"] for k in series(text, "rdma_llm_switch_port_drops_total")} == {"0", "3", "7"}


def test_link_state_from_the_brief_table() -> None:
    links = switch.parse_brief(BRIEF)
    assert links == {
        "Ethernet1/1": True,
        "Ethernet1/2": True,
        "Ethernet1/3": True,
        "Ethernet1/4": False,
        "Ethernet1/5": False,
    }  # mgmt0 and Lo0 are no fabric ports
    text = switch.textfile({"leaf1": READ})
    assert value(text, "rdma_llm_switch_port_up", switch="leaf1", port="Ethernet1/1") == 1
    assert value(text, "rdma_llm_switch_port_up", switch="leaf1", port="Ethernet1/4") == 0


def test_a_switch_that_did_not_answer_has_no_port_series() -> None:
    text = switch.textfile({"leaf1": READ, "leaf2": None, "leaf3": {"pfc": "", "queuing": ""}})
    assert value(text, "rdma_llm_switch_up", switch="leaf2") == 0
    assert value(text, "rdma_llm_switch_up", switch="leaf3") == 0
    assert all(dict(k)["switch"] == "leaf1" for n, k in parse(text) if n != "rdma_llm_switch_up")


def test_the_ports_kept_are_the_ones_given_in_either_spelling() -> None:
    text = switch.textfile({"leaf1": READ}, ports={"leaf1": ["Eth1/2"]})
    ports = {dict(k)["port"] for n, k in parse(text) if n != "rdma_llm_switch_up"}
    assert ports == {"Ethernet1/2"}
    assert value(text, "rdma_llm_switch_port_pfc_pause_frames_total", switch="leaf1", port="Ethernet1/2",
                 direction="sent") == 17  # fmt: skip


def test_without_queuing_only_the_pfc_counters() -> None:
    text = switch.textfile({"leaf1": {"pfc": fixture("validate/nxos_pfc.txt")}})
    assert names(text) == {"rdma_llm_switch_up", "rdma_llm_switch_port_pfc_pause_frames_total"}


def test_a_poll_sends_the_two_tables_and_a_queuing_table_per_port() -> None:
    assert switch.commands(["Ethernet1/1", "Eth1/2"]) == [
        "show interface priority-flow-control",
        "show interface brief",
        "show queuing interface Ethernet1/1",
        "show queuing interface Ethernet1/2",
    ]
    assert switch.commands([]) == switch.commands(None) == switch.commands([])[:2]


def test_a_polls_result_in_the_order_of_its_commands() -> None:
    queuing = fixture("validate/nxos_queuing.txt")
    result = {"changed": False, "stdout": [fixture("validate/nxos_pfc.txt"), BRIEF, queuing, ""]}
    assert switch.read_of(result) == {"pfc": result["stdout"][0], "brief": BRIEF, "queuing": queuing + "\n"}
    text = switch.poll_textfile(result, "leaf1", ["Ethernet1/1"])
    assert value(text, "rdma_llm_switch_up", switch="leaf1") == 1
    assert {dict(k)["port"] for n, k in parse(text) if n != "rdma_llm_switch_up"} == {"Ethernet1/1"}
    assert value(text, "rdma_llm_switch_port_up", switch="leaf1", port="Ethernet1/1") == 1
    assert value(text, "rdma_llm_switch_port_ecn_marked_total", switch="leaf1", port="Ethernet1/1", qos_group=3) == 4711


@pytest.mark.parametrize(
    "result",
    [
        {"unreachable": True, "msg": "ssh: connect to host leaf1 port 22: Connection refused"},
        {"failed": True, "msg": "Invalid command", "stdout": ["x", "y"]},
        {"changed": False, "stdout": ["only the PFC table"]},
        {"changed": False},
        None,
        "not a result",
    ],
)
def test_a_switch_that_did_not_answer_the_poll_is_down_with_no_ports(result) -> None:
    assert switch.read_of(result) is None
    text = switch.poll_textfile(result, "leaf1", ["Ethernet1/1"])
    assert list(parse(text)) == [("rdma_llm_switch_up", (("switch", "leaf1"),))]
    assert value(text, "rdma_llm_switch_up", switch="leaf1") == 0


def test_the_filters_are_the_polls_functions() -> None:
    from ansible_collections.rdma_llm.cluster.plugins.filter.monitoring import FilterModule

    filters = FilterModule().filters()
    assert {"monitoring_switch_commands", "monitoring_switch_textfile", "monitoring_switch_port_nodes"} <= set(filters)


HOSTVARS = {
    "leaf1": {
        "nxos_roce_qos_host_interfaces": [
            {"name": "Ethernet1/1", "peer": "node1", "peer_port": "rdma0"},
            {"name": "Eth1/2", "description": "gpu-02 ens192 RoCE"},  # the node's hostname, by its description
            {"name": "Ethernet1/3", "description": "spare"},  # names nobody
            {"name": "Ethernet1/4", "peer": "node9", "peer_port": "rdma0"},  # not a node of the map
        ],
        "nxos_roce_qos_uplink_interfaces": [{"name": "Ethernet1/49", "peer": "spine1", "peer_port": "Ethernet1/1"}],
    },
    "spine1": {"nxos_roce_qos_uplink_interfaces": [{"name": "Ethernet1/1", "peer": "leaf1", "peer_port": "Eth1/49"}]},
    "node1": {},
    "node2": {"common_hostname": "gpu-02"},
}


def test_the_node_behind_each_port_from_the_port_map() -> None:
    assert switch.port_nodes(HOSTVARS, ["leaf1", "spine1"], ["node1", "node2"]) == {
        "leaf1": {"Ethernet1/1": {"node": "node1", "nic": "rdma0"}, "Ethernet1/2": {"node": "node2", "nic": "ens192"}},
        "spine1": {},  # its port's far end is a switch
    }
    assert switch.port_nodes(HOSTVARS, [], ["node1"]) == {}
    assert switch.port_nodes(HOSTVARS, ["leaf1"], ["node1"]) == {
        "leaf1": {"Ethernet1/1": {"node": "node1", "nic": "rdma0"}}
    }


def test_each_ports_node_is_an_info_series_whether_or_not_the_switch_answered() -> None:
    nodes = switch.port_nodes(HOSTVARS, ["leaf1"], ["node1", "node2"])["leaf1"]
    result = {
        "changed": False,
        "stdout": [fixture("validate/nxos_pfc.txt"), BRIEF, fixture("validate/nxos_queuing.txt")],
    }
    text = switch.poll_textfile(result, "leaf1", ["Ethernet1/1", "Ethernet1/2"], nodes)
    info = series(text, "rdma_llm_switch_port_node_info")
    assert info == {
        (("nic", "rdma0"), ("node", "node1"), ("port", "Ethernet1/1"), ("switch", "leaf1")): 1,
        (("nic", "ens192"), ("node", "node2"), ("port", "Ethernet1/2"), ("switch", "leaf1")): 1,
    }
    # The counters keep their own labels: the node joins them by (switch, port).
    assert value(text, "rdma_llm_switch_port_ecn_marked_total", switch="leaf1", port="Ethernet1/1", qos_group=3) == 4711
    down = switch.poll_textfile({"unreachable": True}, "leaf1", ["Ethernet1/1"], nodes)
    assert value(down, "rdma_llm_switch_up", switch="leaf1") == 0
    assert series(down, "rdma_llm_switch_port_node_info") == info
    assert names(down) == {"rdma_llm_switch_up", "rdma_llm_switch_port_node_info"}
