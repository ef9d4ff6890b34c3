"""The nxos_roce_qos role through real ansible-playbook runs (playbooks/switch.yml).

Each test that talks to a switch starts its own emulator on a random loopback port; the emulator's
command log shows what went over the wire, its state file what the running config is.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from lab.cluster import switch_inventory
from tests.switch.conftest import FIELD_CONFIG, FIXTURES, ROOT, run_playbook

pytestmark = pytest.mark.switch

EXAMPLE_VARS = ROOT / "inventory" / "example" / "group_vars" / "switches" / "nxos_roce_qos.yml"
# The field cluster's shared QoS values (its CNP class is 2 on the 4-queue switch).
EXAMPLE_QOS = ROOT / "inventory" / "example" / "group_vars" / "all" / "qos.yml"


def _check_golden(rendered: str, golden_name: str) -> None:
    golden = FIXTURES / golden_name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"rendered policy differs from {golden} (UPDATE_GOLDEN=1 rewrites it)"


def test_rendered_policy_matches_the_golden_files(tmp_path):
    """Default variables (lab inventory: two nodes, profile dcqcn, fabric TCP in its own lossy class), the
    same in profile pfc_only (no ECN marking, no per-speed policies) and a non-default set (TCP in the
    lossless class, a 300 m pause buffer), rendered without a switch and without starting an
    `ansible-connection` process (the missing-password test below shows that a task of the switch
    action does start one, in the same kind of socket directory)."""
    custom = yaml.safe_load((FIXTURES / "custom-vars.yml").read_text())
    unreachable = {"ansible_host": "127.0.0.1", "ansible_port": 9}
    inventory = switch_inventory(
        tmp_path / "inv",
        {
            "sw-default": dict(unreachable),
            "sw-pfc-only": {**unreachable, "cluster_qos_profile": "pfc_only"},
            "sw-custom": {**unreachable, **custom},
        },
    )
    sockets = tmp_path / "pc"  # where an ansible-connection process would put its socket
    run = run_playbook(
        inventory,
        "--tags",
        "nxos_roce_qos_render",
        extra_vars={"nxos_roce_qos_render_dir": str(tmp_path / "render")},
        env={"ANSIBLE_PERSISTENT_CONTROL_PATH_DIR": str(sockets)},
    )
    assert run.rc == 0, run.explain()
    assert not sockets.exists(), "review-only render started an ansible-connection process"
    _check_golden((tmp_path / "render" / "sw-default.cfg").read_text(), "golden-default.cfg")
    _check_golden((tmp_path / "render" / "sw-pfc-only.cfg").read_text(), "golden-pfc-only.cfg")
    _check_golden((tmp_path / "render" / "sw-custom.cfg").read_text(), "golden-custom.cfg")


def test_example_inventory_renders_with_its_vault(tmp_path):
    """The field cluster's inventory as shipped: vault (documented example password) + field names."""
    password = tmp_path / "vault-pass"
    password.write_text("rdma-llm-example")
    run = run_playbook(
        ROOT / "inventory" / "example",
        "--tags",
        "nxos_roce_qos_render",
        "--vault-id",
        f"example@{password}",
        extra_vars={"nxos_roce_qos_render_dir": str(tmp_path / "render")},
    )
    assert run.rc == 0, run.explain()
    _check_golden((tmp_path / "render" / "nexus1.cfg").read_text(), "golden-example.cfg")


