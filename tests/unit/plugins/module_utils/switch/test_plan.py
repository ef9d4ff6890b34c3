"""The diff engine (module_utils/switch/plan.py) against the emulator, in-process.

From several starting configs (factory, the field switch, the role's previous output, a config with
stale lines) the planned commands, typed into lab.nxos_emu as `nxos_config` sends them, take every
managed block to exactly the intent: the next plan is empty and the managed blocks are byte-identical
to the golden converged view. Lines outside the managed blocks are untouched.
"""

from __future__ import annotations

import os
import re

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import plan as engine

from lab.nxos_emu.device import Device, DeviceInfo
from lab.nxos_emu.output import expand_values
from tests.switch.conftest import FIELD_CONFIG, FIXTURES

pytestmark = pytest.mark.switch


DEFAULT_INTENT = (FIXTURES / "golden-default.cfg").read_text()
FIELD_INTENT = (FIXTURES / "golden-example.cfg").read_text()
# The stale start's Ethernet1/3 carries the role's policy and left the port lists: the intent releases it, as the role
# renders nxos_roce_qos_release_interfaces: [Ethernet1/3].
RELEASE_STALE = f"{engine.RELEASE_DIRECTIVE} Ethernet1/3\n"


def _golden(name: str, text: str) -> None:
    path = FIXTURES / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"converged managed blocks differ from {path} (UPDATE_GOLDEN=1 rewrites it)"


