"""The switch transaction (module_utils/switch/session.py) against an in-process lab.nxos_emu.

The role's action drives the same functions over the persistent network_cli connection; here the
`cli` is an emulator session that raises on the answers network_cli's NX-OS terminal plugin treats as
errors (`% ...`, `ERROR: ...`). What went over the wire is the emulator's own session log.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import plan as engine
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import session

from lab.nxos_emu.device import Device, DeviceInfo
from tests.conftest import ROOT
from tests.switch.conftest import FIXTURES

pytestmark = pytest.mark.switch

ROLE = ROOT / "roles" / "nxos_roce_qos"

INTENT = (FIXTURES / "golden-default.cfg").read_text()
CKPT = "bootflash:nxos_roce_qos.ckpt"


class EmuCli:
    """The session module's `cli` on an emulator session; `refuse` makes extra commands fail."""

    def __init__(self, dev: Device, refuse: tuple[str, ...] = ()):
        self.dev = dev
        self.session = dev.new_session()
        self.refuse = refuse
        self.sent: list[str] = []

    def send(self, command: str) -> str:
        self.sent.append(command)
        if command.startswith(self.refuse):
            raise session.DeviceError(f"% Permission denied for {command}")
        out = self.session.handle(command)
        if any(line.strip().startswith(("%", "ERROR")) for line in out):
            raise session.DeviceError("\n".join(out))
        return "\n".join(out).strip()

    def configure(self, lines: list[str]) -> None:
        for line in ["configure terminal", *lines, "end"]:
            self.send(line)

    def leave_config(self) -> None:
        while self.session.mode_keys is not None:
            self.send("exit")


