"""lab.nxos_emu without SSH: modes, grammar, validation, checkpoints, renderings, persistence."""

from __future__ import annotations

import re

import pytest

from lab.nxos_emu.device import Device, DeviceInfo, Session
from tests.switch.conftest import FIELD_CONFIG

pytestmark = pytest.mark.switch


@pytest.fixture
def dev() -> Device:
    device = Device(DeviceInfo(hostname="leaf1"))
    device.boot()
    return device


@pytest.fixture
def cli(dev) -> Session:
    return dev.new_session()


def run(cli: Session, *lines: str) -> list[str]:
    out: list[str] = []
    for line in lines:
        out += cli.handle(line)
    return out


def errors(output: list[str]) -> list[str]:
    return [line for line in output if line.startswith(("%", "ERROR"))]


def body(dev: Device) -> str:
    return dev.body_text(dev.running)


def test_prompts_per_mode(cli):
    expected = [
        ("configure terminal", "leaf1(config)# "),
        ("class-map type qos match-all ROCE", "leaf1(config-cmap-qos)# "),
        ("policy-map type qos MARK", "leaf1(config-pmap-qos)# "),
        ("class ROCE", "leaf1(config-pmap-c-qos)# "),
        ("policy-map type network-qos NQ", "leaf1(config-pmap-nqos)# "),
        ("class type network-qos c-8q-nq3", "leaf1(config-pmap-nqos-c)# "),
        ("policy-map type queuing QUE", "leaf1(config-pmap-que)# "),
        ("class type queuing c-out-8q-q3", "leaf1(config-pmap-c-que)# "),
        ("system qos", "leaf1(config-sys-qos)# "),
        ("interface Ethernet1/1", "leaf1(config-if)# "),
        ("exit", "leaf1(config)# "),
        ("end", "leaf1# "),
    ]
    assert cli.prompt == "leaf1# "
    for line, prompt in expected:
        assert errors(cli.handle(line)) == [], line
        assert cli.prompt == prompt, line


def test_flat_lines_fall_through_to_the_right_mode(cli, dev):
    """nxos_config sends a policy flat, without `exit`: each line must land in its context."""
    out = run(
        cli,
        "configure terminal",
        "class-map type qos match-all ROCE",
        "match dscp 26",
        "class-map type qos match-all CNP",
        "match dscp 48",
        "policy-map type qos MARK",
        "class ROCE",
        "set qos-group 3",
        "class CNP",
        "set qos-group 7",
        "policy-map type network-qos NQ",
        "class type network-qos c-8q-nq3",
        "mtu 9216",
        "pause pfc-cos 3",
        "class type network-qos c-8q-nq-default",
        "mtu 9216",
        "system qos",
        "service-policy type network-qos NQ",
        "interface Ethernet1/1",
        "mtu 9216",
        "service-policy type qos input MARK",
        "end",
    )
    assert errors(out) == []
    assert body(dev).count("mtu 9216") == 3
    assert "policy-map type qos MARK\n  class ROCE\n    set qos-group 3\n  class CNP\n    set qos-group 7" in body(dev)
    assert "interface Ethernet1/1\n  mtu 9216\n  service-policy type qos input MARK" in body(dev)
    assert "system qos\n  service-policy type network-qos NQ" in body(dev)


def test_value_replacement_and_no_forms(cli, dev):
    run(
        cli,
        "configure terminal",
        "policy-map type network-qos NQ",
        "class type network-qos c-nq3",
        "mtu 2240",
        "pause pfc-cos 3",
        "mtu 9216",
    )
    assert "    mtu 9216\n    pause pfc-cos 3" in body(dev)
    assert "2240" not in body(dev)
    run(
        cli,
        "no pause pfc-cos 3",
        "interface Ethernet1/2",
        "mtu 9000",
        "priority-flow-control mode on",
        "no priority-flow-control mode on",
        "no mtu",
    )
    assert "pause pfc-cos" not in body(dev)
    assert "interface Ethernet1/2\n\n" in body(dev)  # back to an empty interface
    run(cli, "no policy-map type network-qos NQ", "end")
    assert "policy-map" not in body(dev)


