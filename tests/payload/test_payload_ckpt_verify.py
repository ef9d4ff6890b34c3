"""A checkpoint's checksums and the quarantine of one that fails them (payload/ckpt_verify.py, stdlib only)."""

from __future__ import annotations

import json

import pytest

from payload import ckpt_verify as V

pytestmark = pytest.mark.payload


def checkpoint(root, step: int, checksums: bool = True):
    ckpt = root / f"step_{step:07d}"
    (ckpt / "tokenizer").mkdir(parents=True)
    (ckpt / "model.pt").write_bytes(bytes(range(256)) * 64)
    (ckpt / "rng_rank0.pt").write_bytes(b"rng")
    (ckpt / "tokenizer" / "tokenizer.json").write_text("{}")
    (ckpt / "dcp").mkdir()
    (ckpt / "dcp" / ".metadata").write_bytes(b"FSDP's shard index")
    (ckpt / "trainer.json").write_text(json.dumps({"step": step, "checksums": checksums}))
    if checksums:
        V.write(ckpt)
    return ckpt


def flip(path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda c: None, None),
        (lambda c: flip(c / "model.pt", 9000), "model.pt does not match its SHA-256 when saved"),
        (lambda c: (c / "model.pt").write_bytes(b"x" * 100), "model.pt has 100 bytes, 16384 when saved"),
        (lambda c: (c / "tokenizer" / "tokenizer.json").unlink(), "tokenizer/tokenizer.json is missing"),
        (lambda c: flip(c / "dcp" / ".metadata", 0), "dcp/.metadata does not match its SHA-256 when saved"),
        (lambda c: (c / "rng_rank1.pt").write_bytes(b"a file the save did not write"), None),
        (lambda c: (c / V.CHECKSUMS).unlink(), "no checksums.json (removed after the save)"),
        (lambda c: (c / V.CHECKSUMS).write_text("{"), "checksums.json unreadable (JSONDecodeError)"),
        (lambda c: (c / V.CHECKSUMS).write_text('{"files": {"model.pt": {}}}'), "checksums.json unreadable (KeyError)"),
        (lambda c: [(c / n).unlink() for n in (V.CHECKSUMS, "trainer.json")], "no checksums.json and trainer.json"),
    ],
)
def test_verify_names_what_is_wrong(tmp_path, damage, why) -> None:
    ckpt = checkpoint(tmp_path, 10)
    damage(ckpt)
    got = V.verify(ckpt)
    assert got == why or (why and got.startswith(why)), got


def test_an_older_payloads_checkpoint_is_not_judged(tmp_path) -> None:
    assert V.verify(checkpoint(tmp_path, 10, checksums=False)) is None
    assert V.verify(tmp_path / "step_0000099") == "not a directory"


def test_candidates_newest_first_up_to_latest_and_quarantine_renames(tmp_path) -> None:
    for step in (5, 10, 15, 100):
        checkpoint(tmp_path, step)
    (tmp_path / "step_0000015.tmp").mkdir()
    (tmp_path / "step_0000020.tmp").mkdir()
    assert [p.name for p in V.candidates(tmp_path, "step_0000010")] == ["step_0000010", "step_0000005"]
    assert [p.name for p in V.finished(tmp_path)] == ["step_0000005", "step_0000010", "step_0000015", "step_0000100"]
    assert V.candidates(tmp_path, "garbage") == []
    moved = V.quarantine(tmp_path / "step_0000010")
    again = V.quarantine(checkpoint(tmp_path, 10))  # the same step quarantined twice in one second
    assert moved.name.startswith("quarantine-step_0000010-") and moved != again and again.exists()
    assert (moved / "model.pt").exists() and not (tmp_path / "step_0000010").exists()  # renamed, not deleted
    # Neither the payload's resume and keep_ckpts nor the launch role (step_<n> names only) see it any more.
    assert [p.name for p in V.finished(tmp_path)] == ["step_0000005", "step_0000015", "step_0000100"]
    assert [p.name for p in V.candidates(tmp_path, "step_0000015")] == ["step_0000015", "step_0000005"]


def test_publish_renames_a_whole_checkpoint_over_one_of_the_same_step(tmp_path) -> None:
    final = tmp_path / "step_0000010"
    part = V.unfinished(final)
    assert part.name == "step_0000010.tmp"
    checkpoint(tmp_path, 10)
    part.mkdir()
    (part / "model.pt").write_bytes(b"new")
    V.write(part)
    V.publish(part, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_0000010"]  # the old one gone, nothing beside
    assert (final / "model.pt").read_bytes() == b"new" and V.verify(final) is None
    part.mkdir()
    V.publish(part, tmp_path / "step_0000011")  # no checkpoint of that step yet
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_0000010", "step_0000011"]


def test_remove_unfinished_takes_only_what_saves_cut_short(tmp_path) -> None:
    for name in ("step_0000010.tmp", "step_0000005.old", "step_0000005", "step_notes.tmp", "quarantine-step_0000001-x"):
        (tmp_path / name).mkdir()
    (tmp_path / "step_0000020.tmp").write_text("a file, not a save")
    assert V.remove_unfinished(tmp_path) == ["step_0000005.old", "step_0000010.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "quarantine-step_0000001-x", "step_0000005", "step_0000020.tmp", "step_notes.tmp"
    ]  # fmt: skip


def test_checkpoints_command_lists_whole_ones_then_the_quarantined(tmp_path, capsys) -> None:
    from payload import commands as C
    from payload.config import CheckpointsConfig

    root = tmp_path / "checkpoints"
    for step in (5, 10):
        checkpoint(root, step)
    (root / "latest").write_text("step_0000010\n")
    (root / "step_0000015.tmp").mkdir()  # a save in progress: no row
    moved = V.quarantine(checkpoint(root, 12))
    assert C.checkpoints(CheckpointsConfig(out_dir=str(tmp_path))) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.lstrip("* ").split()[0] for line in lines[1:3]] == ["5", "10"] and lines[2].startswith("*")
    assert lines[3:] == [f"  quarantined (failed verification at a resume): {moved}"]


@pytest.mark.parametrize(
    ("steps", "keep_last", "keep_every", "removed"),
    [
        ([10, 20, 30, 40], 2, 0, [10, 20]),
        ([10, 20, 30, 40], 1, 20, [10, 30]),  # keep-last 1 (40) and every 20th (20, 40)
        ([100, 200, 300], 5, 0, []),
        ([10, 20], 0, 0, [10]),  # the newest always stays: it is `latest`
        ([5, 10, 15, 20, 25], 2, 10, [5, 15]),
    ],
)
def test_retention_keeps_the_last_and_every_kth(tmp_path, steps, keep_last, keep_every, removed) -> None:
    for s in steps:
        checkpoint(tmp_path, s)
    (tmp_path / "step_0000050.tmp").mkdir()  # a save in progress is no published checkpoint
    assert [V.step_of(p.name) for p in V.expired(tmp_path, keep_last, keep_every)] == removed