BAD_VALUES = {
    "bad-dscp": ({"nxos_roce_qos_roce_dscp": [26, 64]}, "nxos_roce_qos_roce_dscp"),
    "bad-cnp-dscp": ({"nxos_roce_qos_cnp_dscp": 26}, "nxos_roce_qos_cnp_dscp"),
    "bad-cos": ({"nxos_roce_qos_nodrop_cos": 8}, "nxos_roce_qos_nodrop_cos"),
    "bad-class-mtu": ({"nxos_roce_qos_mtu": 9300}, "nxos_roce_qos_mtu"),
    "bad-if-mtu": ({"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "mtu": 9215}]}, "nxos_roce_qos_interfaces"),
    "bad-if-name": ({"nxos_roce_qos_interfaces": [{"name": "eth1/1"}]}, "nxos_roce_qos_interfaces"),
    "bad-scheme": ({"nxos_roce_qos_queue_scheme": "16q"}, "nxos_roce_qos_queue_scheme"),
    "bad-type": ({"nxos_roce_qos_cnp_qos_group": "high"}, "nxos_roce_qos_cnp_qos_group"),
    "bad-bandwidth": ({"nxos_roce_qos_roce_bandwidth_percent": 80}, "nxos_roce_qos_roce_bandwidth_percent"),
    "bad-profile": ({"cluster_qos_profile": "dctcp"}, "nxos_roce_qos_profile"),
    "tcp-in-the-roce-class": ({"cluster_tcp_dscp": 26}, "nxos_roce_qos_tcp_dscp"),
    "long-cable-no-headroom": ({"nxos_roce_qos_pfc_cable_length_m": 300}, "nxos_roce_qos_pfc_pause_buffer"),
    "description-spaces": (
        {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "description": "node1  rdma0"}]},
        "nxos_roce_qos_interfaces",
    ),
    # Injection: a line break in a rendered value would start a second, top-level config command.
    "inject-description": (
        {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1", "description": "node1\nno system qos"}]},
        "nxos_roce_qos_interfaces",
    ),
    "inject-name": ({"nxos_roce_qos_queuing_policy": "Q\r\nno feature lldp"}, "nxos_roce_qos_queuing_policy"),
    "inject-checkpoint": (
        {"nxos_roce_qos_checkpoint_file": "bootflash:c;delete bootflash:nxos.bin"},
        "nxos_roce_qos_checkpoint_file",
    ),
}


def test_bad_values_fail_before_connecting_and_name_the_variable(tmp_path):
    """One host per bad value; no switch listens, so any connection attempt would fail differently."""
    hosts = {
        name: {"ansible_host": "127.0.0.1", "ansible_port": 9, **values} for name, (values, _) in BAD_VALUES.items()
    }
    run = run_playbook(
        switch_inventory(tmp_path / "inv", hosts), extra_vars={"nxos_roce_qos_render_dir": str(tmp_path / "render")}
    )
    assert run.rc != 0
    for host, (_, variable) in BAD_VALUES.items():
        assert run.stats(host).get("failures") == 1, f"{host}: {run.stats(host)}"
        failed = [
            (name, res)
            for name, res in run.results(host)
            if res.get("failed") or any(r.get("failed") for r in res.get("results", []))
        ]
        assert len(failed) == 1, host
        name, res = failed[0]
        assert name.startswith(("assert | ", "Validating arguments")), f"{host} failed in {name}"
        assert variable in json.dumps(res), f"{host}: message does not name {variable}: {res}"
        assert not any(n.startswith(("render |", "push |")) for n, _ in run.results(host))
    assert not (tmp_path / "render").exists()


def test_missing_password_fails_before_the_first_command_without_showing_it(tmp_path):
    """No switch listens on port 9: a login attempt would fail with a connection error instead."""
    host = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_password": ""}
    sockets = tmp_path / "pc"
    run = run_playbook(
        switch_inventory(tmp_path / "inv", {"sw-nopass": host}),
        extra_vars={"nxos_roce_qos_render_dir": str(tmp_path / "render")},
        env={"ANSIBLE_PERSISTENT_CONTROL_PATH_DIR": str(sockets)},
    )
    assert run.rc != 0 and run.stats("sw-nopass").get("unreachable", 0) == 0, run.explain()
    assert sockets.is_dir(), "the switch action's task starts ansible-connection (it logs in only on a command)"
    report = run.result("sw-nopass", "push | Report the failure")
    assert "ansible_user and ansible_password (or a key) must be set for sw-nopass" in report["msg"]
    assert "Nothing was rolled back" in report["msg"]


def test_apply_then_reapply_is_idempotent_and_silent_on_the_wire(emulator, switch_run):
    first = switch_run(emulator)
    assert first.rc == 0, first.explain()
    assert first.stats("lab-switch")["changed"] >= 1
    result = first.fact("lab-switch", "nxos_roce_qos_result")
    assert result["passed"] and result["changed"] and result["saved"], result
    assert "priority-flow-control mode on" in result["commands"]
    running = emulator.running()
    assert (
        "system qos\n  service-policy type network-qos ROCE_NETWORK_QOS\n"
        "  service-policy type queuing output ROCE_QUEUING" in running
    )
    assert (
        "interface Ethernet1/2\n  priority-flow-control mode on\n  priority-flow-control watch-dog-interval on\n"
        "  mtu 9216\n  service-policy type queuing output ROCE_QUEUING_100G\n"
        "  service-policy type qos input ROCE_QOS_MARKING" in running
    )
    assert emulator.startup() == running, "saved to startup after the post-check"
    log = emulator.log()
    checkpoint = next(i for i, e in enumerate(log) if e["line"].startswith("checkpoint file"))
    first_config = next(i for i, e in enumerate(log) if e["mode"] != "exec")
    postcheck = max(i for i, e in enumerate(log) if e["line"] == "show interface priority-flow-control")
    save = next(i for i, e in enumerate(log) if e["line"] == "copy running-config startup-config")
    assert checkpoint < first_config < postcheck < save, "checkpoint, push, post-check, then save"
    assert [e for e in log if e["result"] == "error"] == []

    mark = len(emulator.log())
    second = switch_run(emulator)
    assert second.rc == 0, second.explain()
    assert second.stats("lab-switch")["changed"] == 0, second.explain()
    assert emulator.config_commands(since=mark) == [], "a converged switch gets no config command"
    sent = [e["line"] for e in emulator.log()[mark:]]
    assert not any(line.startswith(("checkpoint", "copy", "rollback")) for line in sent), sent
    assert second.fact("lab-switch", "nxos_roce_qos_result")["passed"]
    assert emulator.running() == running


def test_check_mode_shows_the_change_and_alters_nothing(emulator, switch_run):
    """Also the paramiko transport (ansible.cfg sets libssh for every other run)."""
    before = emulator.running()
    run = switch_run(emulator, "--check", "--diff", env={"ANSIBLE_NETWORK_CLI_SSH_TYPE": "paramiko"})
    assert run.rc == 0, run.explain()
    plan = run.result("lab-switch", "push | Show the configuration commands")
    assert "service-policy type queuing output ROCE_QUEUING" in plan["msg"]
    assert run.stats("lab-switch")["changed"] == 1  # the plan reports the pending change
    planned = run.result("lab-switch", "push | Plan, checkpoint, push and verify")
    assert "rolled_back" not in planned and "saved" not in planned, "check mode stops after the plan"
    assert planned["diff"]["after"].startswith("feature lldp\npriority-flow-control watch-dog-interval on\n")
    assert "+system qos\n+  service-policy type network-qos ROCE_NETWORK_QOS\n" in planned["unified_diff"]
    result = run.fact("lab-switch", "nxos_roce_qos_result")
    assert result["check_mode"] and not result["passed"]  # reported, not enforced, in check mode
    assert emulator.config_commands() == []
    assert emulator.running() == before and emulator.startup() == before
    assert not any(e["line"].startswith(("checkpoint", "copy", "rollback")) for e in emulator.log())


def test_rejected_line_fails_the_play_and_rollback_restores_exactly(emulator, switch_run):
    """Ethernet1/99 passes the role's checks but the switch has 8 ports: the push fails halfway."""
    before = emulator.running()
    run = switch_run(
        emulator, extra_vars={"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1"}, {"name": "Ethernet1/99"}]}
    )
    assert run.rc != 0
    assert run.stats("lab-switch")["failures"] == 1 and run.stats("lab-switch")["rescued"] == 1
    report = run.result("lab-switch", "push | Report the failure")
    assert "Invalid interface format" in report["msg"] and "rolled back" in report["msg"]
    log = emulator.log()
    applied = [e for e in log if e["mode"] != "exec" and e["result"] == "ok"]
    assert len(applied) > 10, "earlier lines were applied before the rejected one"
    assert [e["line"] for e in log if e["result"] == "error"] == ["interface Ethernet1/99"]
    assert any(e["line"].startswith("rollback running-config file") for e in log)
    assert emulator.running() == before, "rollback restores the running config exactly"
    assert emulator.startup() == before, "nothing saved"
    assert emulator.state()["files"] == {}, "checkpoint file deleted"


