"""The switch's reset through real ansible-playbook runs (playbooks/reset.yml, tag nxos_roce_qos) against emulators:
back to the configuration the first apply found, with checkpoint, post-check and the fabric's transaction."""

from __future__ import annotations

import json

import pytest

from lab.cluster import switch_inventory
from tests.switch.conftest import run_playbook

pytestmark = pytest.mark.switch


def inventory(tmp_path, emulators: dict) -> object:
    return switch_inventory(
        tmp_path / "inventory",
        {name: {"ansible_host": "127.0.0.1", "ansible_port": e.port} for name, e in emulators.items()},
    )


def apply(tmp_path, inv, *args: str):
    extra = {"nxos_roce_qos_render_dir": str(tmp_path / "render"), "nxos_roce_qos_baseline_dir": str(tmp_path / "kept")}
    return run_playbook(inv, *args, extra_vars=extra)


def reset(tmp_path, inv, *args: str, limit: str = "switches"):
    extra = {
        "nxos_roce_qos_render_dir": str(tmp_path / "render"),
        "nxos_roce_qos_baseline_dir": str(tmp_path / "kept"),
        "reset_confirm": "yes",
    }
    return run_playbook(
        inv, "--limit", limit, "--tags", "nxos_roce_qos", *args, playbook="playbooks/reset.yml", extra_vars=extra
    )


def test_apply_keeps_the_config_it_found_and_reset_gives_it_back(tmp_path, emulator):
    factory = emulator.running()
    inv = inventory(tmp_path, {"lab-switch": emulator})
    first = apply(tmp_path, inv)
    assert first.rc == 0, first.explain()
    kept = tmp_path / "kept" / "lab-switch.cfg"
    assert "interface Ethernet1/1\n" in kept.read_text() and "ROCE" not in kept.read_text()
    converged = emulator.running()
    assert "class-map type qos match-any ROCE" in converged and emulator.startup() == converged
    # A second apply keeps the first copy.
    kept.write_text(kept.read_text() + "! the first copy\n")
    assert apply(tmp_path, inv).rc == 0 and kept.read_text().endswith("! the first copy\n")

    dry = reset(tmp_path, inv, "--check", "--diff")
    assert dry.rc == 0, dry.explain()
    would = dry.result("lab-switch", "Plan, checkpoint, push and verify the configuration before the first apply")
    assert "no class-map type qos match-any ROCE" in would["commands"] and would["changed"]
    assert "+++ before the first apply" in dry.proc.stdout or would["diff"]["after_header"] == "before the first apply"
    assert emulator.running() == converged and kept.exists(), "check mode sends nothing and keeps the copy"

    since = len(emulator.log())
    done = reset(tmp_path, inv)
    assert done.rc == 0, done.explain()
    assert emulator.running() == factory and emulator.startup() == factory
    assert emulator.state()["files"] == {}, "the checkpoint is deleted"
    lines = [e["line"] for e in emulator.log()[since:]]
    assert lines.index("checkpoint file bootflash:nxos_roce_qos.ckpt") < lines.index(
        "no class-map type qos match-any ROCE"
    )
    assert "copy running-config startup-config" in lines
    assert not kept.exists(), "the copy is forgotten once the switch is back"

    since = len(emulator.log())
    again = reset(tmp_path, inv)
    assert again.rc == 0 and again.stats("lab-switch").get("changed", 0) == 0, again.explain()
    assert emulator.config_commands(since) == [], "a second reset sends no configuration command"


def test_a_reset_a_switch_refuses_rolls_every_switch_back(tmp_path, start_emulator):
    """Two switches; the second refuses to delete a class-map: both end as converged (running and startup), both
    keep their copy, the run fails naming the refusing switch."""
    good = start_emulator(name="good", hostname="leaf1")
    bad = start_emulator(name="bad", hostname="leaf2", extra=["--reject-config", "no class-map .*"])
    inv = inventory(tmp_path, {"leaf1": good, "leaf2": bad})
    assert apply(tmp_path, inv).rc == 0
    converged = {"leaf1": good.running(), "leaf2": bad.running()}
    done = reset(tmp_path, inv)
    assert done.rc != 0
    for name, emu in (("leaf1", good), ("leaf2", bad)):
        assert emu.running() == converged[name] == emu.startup(), f"{name} was not rolled back"
        assert (tmp_path / "kept" / f"{name}.cfg").exists(), f"{name}'s copy was forgotten"
    out = json.dumps(done.data)
    assert "leaf2" in out and "refused by this switch" in out