def _switch(**kw) -> tuple[Device, list[str]]:
    dev = Device(DeviceInfo(hostname="leaf1"), **kw)
    dev.boot(None)
    commands = engine.plan(dev.body_text(dev.running), INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")["commands"]
    return dev, commands


def _passed(running: str, pfc: str | None) -> dict:
    return {"passed": "system qos" in running, "checks": [], "seen_pfc": pfc}


def test_apply_checkpoints_pushes_verifies_saves_and_deletes_in_that_order():
    dev, commands = _switch()
    cli = EmuCli(dev)
    out = session.apply(cli, commands, CKPT, _passed)
    assert not out["failed"] and out["pushed"] and out["saved"] and not out["rolled_back"], out
    assert out["postcheck"]["seen_pfc"] and "Ethernet1/1" in out["postcheck"]["seen_pfc"]
    n = len(commands)
    assert cli.sent[:4] == ["terminal dont-ask", "dir bootflash:", f"checkpoint file {CKPT}", "configure terminal"]
    assert cli.sent[4 : 4 + n] == commands, "the plan's lines, in the plan's order"
    assert cli.sent[4 + n :] == [
        "end",
        "show running-config",
        "show interface priority-flow-control",
        "copy running-config startup-config",
        f"delete {CKPT} no-prompt",
    ]
    assert dev.startup == dev.body_text(dev.running)
    assert dev.files == {} and out["delete_error"] is None
    again = engine.plan(dev.body_text(dev.running), INTENT, "ROCE_QOS_MARKING", "ROCE_QUEUING")
    assert again["commands"] == []


def test_a_rejected_line_rolls_back_exactly_from_the_mode_it_left():
    dev, commands = _switch()
    before = dev.body_text(dev.running)
    cli = EmuCli(dev)
    out = session.apply(cli, [*commands, "interface Ethernet1/99", "mtu 9216"], CKPT, _passed)
    assert out["failed"] and out["step"] == "push" and out["rolled_back"] and not out["saved"], out
    assert out["msg"].startswith("sending the planned commands: ") and "Invalid interface format" in out["msg"]
    rejected = cli.sent.index("interface Ethernet1/99")
    after = cli.sent[rejected + 1 :]
    # Back to the exec prompt (from the last port's mode) before the exec-only rollback.
    assert after[0] == "exit" and set(after[:-2]) == {"exit"}, after
    assert after[-2:] == [f"rollback running-config file {CKPT}", f"delete {CKPT} no-prompt"]
    assert dev.body_text(dev.running) == before == dev.startup
    assert out["postcheck"] is None and dev.files == {}


def test_a_failed_post_check_rolls_back_and_names_the_failed_checks():
    dev, commands = _switch()
    before = dev.body_text(dev.running)

    def failing(running, pfc):
        return {
            "passed": False,
            "checks": [
                {"name": "a", "passed": False, "detail": "PFC off on Ethernet1/1"},
                {"name": "b", "passed": True, "detail": "fine"},
                {"name": "c", "passed": False, "detail": "no ECN"},
            ],
        }

    cli = EmuCli(dev)
    out = session.apply(cli, commands, CKPT, failing)
    assert out["failed"] and out["step"] == "post-check" and out["rolled_back"], out
    assert out["msg"] == "the post-check: Post-check failed: PFC off on Ethernet1/1; no ECN"
    assert "copy running-config startup-config" not in cli.sent
    assert dev.body_text(dev.running) == before == dev.startup and dev.files == {}


def test_a_release_without_the_pfc_show_or_delete_degrades_to_a_reported_leftover():
    dev, commands = _switch(unsupported=("show interface priority-flow-control", "delete"))
    out = session.apply(EmuCli(dev), commands, CKPT, _passed)
    assert not out["failed"] and out["saved"], out
    assert out["postcheck"]["seen_pfc"] is None, "the PFC table is None, not the error text"
    assert "Invalid command" in out["delete_error"]
    assert list(dev.files) == [CKPT], "the checkpoint file stayed; the caller warns with its name"


def test_a_refused_checkpoint_sends_no_configuration_and_deletes_nothing():
    dev, commands = _switch()
    cli = EmuCli(dev, refuse=("checkpoint",))
    out = session.apply(cli, commands, CKPT, _passed)
    assert out["failed"] and out["step"] == "checkpoint" and not out["checkpoint"] and not out["rolled_back"], out
    assert cli.sent == ["terminal dont-ask", "dir bootflash:", f"checkpoint file {CKPT}"]


def test_a_refused_rollback_is_said_in_the_message():
    dev, commands = _switch()
    cli = EmuCli(dev, refuse=("rollback", "copy"))
    out = session.apply(cli, commands, CKPT, _passed)
    assert out["failed"] and out["step"] == "save" and not out["rolled_back"], out
    assert out["msg"].startswith("saving the running config to startup: % Permission denied")
    assert f"the rollback to {CKPT} failed too" in out["msg"]
    assert cli.sent[-1] == f"delete {CKPT} no-prompt"


def test_backup_and_no_save(tmp_path):
    dev, commands = _switch()
    before = dev.body_text(dev.running)
    cli = EmuCli(dev)
    out = session.apply(
        cli,
        commands,
        CKPT,
        _passed,
        save=False,
        backup=lambda text: session.write_backup(str(tmp_path / "backup"), "leaf1", text, now=0),
    )
    assert not out["failed"] and not out["saved"], out
    assert "copy running-config startup-config" not in cli.sent
    backup = tmp_path / "backup" / out["backup_path"].rsplit("/", 1)[1]
    assert backup.name.startswith("leaf1_config.19")
    assert engine.parse(backup.read_text())[0].line == engine.parse(before)[0].line
    assert "service-policy type queuing output ROCE_QUEUING" not in backup.read_text(), "taken before the push"
    assert cli.sent.index("configure terminal") > cli.sent.index(f"checkpoint file {CKPT}") + 1


def test_read_is_two_shows_and_none_for_an_unsupported_pfc_show():
    dev, _ = _switch(unsupported=("show interface priority-flow-control",))
    cli = EmuCli(dev)
    running, pfc = session.read(cli)
    assert "interface Ethernet1/1" in running and pfc is None
    assert cli.sent == ["show running-config", "show interface priority-flow-control"]


def test_a_checkpoint_left_by_an_earlier_run_is_kept_and_reported():
    """An earlier run's delete failed: its file is never overwritten; this run checkpoints beside it."""
    dev, commands = _switch()
    dev.files[CKPT] = "hostname earlier\n"
    dev.files["bootflash:nxos_roce_qos-1.ckpt"] = "hostname earlier too\n"
    out = session.apply(EmuCli(dev), commands, CKPT, _passed)
    assert not out["failed"] and out["saved"], out
    assert out["leftovers"] == [CKPT, "bootflash:nxos_roce_qos-1.ckpt"]
    assert out["checkpoint"] == "bootflash:nxos_roce_qos-2.ckpt"
    assert dev.files == {CKPT: "hostname earlier\n", "bootflash:nxos_roce_qos-1.ckpt": "hostname earlier too\n"}


def test_checkpoint_files_read_a_bootflash_listing():
    listing = (
        "       4096    Oct 14 09:12:40 2025  .rpmstore/\n"
        "      18042    Oct 14 09:30:02 2025  nxos_roce_qos.ckpt\n"
        "      18042    Oct 14 09:31:02 2025  nxos_roce_qos-3.ckpt\n"
        "      18042    Oct 14 09:31:02 2025  nxos_roce_qos.ckpt.bak\n"
        "Usage for bootflash://sup-local"
    )
    assert session.checkpoint_files(listing, CKPT) == [CKPT, "bootflash:nxos_roce_qos-3.ckpt"]
    assert session.free_checkpoint(CKPT, []) == CKPT
    assert session.free_checkpoint("bootflash:mine", ["bootflash:mine"]) == "bootflash:mine-1"


def test_a_switch_that_cannot_list_bootflash_takes_the_configured_name_and_says_so():
    dev, commands = _switch(unsupported=("dir",))
    out = session.apply(EmuCli(dev), commands, CKPT, _passed)
    assert not out["failed"] and out["checkpoint"] == CKPT and "Invalid command" in out["listing_error"], out


def test_stage_keeps_the_checkpoint_and_saves_nothing_then_a_rollback_verdict_restores_exactly():
    """Phase 1 of the fabric transaction, then the verdict of a fabric where another switch failed."""
    dev, commands = _switch()
    before = dev.body_text(dev.running)
    cli = EmuCli(dev)
    out = session.stage(cli, commands, CKPT, _passed)
    assert not out["failed"] and out["pushed"] and not out["saved"] and out["checkpoint"] == CKPT, out
    assert "copy running-config startup-config" not in cli.sent and list(dev.files) == [CKPT]
    assert dev.body_text(dev.running) != before and dev.startup == before
    done = session.finish(EmuCli(dev), CKPT, commit=False)
    assert done == {
        "failed": False,
        "msg": "",
        "step": None,
        "saved": False,
        "rolled_back": True,
        "delete_error": None,
    }
    assert dev.body_text(dev.running) == before == dev.startup and dev.files == {}


def test_a_commit_verdict_saves_and_a_refused_save_rolls_back():
    dev, commands = _switch()
    before = dev.body_text(dev.running)
    assert not session.stage(EmuCli(dev), commands, CKPT, _passed)["failed"]
    done = session.finish(EmuCli(dev, refuse=("copy",)), CKPT, commit=True)
    assert done["failed"] and done["step"] == "save" and done["rolled_back"] and not done["saved"], done
    assert dev.body_text(dev.running) == before == dev.startup and dev.files == {}
    assert not session.stage(EmuCli(dev), commands, CKPT, _passed)["failed"]
    done = session.finish(EmuCli(dev), CKPT, commit=True)
    assert done["saved"] and not done["rolled_back"] and dev.startup == dev.body_text(dev.running) != before


def test_a_failed_stage_rolls_back_at_once():
    dev, commands = _switch()
    before = dev.body_text(dev.running)
    out = session.stage(EmuCli(dev), [*commands, "interface Ethernet1/99"], CKPT, _passed)
    assert out["failed"] and out["step"] == "push" and out["rolled_back"], out
    assert dev.body_text(dev.running) == before and dev.files == {}


def test_the_fabric_commits_only_when_every_switch_passed():
    ok = {"ok": True, "staged": True, "reason": ""}
    unchanged = {"ok": True, "staged": False, "reason": ""}
    assert session.verdict({"leaf1": ok, "leaf2": unchanged}) == {"commit": True, "failed": {}}
    assert session.verdict(
        {"leaf1": ok, "leaf2": {"ok": False, "staged": False, "reason": "sending the planned commands: % Invalid"}}
    ) == {"commit": False, "failed": {"leaf2": "sending the planned commands: % Invalid"}}
    gone = session.verdict({"leaf1": ok, "spine1": None})
    assert not gone["commit"] and "did not get to the push" in gone["failed"]["spine1"]