def test_migration_from_the_field_config(start_emulator, switch_run):
    """The field switch: mtu 2240 on the no-drop class, no system qos, no PFC, no CNP class."""
    emu = start_emulator(startup_config=FIELD_CONFIG, hostname="field-leaf1")
    field_vars = {**yaml.safe_load(EXAMPLE_QOS.read_text()), **yaml.safe_load(EXAMPLE_VARS.read_text())}
    assert "    mtu 2240\n" in emu.running()
    run = switch_run(emu, extra_vars=field_vars)
    assert run.rc == 0, run.explain()
    result = run.fact("lab-switch", "nxos_roce_qos_result")
    assert result["passed"] and result["changed"], result
    commands = result["commands"]
    # The unified diff of the managed blocks shows what each changed line replaces.
    assert "-    mtu 2240\n+    mtu 9216\n" in result["diff"]
    # Reported change: mtu replaced in place under the field's own class, new CNP class, attachments.
    nq = commands.index("policy-map type network-qos QOS_NETWORK")
    assert commands[nq + 1 : nq + 3] == ["class type network-qos c-nq3", "mtu 9216"]
    assert "class-map type qos match-any CNP" in commands
    # The live match-all class-map RDMA is replaced make before break (the plan's tests replay it line by line).
    assert commands[:3] == ["class-map type qos match-any RDMA_mbb", "match dscp 26", "policy-map type qos QOS_MARKING"]
    assert (
        commands.index("class RDMA_mbb")
        < commands.index("no class RDMA")
        < commands.index("no class-map type qos match-all RDMA")
    )
    assert "service-policy type network-qos QOS_NETWORK" in commands
    running = emu.running()
    assert "2240" not in running
    assert "  class type network-qos c-nq3\n    mtu 9216\n    pause pfc-cos 3" in running
    # RoCE (queue 3) leaves strict priority: bandwidth + ECN; CNP (queue 2) takes strict priority.
    q3 = re.search(r"  class type queuing c-out-q3\n((?:    .*\n)+)", running).group(1)
    assert "priority" not in q3 and "bandwidth remaining percent 50" in q3 and q3.rstrip().endswith(" ecn")
    assert "  class type queuing c-out-q2\n    priority level 1" in running
    assert "service-policy type queuing output QOS_QUEUING" in running
    for port in ("Ethernet1/1/1", "Ethernet1/1/2"):
        block = re.search(rf"interface {port}\n((?:  .*\n)+)", running).group(1)
        assert "priority-flow-control mode on" in block and "mtu 9216" in block
        assert "service-policy type qos input QOS_MARKING" in block
    assert emu.startup() == running

    mark = len(emu.log())
    again = switch_run(emu, extra_vars=field_vars)
    assert again.rc == 0 and again.stats("lab-switch")["changed"] == 0, again.explain()
    assert emu.config_commands(since=mark) == []