@pytest.mark.parametrize(
    ("mode_lines", "line", "message"),
    [
        ([], "bogus command", "% Invalid command at '^' marker."),
        ([], "class-map type qos", "% Incomplete command at '^' marker."),
        (["class-map type qos match-all R"], "match dscp 64", "% Invalid number, range is (0:63) at '^' marker."),
        (
            ["policy-map type network-qos N", "class type network-qos c-nq3"],
            "pause pfc-cos 8",
            "% Invalid number, range is (0:7) at '^' marker.",
        ),
        (["interface Ethernet1/1"], "mtu 9215", "% Invalid value, MTU must be an even number at '^' marker."),
        (["interface Ethernet1/1"], "mtu 9300", "% Invalid number, range is (576:9216) at '^' marker."),
        (["interface Ethernet1/1"], "mtu 574", "% Invalid number, range is (576:9216) at '^' marker."),
        ([], "interface Ethernet1/99", "% Invalid interface format at '^' marker."),
        (["policy-map type qos M"], "class NOPE", "% class-map NOPE does not exist at '^' marker."),
        (["system qos"], "service-policy type network-qos NOPE", "% policy-map NOPE does not exist at '^' marker."),
    ],
)
def test_bad_input_is_rejected_with_a_marker(cli, dev, mode_lines, line, message):
    run(cli, "configure terminal", *mode_lines)
    before, prompt = body(dev), cli.prompt
    out = cli.handle(line)
    assert out[-1] == message
    if "marker" in message:
        assert out[0].strip() == "^"
    assert body(dev) == before
    assert cli.prompt == prompt  # a rejected line leaves the mode unchanged


def test_references_block_deletes(cli, dev):
    run(
        cli,
        "configure terminal",
        "class-map type qos match-all R",
        "match dscp 26",
        "policy-map type qos M",
        "class R",
        "set qos-group 3",
        "interface Ethernet1/1",
        "service-policy type qos input M",
    )
    assert cli.handle("no class-map type qos match-all R") == ["ERROR: class-map R is being referenced by policy-map M"]
    assert cli.handle("no policy-map type qos M")[0].startswith("ERROR: policy-map M is attached to")
    run(
        cli,
        "interface Ethernet1/1",
        "no service-policy type qos input M",
        "no policy-map type qos M",
        "no class-map type qos match-all R",
    )
    assert "class-map" not in body(dev)


def test_queuing_class_bandwidth_and_priority_exclude_each_other(cli):
    run(cli, "configure terminal", "policy-map type queuing Q", "class type queuing c-out-8q-q7", "priority level 1")
    assert cli.handle("bandwidth remaining percent 10")[0].startswith("ERROR: bandwidth and priority")


def test_checkpoint_and_rollback_restore_exactly(cli, dev):
    cli.handle("configure terminal")
    run(cli, "interface Ethernet1/3", "description keep me", "mtu 9216", "end")
    saved = body(dev)
    assert run(cli, "terminal dont-ask", "checkpoint file bootflash:c.ckpt", "checkpoint NAMED") == ["Done", "Done"]
    run(
        cli,
        "configure terminal",
        "class-map type qos match-all X",
        "match dscp 10",
        "interface Ethernet1/3",
        "no mtu",
        "end",
    )
    assert body(dev) != saved
    assert run(cli, "rollback running-config file bootflash:c.ckpt")[-1] == "Rollback completed successfully."
    assert body(dev) == saved
    run(cli, "configure terminal", "hostname other", "end")
    run(cli, "rollback running-config checkpoint NAMED")
    assert body(dev) == saved
    assert cli.handle("checkpoint NAMED") == ["ERROR: Checkpoint name NAMED is already in use"]
    assert cli.handle("delete bootflash:c.ckpt no-prompt") == []
    assert cli.handle("rollback running-config file bootflash:c.ckpt")[0].startswith("ERROR")