def converge(
    start: str | None, intent: str, marking: str, hostname: str = "leaf1", queuing: str | None = None
) -> tuple[Device, list[str]]:
    dev = Device(DeviceInfo(hostname=hostname))
    dev.boot(start)
    commands = engine.plan(dev.body_text(dev.running), intent, marking, queuing)["commands"]
    cli = dev.new_session()
    for line in ["configure terminal", *commands, "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
    return dev, commands


STARTS = {
    "factory": None,
    "role-v1": (FIXTURES / "start-role-v1.cfg").read_text(),
    "stale": (FIXTURES / "start-stale.cfg").read_text(),
    # The role before per-speed ECN thresholds: one queuing policy under system qos, none per port.
    "role-v2": (FIXTURES / "start-role-v2.cfg").read_text(),
    # A port on another speed's policy, an unused per-speed policy of the role, a foreign policy.
    "speeds": (FIXTURES / "start-speeds.cfg").read_text(),
    "converged": DEFAULT_INTENT,
}


def intent_for(start: str | None) -> str:
    return DEFAULT_INTENT + (RELEASE_STALE if start == STARTS["stale"] else "")


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_every_start_converges_to_the_golden_blocks(start):
    dev, commands = converge(start, intent_for(start), "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    again = engine.plan(dev.body_text(dev.running), DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert again["commands"] == [], "a second plan after the push is empty"
    assert again["before"] == again["after"]
    _golden("converged-default.cfg", again["before"])
    if start == DEFAULT_INTENT:
        assert commands == []


def test_stale_lines_are_removed_and_foreign_lines_kept():
    dev, commands = converge(STARTS["stale"], DEFAULT_INTENT + RELEASE_STALE, "ROCE_QOS_MARKING")
    # Each stale line inside a managed block goes with its `no` form.
    for line in (
        "no match dscp 24",
        "no class OTHER",
        "no class type network-qos c-8q-nq4",
        "no random-detect minimum-threshold 100 kbytes maximum-threshold 2000 kbytes drop-probability 5 weight 0 ecn",
        "no priority-flow-control mode on",  # Ethernet1/3 left the port list
        "no service-policy type qos input ROCE_QOS_MARKING",
    ):
        assert line in commands, line
    # Replaced values are sent once, without a `no` (NX-OS replaces them in place).
    assert "bandwidth remaining percent 50" in commands and "no bandwidth remaining percent 60" not in commands
    running = dev.body_text(dev.running)
    assert "class-map type qos match-any ROCE\n  match dscp 26\nclass-map" in running
    assert "class-map type qos match-all OTHER\n  match dscp 10\n" in running, "a foreign class-map stays"
    assert "feature lldp" in running
    assert (
        "interface Ethernet1/1\n  description rack A node 1\n  priority-flow-control mode on\n"
        "  priority-flow-control watch-dog-interval on\n  mtu 9216\n"
        "  service-policy type queuing output ROCE_QUEUING_100G\n"
        "  service-policy type qos input ROCE_QOS_MARKING\n  shutdown\n" in running
    ), "user lines of a managed port (description, shutdown) stay"
    assert "interface Ethernet1/3\n  description was a RoCE port\n  mtu 9216\n\n" in running


def test_field_config_converges_in_place():
    dev, commands = converge(FIELD_CONFIG.read_text(), FIELD_INTENT, "QOS_MARKING", hostname="field-leaf1")
    nq = commands.index("policy-map type network-qos QOS_NETWORK")
    assert commands[nq + 1 : nq + 3] == ["class type network-qos c-nq3", "mtu 9216"]
    again = engine.plan(dev.body_text(dev.running), FIELD_INTENT, "QOS_MARKING")
    assert again["commands"] == []
    _golden("converged-field.cfg", again["before"])


def test_diff_shows_before_and_after_of_the_managed_blocks():
    planned = engine.plan(FIELD_CONFIG.read_text(), FIELD_INTENT, "QOS_MARKING")
    diff = planned["unified_diff"]
    assert diff.startswith("--- running-config\n+++ intended\n")
    assert "-    mtu 2240\n" in diff and "+    mtu 9216\n" in diff
    assert "-class-map type qos match-all RDMA\n" in diff and "+class-map type qos match-any CNP\n" in diff
    assert "hostname" not in diff and "mgmt0" not in diff
    # The field switch runs LLDP already: the role's `feature lldp` is there, unchanged.
    assert " feature lldp\n" in diff and "-feature lldp" not in diff and "+feature lldp" not in diff


def classified(dev: Device, port: str, dscp: int) -> int | None:
    """The qos-group the port's input policy gives a packet of this DSCP on the emulated switch right now
    (first matching class, as NX-OS evaluates a qos policy), None when no class of the policy matches it."""
    iface = dev.running.find(f"interface {port}")
    attached = iface.find("service-policy type qos input") if iface else None
    if attached is None:
        return None
    policy = dev.running.find(f"policy-map type qos {attached.text.rsplit(' ', 1)[1]}")
    # class-default is evaluated last whatever its place in the list (NX-OS keeps it last).
    for cls in sorted(policy.children, key=lambda c: c.text == "class class-default"):
        name = cls.text.split(" ", 1)[1]
        group = cls.find("set qos-group")
        if name != "class-default":
            cmap = dev.running.find(f"class-map type qos {name}")
            lines = [
                set(expand_values(m.text.rsplit(" ", 1)[1])) for m in cmap.children if m.text.startswith("match dscp ")
            ]
            hit = (
                any(dscp in v for v in lines)
                if "match-any" in cmap.text
                else bool(lines) and all(dscp in v for v in lines)
            )
            if not hit:
                continue
        return int(group.text.rsplit(" ", 1)[1]) if group else None
    return None


def replay_watching(start: str, intent: str, marking: str, watch: dict[tuple[str, int], int]) -> list[str]:
    """Type the plan into a switch booted from `start` line by line, as `nxos_config` sends it; after every
    line each (port, DSCP) of `watch` must still be classified into its qos-group. The plan's lines."""
    dev = Device(DeviceInfo(hostname="leaf1"))
    dev.boot(start)
    for (port, dscp), group in watch.items():
        assert classified(dev, port, dscp) == group, f"{port} DSCP {dscp} before the push"
    commands = engine.plan(dev.body_text(dev.running), intent, marking)["commands"]
    cli = dev.new_session()
    for line in ["configure terminal", *commands, "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
        for (port, dscp), group in watch.items():
            assert classified(dev, port, dscp) == group, (
                f"after {line!r}: {port} DSCP {dscp} is not in qos-group {group}"
            )
    assert engine.plan(dev.body_text(dev.running), intent, marking)["commands"] == []
    return commands


def test_match_type_change_is_made_before_break():
    """The field switch's live class-map RDMA is match-all; NX-OS cannot change the type in place. The new
    class-map is built beside it and takes over the policy class before the old one is replaced: RoCE on
    the attached port is in qos-group 3 after every single line of the push."""
    commands = replay_watching(FIELD_CONFIG.read_text(), FIELD_INTENT, "QOS_MARKING", {("Ethernet1/1/2", 26): 3})
    assert commands[:14] == [
        "class-map type qos match-any RDMA_mbb",
        "match dscp 26",
        "policy-map type qos QOS_MARKING",
        "class RDMA_mbb",
        "set qos-group 3",
        "no class RDMA",
        "no class-map type qos match-all RDMA",
        "class-map type qos match-any RDMA",
        "match dscp 26",
        "policy-map type qos QOS_MARKING",
        "class RDMA",
        "set qos-group 3",
        "no class RDMA_mbb",
        "no class-map type qos match-any RDMA_mbb",
    ]


def test_match_type_change_of_both_classes_keeps_every_class_classified():
    """role-v1 rendered match-all for RoCE and CNP, attached to two ports."""
    watch = {(port, dscp): group for port in ("Ethernet1/1", "Ethernet1/2") for dscp, group in ((26, 3), (48, 7))}
    commands = replay_watching(STARTS["role-v1"], DEFAULT_INTENT, "ROCE_QOS_MARKING", watch)
    for name in ("ROCE", "CNP"):
        built = commands.index(f"class-map type qos match-any {name}_mbb")
        moved = commands.index(f"class {name}_mbb")
        gone = commands.index(f"no class-map type qos match-all {name}")
        assert built < moved < commands.index(f"no class {name}") < gone, commands
        assert commands.index(f"no class {name}_mbb") < commands.index(f"no class-map type qos match-any {name}_mbb")
    assert not [c for c in commands if "match-all" in c and not c.startswith("no ")]


def test_a_renamed_class_enters_the_policy_before_the_old_one_leaves():
    """nxos_roce_qos_roce_class renamed RDMA -> ROCE on a switch whose marking policy is attached."""
    renamed = DEFAULT_INTENT.replace("ROCE_QOS_MARKING", "M")
    start = renamed.replace("match-any ROCE\n", "match-any RDMA\n").replace("  class ROCE\n", "  class RDMA\n")
    commands = replay_watching(start, renamed, "M", {("Ethernet1/1", 26): 3})
    assert commands.index("class ROCE") < commands.index("no class RDMA"), commands
    assert commands[-1] == "no class RDMA", "the old class leaves last"


def test_ports_move_to_the_policy_of_their_speed_and_unused_speed_policies_go():
    dev, commands = converge(STARTS["speeds"], DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    # Ethernet1/2 is re-pointed in place (no `no` line, the port keeps an egress policy throughout),
    # then the role's policies no port uses are deleted, after the port left them.
    port = commands.index("interface Ethernet1/2")
    assert commands[port + 1] == "service-policy type queuing output ROCE_QUEUING_100G"
    assert commands[-2:] == [
        "no policy-map type queuing ROCE_QUEUING_25G",
        "no policy-map type queuing ROCE_QUEUING_40G",
    ]
    running = dev.body_text(dev.running)
    assert "policy-map type queuing OTHER_QUEUING_25G\n" in running, "a foreign policy stays"
    assert "ROCE_QUEUING_25G" not in running and "ROCE_QUEUING_40G" not in running
    planned = engine.plan(STARTS["speeds"], DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert "-policy-map type queuing ROCE_QUEUING_40G\n" in planned["unified_diff"]
    assert "-  service-policy type queuing output ROCE_QUEUING_25G\n" in planned["unified_diff"]


def test_role_v2_gains_a_queuing_policy_per_speed_and_the_tcp_share_shrinks_the_default_first():
    """role-v2: one queuing policy with RoCE 50 / default 50. The fabric TCP queue takes 25 from the default
    queue: the default shrinks before the TCP queue grows (the emulator refuses a policy above 100 %)."""
    _dev, commands = converge(STARTS["role-v2"], DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert "policy-map type queuing ROCE_QUEUING_100G" in commands
    system = commands.index("policy-map type queuing ROCE_QUEUING")
    assert commands[system + 1 : system + 5] == [
        "class type queuing c-out-8q-q-default",
        "bandwidth remaining percent 25",
        "class type queuing c-out-8q-q1",
        "bandwidth remaining percent 25",
    ]
    assert commands.count("service-policy type queuing output ROCE_QUEUING_100G") == 2
    assert not [c for c in commands if c.startswith("no ")], commands


PFC_ONLY_INTENT = (FIXTURES / "golden-pfc-only.cfg").read_text()


@pytest.mark.parametrize("start", [None, DEFAULT_INTENT], ids=["factory", "dcqcn"])
def test_profile_pfc_only_converges_without_ecn_or_per_speed_policies(start):
    dev, commands = converge(start, PFC_ONLY_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    again = engine.plan(dev.body_text(dev.running), PFC_ONLY_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert again["commands"] == [] and again["before"] == again["after"]
    _golden("converged-pfc-only.cfg", again["before"])
    running = dev.body_text(dev.running)
    assert "random-detect" not in running and "ROCE_QUEUING_100G" not in running
    if start is not None:  # from dcqcn: the ports leave their ECN policy before it is deleted
        assert commands.count("no service-policy type queuing output ROCE_QUEUING_100G") == 2
        assert commands[-1] == "no policy-map type queuing ROCE_QUEUING_100G", commands
        assert sum(c.startswith("no random-detect ") for c in commands) == 1, "the system policy's WRED goes"


HEADROOM = "    pause buffer-size 101920 pause-threshold 46800 resume-threshold 34320\n"


def test_pfc_headroom_is_added_replaced_and_removed():
    """The pause buffer line under the no-drop class: one setting, replaced in place, removed with `no`."""
    with_headroom = DEFAULT_INTENT.replace(
        "    mtu 9216\n    pause pfc-cos 3\n", "    mtu 9216\n" + HEADROOM + "    pause pfc-cos 3\n"
    )
    assert with_headroom != DEFAULT_INTENT
    dev, commands = converge(DEFAULT_INTENT, with_headroom, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert commands == [
        "policy-map type network-qos ROCE_NETWORK_QOS",
        "class type network-qos c-8q-nq3",
        HEADROOM.strip(),
    ]
    bigger = with_headroom.replace("101920", "131072")
    _dev, commands = converge(dev.body_text(dev.running), bigger, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert commands[-1] == "pause buffer-size 131072 pause-threshold 46800 resume-threshold 34320"
    assert not [c for c in commands if c.startswith("no ")], "replaced in place"
    _dev, commands = converge(with_headroom, DEFAULT_INTENT, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert commands[-1] == "no " + HEADROOM.strip()


# ------------------------------------------------------------------------------------------ reset
def normalized(text: str) -> list[tuple[str, tuple]]:
    """A config as its blocks, each with its lines in a fixed order: two configs with the same blocks and lines list the
    same. A block the reset creates again comes at the end of its kind's list, as NX-OS prints blocks in the order they
    were made (a baseline's second `match` line likewise): same configuration, other order."""

    def flat(node: engine.Node) -> tuple:
        return (node.line, tuple(sorted(flat(c) for c in node.children)))

    return sorted(flat(n) for n in engine.parse(text))


def reset_from(start: str | None, intent: str, marking: str, queuing: str | None, baseline: bool = True):
    """Converge a switch booted from `start`, then type the reset plan (back to the running config read before the
    apply) line by line. Returns (the config before, the config after the reset, the reset's lines)."""
    dev, _ = converge(start, intent, marking, queuing=queuing)
    fresh = Device(DeviceInfo(hostname="leaf1"))
    fresh.boot(start)
    before = fresh.body_text(fresh.running)
    planned = engine.plan_restore(dev.body_text(dev.running), before if baseline else None, intent, marking, queuing)
    cli = dev.new_session()
    for line in ["configure terminal", *planned["commands"], "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
    after = dev.body_text(dev.running)
    again = engine.plan_restore(after, before if baseline else None, intent, marking, queuing)
    assert again["commands"] == [], "a second reset plan is empty"
    return before, after, planned


@pytest.mark.parametrize("start", [s for s in STARTS if s != "converged"])
def test_reset_takes_every_start_back_to_the_config_before_the_first_apply(start):
    """The role's first apply from each start, then its reset: the switch is the start again, line for line where the
    role only added blocks (factory, the role's older outputs), block for block where it also deleted some."""
    before, after, _ = reset_from(STARTS[start], intent_for(STARTS[start]), "ROCE_QOS_MARKING", "ROCE_QUEUING")
    if start in ("factory", "role-v1", "role-v2"):
        assert after == before
    assert normalized(after) == normalized(before)


def test_reset_of_the_field_switch_brings_its_own_policy_back_make_before_break():
    """The field switch: its match-all class-map RDMA, MTU 2240 and 4-queue policies come back; RoCE (DSCP 26) stays
    classified on its ports after every line of the reset."""
    field = FIELD_CONFIG.read_text()
    before, after, planned = reset_from(field, FIELD_INTENT, "QOS_MARKING", None)
    assert after == before
    assert "mtu 2240" in planned["commands"] and "no class-map type qos match-any CNP" in planned["commands"]
    # The port the field switch marked keeps classifying RoCE after every line (its class-map changes type back).
    dev, _ = converge(field, FIELD_INTENT, "QOS_MARKING", hostname="field-leaf1")
    assert classified(dev, "Ethernet1/1/2", 26) == 3
    commands = engine.plan_restore(dev.body_text(dev.running), before, FIELD_INTENT, "QOS_MARKING")["commands"]
    cli = dev.new_session()
    for line in ["configure terminal", *commands, "end"]:
        cli.handle(line)
        assert classified(dev, "Ethernet1/1/2", 26) == 3, f"after {line!r}: RoCE unclassified on Ethernet1/1/2"


def test_reset_removes_references_before_what_they_reference_and_shows_a_diff():
    _, _, planned = reset_from(None, DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    commands = planned["commands"]
    detach = commands.index("no service-policy type qos input ROCE_QOS_MARKING")
    assert (
        detach
        < commands.index("no policy-map type qos ROCE_QOS_MARKING")
        < commands.index("no class-map type qos match-any ROCE")
    )
    assert commands[-1] == "no priority-flow-control watch-dog-interval on"
    assert "no mtu 9216" in commands, "the port MTU the role set goes (the factory port had none)"
    assert planned["unified_diff"].startswith("--- running-config\n+++ before the first apply\n")
    assert "-class-map type qos match-any ROCE\n" in planned["unified_diff"]


def test_reset_without_a_kept_config_removes_every_managed_block():
    """No copy of the config before the first apply (lost, or a switch configured before reset existed): the role's
    blocks go all the same, and every line the role sets on its ports."""
    before, after, _ = reset_from(None, DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING", baseline=False)
    # All but `feature lldp`: without the kept config nothing shows it was off, and other config may use it.
    assert after == before.replace("hostname leaf1\n", "hostname leaf1\nfeature lldp\n", 1) != before
    stale = STARTS["stale"]
    _, after, _ = reset_from(stale, DEFAULT_INTENT + RELEASE_STALE, "ROCE_QOS_MARKING", "ROCE_QUEUING", baseline=False)
    assert "class-map type qos match-any ROCE" not in after and "feature lldp" in after
    assert "interface Ethernet1/1\n  description rack A node 1\n  shutdown\n" in after, "user lines stay"


def _with_matches(config: str, class_match: str, dscps: dict[str, str]) -> str:
    """The golden default config with its class-maps' match type and each class's `match dscp` list set."""
    for name, dscp in dscps.items():
        config = re.sub(rf"(class-map type qos \S+ {name}\n  match dscp )\S+", rf"\g<1>{dscp}", config)
    return config.replace("class-map type qos match-any ", f"class-map type qos {class_match} ")


# Every edit of a live class's match the role can send: one DSCP for another, a DSCP added, one taken away;
# on the RoCE class (a DSCP list), the CNP and the fabric TCP class (one DSCP each).
CLASS_EDITS = [
    ("ROCE", 3, "26", "24"),
    ("ROCE", 3, "26", "24,26"),
    ("ROCE", 3, "24,26", "26"),
    ("ROCE", 3, "24,26", "18,20"),
    ("CNP", 7, "48", "46"),
    ("FABRIC_TCP", 1, "10", "12"),
]


@pytest.mark.parametrize("class_match", ["match-any", "match-all"])
@pytest.mark.parametrize(("name", "group", "old", "new"), CLASS_EDITS, ids=lambda v: str(v))
def test_every_class_edit_keeps_the_old_or_the_new_dscps_classified_after_every_line(
    class_match, name, group, old, new
):
    """Typed line by line into the emulator, at every line of the push either every DSCP of the old match or
    every DSCP of the new one is in the class's qos-group on both ports: the new match is in before the old one
    leaves (match-any), or the class is rebuilt beside itself (match-all, where two matches side by side match
    nothing)."""
    start = _with_matches(DEFAULT_INTENT, class_match, {name: old})
    intent = _with_matches(DEFAULT_INTENT, class_match, {name: new})
    olds, news = ({int(d) for d in v.split(",")} for v in (old, new))
    dev = Device(DeviceInfo(hostname="leaf1"))
    dev.boot(start)
    commands = engine.plan(dev.body_text(dev.running), intent, "ROCE_QOS_MARKING")["commands"]
    assert commands, "the edit planned nothing"
    cli = dev.new_session()
    for line in ["configure terminal", *commands, "end"]:
        out = cli.handle(line)
        assert not [o for o in out if o.startswith(("%", "ERROR"))], f"{line!r} rejected: {out}"
        for port in ("Ethernet1/1", "Ethernet1/2"):
            held = {d for d in olds | news if classified(dev, port, d) == group}
            assert olds <= held or news <= held, f"after {line!r}: {port} classifies only {sorted(held)} ({commands})"
    for port in ("Ethernet1/1", "Ethernet1/2"):
        assert {d for d in olds | news if classified(dev, port, d) == group} == news
    assert engine.plan(dev.body_text(dev.running), intent, "ROCE_QOS_MARKING")["commands"] == []


# ----------------------------------------------------------------------------------------- ports that lose the policy
def _without_ports(intent: str) -> str:
    """The intent with no port (both port lists empty): its blocks up to the first interface."""
    return intent.split("\ninterface ", 1)[0] + "\n"


def _refusal(ports: str) -> str:
    return (
        "the plan would take the role's policy (service-policy type qos input ROCE_QOS_MARKING, PFC, the no-drop "
        f"class) off {ports}, which carry it now and are in neither nxos_roce_qos_host_interfaces nor "
        "nxos_roce_qos_uplink_interfaces: list them there, or name them in nxos_roce_qos_release_interfaces if they "
        "are meant to lose it; nothing was sent to the switch"
    )


def test_a_port_that_left_the_lists_keeps_its_policy_unless_released():
    """The stale start's Ethernet1/3 carries the policy and is in no port list: refused (an emptied or mistyped list
    must not strip a live port silently); released, it loses the role's lines and keeps its own."""
    with pytest.raises(RuleError) as refused:
        engine.plan(STARTS["stale"], DEFAULT_INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert str(refused.value) == _refusal("Ethernet1/3")
    commands = engine.plan(STARTS["stale"], DEFAULT_INTENT + RELEASE_STALE, "ROCE_QOS_MARKING", "ROCE_QUEUING")[
        "commands"
    ]
    port = commands.index("interface Ethernet1/3")
    assert commands[port + 1 : port + 3] == [
        "no priority-flow-control mode on",
        "no service-policy type qos input ROCE_QOS_MARKING",
    ]


def test_empty_port_lists_strip_no_live_port_unless_every_one_is_released():
    """Both lists empty on a converged switch: every port that has the policy would lose it. Refused, naming each;
    releasing one of two still refuses the other; releasing both takes the policy off both."""
    converged, empty = DEFAULT_INTENT, _without_ports(DEFAULT_INTENT)
    assert "interface " not in empty
    with pytest.raises(RuleError) as refused:
        engine.plan(converged, empty, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert str(refused.value) == _refusal("Ethernet1/1, Ethernet1/2")
    with pytest.raises(RuleError) as refused:
        engine.plan(converged, empty + f"{engine.RELEASE_DIRECTIVE} Ethernet1/1\n", "ROCE_QOS_MARKING")
    assert str(refused.value) == _refusal("Ethernet1/2")
    both = empty + f"{engine.RELEASE_DIRECTIVE} Ethernet1/1 Ethernet1/2\n"
    dev, commands = converge(converged, both, "ROCE_QOS_MARKING", queuing="ROCE_QUEUING")
    assert commands.count("no service-policy type qos input ROCE_QOS_MARKING") == 2, commands
    assert "service-policy type qos input ROCE_QOS_MARKING" not in dev.body_text(dev.running)
    assert engine.plan(dev.body_text(dev.running), both, "ROCE_QOS_MARKING", "ROCE_QUEUING")["commands"] == []


def test_a_released_port_without_the_policy_is_left_alone():
    """Releasing is leave to take the policy off, not an order: a released port that does not carry it gets nothing,
    and neither does a port of the lists."""
    intent = DEFAULT_INTENT + f"{engine.RELEASE_DIRECTIVE} Ethernet1/5\n"
    assert engine.plan(DEFAULT_INTENT, intent, "ROCE_QOS_MARKING", "ROCE_QUEUING")["commands"] == []
    assert engine.released(intent + f"  {engine.RELEASE_DIRECTIVE} Ethernet1/6 Ethernet1/1/2\n") == {
        "Ethernet1/5",
        "Ethernet1/6",
        "Ethernet1/1/2",
    }
    assert engine.released(DEFAULT_INTENT) == set()