def test_missing_show_and_failed_checkpoint_delete_degrade_to_warnings(start_emulator, switch_run):
    """A release without `show interface priority-flow-control` and a bootflash that refuses `delete`:
    the policy is applied and saved, the PFC state is reported as not verified, the stale checkpoint
    file is named in a warning of the task (printed as `[WARNING]` at any verbosity) with how to delete it.
    The next changed run keeps that file (never overwritten), checkpoints beside it and says so."""
    emu = start_emulator(extra=["--unsupported", "show interface priority-flow-control", "--unsupported", "delete"])
    run = switch_run(emu)
    assert run.rc == 0, run.explain()
    result = run.fact("lab-switch", "nxos_roce_qos_result")
    assert result["passed"] and result["changed"] and result["saved"], result
    assert any("priority-flow-control" in item for item in result["unverified"]), result
    assert not any(c["name"].startswith("interface_pfc_oper") for c in result["checks"])
    assert result["warnings"] == ["checkpoint file bootflash:nxos_roce_qos.ckpt was not deleted"]
    finish = run.result("lab-switch", "finish | Save or roll back over the connection phase 1 left open")
    assert finish["delete_error"].startswith("delete bootflash:nxos_roce_qos.ckpt no-prompt ^ % Invalid command")
    assert any(
        "could not delete the checkpoint file bootflash:nxos_roce_qos.ckpt" in w
        and "delete bootflash:nxos_roce_qos.ckpt no-prompt" in w
        for w in finish["warnings"]
    ), finish["warnings"]
    assert "service-policy type queuing output ROCE_QUEUING" in emu.running()
    assert list(emu.state()["files"]) == ["bootflash:nxos_roce_qos.ckpt"]
    left = emu.state()["files"]["bootflash:nxos_roce_qos.ckpt"]

    again = switch_run(emu, extra_vars={"nxos_roce_qos_mtu": 9000})
    assert again.rc == 0, again.explain()
    stage = again.result("lab-switch", "push | Plan, checkpoint, push and verify")
    assert stage["checkpoint"] == "bootflash:nxos_roce_qos-1.ckpt", stage
    assert any(
        "the checkpoint file bootflash:nxos_roce_qos.ckpt was left by an earlier run" in w
        and "this run checkpoints to bootflash:nxos_roce_qos-1.ckpt" in w
        for w in stage["warnings"]
    ), stage["warnings"]
    assert emu.state()["files"]["bootflash:nxos_roce_qos.ckpt"] == left, "never overwritten"
    assert sorted(emu.state()["files"]) == ["bootflash:nxos_roce_qos-1.ckpt", "bootflash:nxos_roce_qos.ckpt"]