def test_startup_config_and_copy(cli, dev):
    assert "mtu 9216" not in "\n".join(cli.handle("show startup-config"))
    run(cli, "configure terminal", "interface Ethernet1/1", "mtu 9216", "end")
    assert "mtu 9216" not in "\n".join(cli.handle("show startup-config"))
    assert cli.handle("copy running-config startup-config")[-1] == "Copy complete."
    assert "mtu 9216" in "\n".join(cli.handle("show startup-config"))
    assert dev.startup == body(dev)


def test_show_filters_and_json(cli):
    run(
        cli,
        "configure terminal",
        "class-map type qos match-all R",
        "match dscp 26",
        "interface Ethernet1/1",
        "mtu 9216",
        "end",
    )
    assert cli.handle("show running-config | section class-map") == [
        "class-map type qos match-all R",
        "  match dscp 26",
    ]
    assert cli.handle("show running-config | include mtu") == ["  mtu 9216"]
    out = cli.handle("show version | json")
    assert out[-1] == "% Invalid command at '^' marker."
    assert cli.handle("show running-config ipqos | exclude ^!|^version|^$") == [
        "class-map type qos match-all R",
        "  match dscp 26",
    ]


def test_show_version_and_inventory_parse_like_cisco_nxos(cli):
    """The regexes the cisco.nxos cliconf plugin applies (lab-notes §4)."""
    version = "\n".join(cli.handle("show version"))
    inventory = "\n".join(cli.handle("show inventory"))
    assert re.search(r"\s+NXOS:\s+version\s*(\S+)", version).group(1) == "10.3(4a)"
    assert re.search(r"Hardware\n\s+cisco(.+)$", version, re.M).group(1).strip() == "Nexus9000 C93180YC-FX Chassis"
    assert re.search(r"\s+Device name:\s*(\S+)", version).group(1) == "leaf1"
    assert re.search(r"\s+NXOS image file is:\s*(\S+)", version).group(1).startswith("bootflash:")
    assert re.search(r'NAME: "Chassis",\s*DESCR:.*\nPID:\s*(\S+)', inventory).group(1) == "N9K-C93180YC-FX"
    assert cli.handle("show license host-id") == ["License hostid: VDH=FDO23450LAB"]
    assert cli.handle("terminal length 0") == [] and cli.handle("terminal width 511") == []


def test_ipqos_view_and_pfc_state(cli):
    run(
        cli,
        "configure terminal",
        "policy-map type network-qos NQ",
        "class type network-qos c-8q-nq3",
        "pause pfc-cos 3",
        "interface Ethernet1/1",
        "priority-flow-control mode on",
        "mtu 9216",
        "interface Ethernet1/2",
        "priority-flow-control mode on",
        "end",
    )
    pfc = "\n".join(cli.handle("show interface priority-flow-control"))
    assert re.search(r"Ethernet1/1\s+On\s+Off", pfc)  # no network-qos policy active yet
    run(cli, "configure terminal", "system qos", "service-policy type network-qos NQ", "end")
    pfc = "\n".join(cli.handle("show interface priority-flow-control"))
    assert re.search(r"Ethernet1/1\s+On\s+On\s+\(8\)", pfc)
    assert re.search(r"Ethernet1/3\s+Auto\s+Off", pfc)
    ipqos = "\n".join(cli.handle("show running-config ipqos"))
    assert "interface Ethernet1/1\n  priority-flow-control mode on" in ipqos
    assert "mtu 9216\n" not in ipqos.split("interface")[1]  # interface MTU is not an ipqos line


def test_field_config_loads_with_breakout_ports(tmp_path):
    dev = Device(DeviceInfo(hostname="field-leaf1"))
    dev.boot(FIELD_CONFIG.read_text())
    text = body(dev)
    assert "interface breakout module 1 port 1 map 10g-4x" in text
    assert "interface Ethernet1/1/2\n  service-policy type qos input QOS_MARKING" in text
    assert "    mtu 2240\n    pause pfc-cos 3" in text
    assert "interface Ethernet1/1\n" not in text
    assert dev.startup == text


def test_state_file_persists_everything(tmp_path):
    state = tmp_path / "state.json"
    dev = Device(DeviceInfo(hostname="leaf1"), state_file=state)
    dev.boot()
    cli = dev.new_session()
    run(
        cli,
        "configure terminal",
        "interface Ethernet1/4",
        "mtu 9216",
        "end",
        "checkpoint C1",
        "configure terminal",
        "interface Ethernet1/4",
        "description after",
        "end",
    )
    again = Device(DeviceInfo(hostname="leaf1"), state_file=state)
    again.boot()
    assert body(again) == body(dev)
    assert again.startup == dev.startup and again.checkpoints == dev.checkpoints
    run(again.new_session(), "rollback running-config checkpoint C1")
    assert "description after" not in body(again)


def _policy(cli: Session) -> None:
    """The role's golden default policy, as nxos_config sends it (flat lines)."""
    golden = (FIELD_CONFIG.parent / "golden-default.cfg").read_text().splitlines()
    out = run(cli, "configure terminal", *[ln.strip() for ln in golden if not ln.startswith("!")], "end")
    assert errors(out) == []


def test_queuing_and_pfc_counters_move_only_when_told(cli, dev, tmp_path):
    _policy(cli)
    queuing = "\n".join(cli.handle("show queuing interface ethernet 1/1"))
    assert "Egress Queuing for Ethernet1/1 [System]" in queuing
    assert re.search(r"^\s+3\s+50\s+-", queuing, re.M)  # RoCE queue: bandwidth 50
    assert re.search(r"^\s+7\s+-\s+1\s", queuing, re.M)  # CNP queue: priority level 1
    assert re.search(r"^\s+3\s+348608\s+77376\s+75712$", queuing, re.M)  # no-drop ingress buffer
    assert "TxPPP:                    0, RxPPP:                    0" in queuing

    assert run(cli, "emulator counters interface ethernet 1/1 qos-group 3 tx-pause 150 ecn-marked 42 dropped 2") == []
    dev.add_counters("Ethernet1/1", 3, rx_pause=5)
    queuing = "\n".join(cli.handle("show queuing interface Ethernet1/1"))
    group3 = queuing.split("QOS GROUP 3")[1].split("QOS GROUP 4")[0]
    assert re.search(r"WRED & ECN Marked Pkts \|\s+42\|", group3)
    assert re.search(r"WRED/AFD & Tail Drop Pkts \|\s+2\|", group3)
    assert re.search(r"^\s+3\s+3\s+Inactive\s+150\s+Inactive\s+5$", queuing, re.M)
    assert "TxPPP:                  150, RxPPP:                    5" in queuing
    pfc = "\n".join(cli.handle("show interface priority-flow-control"))
    assert re.search(r"Ethernet1/1\s+On\s+On\s+\(8\)\s+5\s+150", pfc)
    assert re.search(r"Ethernet1/2\s+On\s+On\s+\(8\)\s+0\s+0", pfc)

    # The counters file (written by a process outside the emulator) adds on top, re-read per show.
    dev.counters.overlay_file = tmp_path / "counters.json"
    dev.counters.overlay_file.write_text('{"Ethernet1/2": {"3": {"tx-pause": 7}}}')
    assert re.search(
        r"Ethernet1/2\s+On\s+On\s+\(8\)\s+0\s+7", "\n".join(cli.handle("show interface priority-flow-control"))
    )

    assert run(cli, "clear qos statistics") == []
    pfc = "\n".join(cli.handle("show interface priority-flow-control"))
    assert re.search(r"Ethernet1/1\s+On\s+On\s+\(8\)\s+0\s+0", pfc)
    assert re.search(r"Ethernet1/2\s+On\s+On\s+\(8\)\s+0\s+7", pfc)  # the file is not cleared

    # Bad control input is refused like any NX-OS command.
    assert errors(run(cli, "emulator counters interface ethernet 1/99 qos-group 3 tx-pause 1"))
    assert errors(run(cli, "emulator counters interface ethernet 1/1 qos-group 8 tx-pause 1"))
    assert errors(run(cli, "emulator counters interface ethernet 1/1 qos-group 3 bogus 1"))
    assert errors(run(cli, "emulator counters interface ethernet 1/1 qos-group 3"))