def test_leaf_and_spine_converge_in_one_run_with_the_same_policy(start_emulator, tmp_path):
    """A leaf (host ports + an uplink) and a spine (its downlink) from the same variables, in parallel."""
    leaf = start_emulator(name="leaf", hostname="leaf1")
    spine = start_emulator(name="spine", hostname="spine1")
    inventory = switch_inventory(
        tmp_path / "fabric",
        {
            "leaf1": {
                "ansible_host": "127.0.0.1",
                "ansible_port": leaf.port,
                "nxos_roce_qos_uplink_interfaces": [{"name": "Ethernet1/8", "description": "spine1 Ethernet1/1"}],
            },
            "spine1": {
                "ansible_host": "127.0.0.1",
                "ansible_port": spine.port,
                "nxos_roce_qos_host_interfaces": [],
                "nxos_roce_qos_uplink_interfaces": [{"name": "Ethernet1/1", "description": "leaf1 Ethernet1/8"}],
            },
        },
    )
    render = tmp_path / "render"
    run = run_playbook(inventory, extra_vars={"nxos_roce_qos_render_dir": str(render)})
    assert run.rc == 0, run.explain()
    for host in ("leaf1", "spine1"):
        result = run.fact(host, "nxos_roce_qos_result")
        assert result["passed"] and result["changed"], (host, result)

    def policy(host: str) -> str:  # the rendered policy without the comment header and the ports
        text = (render / f"{host}.cfg").read_text()
        return "\n".join(ln for ln in text.split("\ninterface ")[0].splitlines() if not ln.startswith("!"))

    assert policy("leaf1") == policy("spine1"), "one policy from one set of variables"
    leaf_running, spine_running = leaf.running(), spine.running()
    for port in ("Ethernet1/1", "Ethernet1/2"):
        assert f"interface {port}\n  priority-flow-control mode on\n" in leaf_running, port
    assert "interface Ethernet1/8\n  description spine1 Ethernet1/1\n  priority-flow-control mode on\n" in leaf_running
    assert "interface Ethernet1/1\n  description leaf1 Ethernet1/8\n  priority-flow-control mode on\n" in spine_running
    assert "interface Ethernet1/2\n\n" in spine_running, "the spine has no host ports"
    assert "service-policy type queuing output ROCE_QUEUING" in spine_running