def test_counters_persist_in_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    first = Device(DeviceInfo(hostname="leaf1"), state_file=state)
    first.boot()
    first.add_counters("Ethernet1/1", 3, tx_pause=9, ecn_marked=4)
    second = Device(DeviceInfo(hostname="leaf1"), state_file=state)
    second.boot()
    assert second.counters.get("Ethernet1/1", 3)["tx-pause"] == 9
    assert second.counters.get("Ethernet1/1", 3)["ecn-marked"] == 4


def test_port_speed_and_a_port_queuing_policy(cli, dev):
    """`speed` is kept (auto, the default, is not shown); a queuing policy attached to a port overrides
    the system one in that port's `show queuing interface`, and cannot be deleted while attached."""
    out = run(
        cli,
        "configure terminal",
        "policy-map type queuing Q_25G",
        "class type queuing c-out-8q-q3",
        "bandwidth remaining percent 30",
        "interface Ethernet1/2",
        "speed 25000",
        "service-policy type queuing output Q_25G",
        "interface Ethernet1/3",
        "speed 25000",
        "speed auto",
        "end",
    )
    assert errors(out) == []
    assert "interface Ethernet1/2\n  speed 25000\n  service-policy type queuing output Q_25G\n" in body(dev)
    assert "interface Ethernet1/3\n\n" in body(dev)
    assert errors(run(cli, "configure terminal", "interface Ethernet1/2", "speed 12345", "end"))
    port2 = "\n".join(run(cli, "show queuing interface ethernet 1/2"))
    port1 = "\n".join(run(cli, "show queuing interface ethernet 1/1"))
    assert re.search(r"^\s+3\s+30\s", port2, re.M) and not re.search(r"^\s+3\s+30\s", port1, re.M)
    out = run(cli, "configure terminal", "no policy-map type queuing Q_25G")
    assert errors(out) == ["ERROR: policy-map Q_25G is attached to interface Ethernet1/2"]


def test_pause_buffer_is_one_ordered_setting_of_a_network_qos_class(dev, cli):
    line = "pause buffer-size 101920 pause-threshold 46800 resume-threshold 34320"
    out = run(cli, "configure terminal", "policy-map type network-qos NQ", "class type network-qos c-8q-nq3", line)
    assert errors(out) == []
    assert errors(cli.handle("pause buffer-size 1000 pause-threshold 2000 resume-threshold 10")) == [
        "% Invalid value, resume-threshold <= pause-threshold <= buffer-size at '^' marker."
    ]
    assert errors(cli.handle("pause buffer-size 131072 pause-threshold 46800 resume-threshold 34320")) == []
    assert "  class type network-qos c-8q-nq3\n    pause buffer-size 131072 pause-threshold 46800" in body(dev)
    assert errors(cli.handle("no pause buffer-size 131072 pause-threshold 46800 resume-threshold 34320")) == []
    assert "pause buffer-size" not in body(dev)


def test_queuing_shares_never_add_up_to_more_than_100(dev, cli):
    run(cli, "configure terminal", "policy-map type queuing QUE", "class type queuing c-out-8q-q3")
    assert errors(run(cli, "bandwidth remaining percent 50", "class type queuing c-out-8q-q-default")) == []
    assert errors(cli.handle("bandwidth remaining percent 50")) == []
    run(cli, "class type queuing c-out-8q-q1")
    assert errors(cli.handle("bandwidth remaining percent 25")) == [
        "ERROR: bandwidth remaining percent of the policy-map would add up to 125 (max 100)"
    ]
    run(
        cli, "class type queuing c-out-8q-q-default", "bandwidth remaining percent 25", "class type queuing c-out-8q-q1"
    )
    assert errors(cli.handle("bandwidth remaining percent 25")) == []
    # The same shares in another policy are that policy's own.
    run(cli, "policy-map type queuing QUE2", "class type queuing c-out-8q-q3")
    assert errors(cli.handle("bandwidth remaining percent 100")) == []


def test_default_system_classes_print_last(dev, cli):
    run(cli, "configure terminal", "policy-map type network-qos NQ", "class type network-qos c-8q-nq-default")
    run(cli, "mtu 9216", "class type network-qos c-8q-nq1", "mtu 9216", "end")
    nq = body(dev).split("policy-map type network-qos NQ\n", 1)[1]
    assert nq.index("c-8q-nq1") < nq.index("c-8q-nq-default")


def test_reject_config_refuses_the_matching_lines_only():
    dev = Device(DeviceInfo(hostname="leaf1"), reject=(r"priority-flow-control mode on",))
    dev.boot()
    cli = dev.new_session()
    run(cli, "configure terminal", "interface Ethernet1/1")
    assert errors(cli.handle("priority-flow-control mode on")) == [
        "ERROR: priority-flow-control mode on: refused by this switch (lab.nxos_emu --reject-config)"
    ]
    assert errors(run(cli, "priority-flow-control mode off", "mtu 9216")) == []
    assert "priority-flow-control mode off\n  mtu 9216" in body(dev)


def test_dir_lists_bootflash_file_names_as_nx_os_does(dev, cli):
    run(cli, "checkpoint file bootflash:nxos_roce_qos.ckpt")
    listing = run(cli, "dir bootflash:")
    assert listing[0].split()[-1] == "nxos_roce_qos.ckpt" and listing[-1].endswith("bytes free")


def test_lldp_neighbours_come_from_the_wiring_file_once_lldp_is_on(cli, dev, tmp_path):
    """`show lldp neighbors detail` has no command until `feature lldp`; then it serves the lab's wiring file
    (re-read per show, so a test can swap a cable) in the layout the ladder's parser reads."""
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling

    assert run(cli, "show lldp neighbors detail") == ["% Invalid command at '^' marker."]
    assert errors(run(cli, "configure terminal", "feature lldp", "end")) == []
    dev.lldp_file = tmp_path / "lldp.json"
    assert cli.handle("show lldp neighbors detail")[-1] == "Total entries displayed: 0"  # no file yet: nothing cabled
    dev.lldp_file.write_text(
        '{"Ethernet1/2": {"system_name": "lab-node3", "port_id": "rdma0", "port_description": "rdma0"},'
        ' "Ethernet1/10": {"system_name": "lab-spine1", "port_id": "Ethernet1/1"}}'
    )
    seen = cabling.parse_nxos_lldp("\n".join(cli.handle("show lldp neighbors detail")))
    assert seen == {
        "Ethernet1/2": {"system_name": "lab-node3", "port_id": "rdma0", "port_description": "rdma0",
                        "chassis_id": "0000.0000.0000"},
        "Ethernet1/10": {"system_name": "lab-spine1", "port_id": "Ethernet1/1", "port_description": None,
                         "chassis_id": "0000.0000.0000"},
    }  # fmt: skip
    assert errors(run(cli, "configure terminal", "no feature lldp", "end")) == []
    assert run(cli, "show lldp neighbors detail") == ["% Invalid command at '^' marker."]


def test_interface_brief_is_the_table_the_monitoring_parser_reads(dev, cli) -> None:
    """`show interface brief`: every Ethernet port up but the one shut down, in the layout monitoring/switch.py's
    parse_brief reads from a real Nexus (its test's sample)."""
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.switch import parse_brief

    assert errors(run(cli, "configure terminal", "interface ethernet 1/3", "shutdown", "end")) == []
    out = run(cli, "show interface brief")
    links = parse_brief("\n".join(out))
    assert links == {f"Ethernet1/{n}": n != 3 for n in range(1, dev.info.ethernet_ports + 1)}, out
    assert "Eth1/3        1       eth  access down    Administratively down" in "\n".join(out)
    assert parse_brief("\n".join(run(cli, "show int br"))) == links