def test_ecn_thresholds_follow_each_port_speed(start_emulator, switch_run, tmp_path):
    """Ports of three speeds: each gets the queuing policy of its speed; when a speed leaves the
    fabric its policy is deleted after the ports left it; a third run sends no config command."""
    startup = tmp_path / "speeds.cfg"
    startup.write_text("interface Ethernet1/1\n  speed 40000\ninterface Ethernet1/2\n  speed 25000\n")
    emu = start_emulator(startup_config=startup)
    ports = [{"name": "Ethernet1/1"}, {"name": "Ethernet1/2", "speed": 25000}, {"name": "Ethernet1/3", "speed": 10000}]
    run = switch_run(emu, extra_vars={"nxos_roce_qos_interfaces": ports})
    assert run.rc == 0, run.explain()
    result = run.fact("lab-switch", "nxos_roce_qos_result")
    assert result["passed"], result
    passed = {c["name"] for c in result["checks"] if c["passed"]}
    assert {f"speed_policy ROCE_QUEUING_{s}" for s in ("10G", "25G", "100G")} <= passed, passed
    running = emu.running()
    for port, policy in (("1/1", "100G"), ("1/2", "25G"), ("1/3", "10G")):
        block = re.search(rf"interface Ethernet{port}\n((?:  .*\n)+)", running).group(1)
        assert f"  service-policy type queuing output ROCE_QUEUING_{policy}\n" in block, (port, block)
    q25 = re.search(r"policy-map type queuing ROCE_QUEUING_25G\n((?:  .*\n)+)", running).group(1)
    assert "random-detect minimum-threshold 38 kbytes maximum-threshold 750 kbytes" in q25
    # The system-wide policy keeps the thresholds of nxos_roce_qos_port_speed (100G).
    system = re.search(r"policy-map type queuing ROCE_QUEUING\n((?:  .*\n)+)", running).group(1)
    assert "minimum-threshold 150 kbytes maximum-threshold 3000 kbytes" in system
    # Ethernet1/1 runs at 40G but its item has no speed (100G thresholds): said, not failed.
    assert any("Ethernet1/1" in w and "speed 40000" in w for w in result["warnings"]), result["warnings"]

    mark = len(emu.log())
    ports = [{"name": "Ethernet1/1", "speed": 40000}, {"name": "Ethernet1/2", "speed": 25000}, {"name": "Ethernet1/3"}]
    second = switch_run(emu, extra_vars={"nxos_roce_qos_interfaces": ports})
    assert second.rc == 0, second.explain()
    second_result = second.fact("lab-switch", "nxos_roce_qos_result")
    assert second_result["passed"] and second_result["warnings"] == [], second_result
    commands = second_result["commands"]
    assert commands[-1] == "no policy-map type queuing ROCE_QUEUING_10G", commands
    assert commands.index("interface Ethernet1/3") < len(commands) - 1, "the port leaves the policy first"
    running = emu.running()
    assert "ROCE_QUEUING_10G" not in running and "policy-map type queuing ROCE_QUEUING_40G\n" in running
    assert [e for e in emu.log()[mark:] if e["result"] == "error"] == []

    mark = len(emu.log())
    third = switch_run(emu, extra_vars={"nxos_roce_qos_interfaces": ports})
    assert third.rc == 0 and third.stats("lab-switch")["changed"] == 0, third.explain()
    assert emu.config_commands(since=mark) == []
