"""The checkpoint manager's decisions (payload/checkpoint.py) in one process: which checkpoint a resume starts
from, what it quarantines when a node's copy fails its checksums, what a save publishes and what a failed one
leaves. The other nodes are a stand-in: `Peers` answers for their writers; the runs that go through real
process groups are test_payload_bad_input.py, _faults.py and _node_local.py."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest
import torch

from payload import checkpoint as CK
from payload import ckpt_verify as V
from payload import data as D
from payload.config import TrainConfig
from payload.runtime import RunError

pytestmark = pytest.mark.payload


class Peers:
    """This rank, the writer of its node, in a job whose other nodes' writers say what `answer(value)` returns:
    a list of (host, value). all_reduce answers `reduce(values)` (default: this rank's values, a group of one)."""

    rank = local_rank = 0
    world_size = 1
    setup = None

    def __init__(self, answer=lambda value: [], reduce=None, writer: bool = True):
        self.answer, self.reduce, self.writer = answer, reduce, writer
        self.barriers = self.rounds = 0

    def all_reduce(self, values, op=None, group=None):
        return self.reduce(values) if self.reduce else list(values)

    def barrier(self, group=None):
        self.barriers += 1

    def writers_say(self, value):
        self.rounds += 1
        assert self.rounds < 10, "the nodes never agree"  # a broken rule loops for ever: fail instead
        return ([("here", value)] if self.writer else []) + self.answer(value)


class Engine:
    name = "ddp"

    def __init__(self, fail: Exception | None = None):
        self.fail, self.loaded = fail, []

    def save(self, part, meta, writer):
        if self.fail:
            raise self.fail
        (part / "model.pt").write_bytes(bytes(range(256)) * 16)
        if writer:
            (part / "trainer.json").write_text(json.dumps(meta))

    def load(self, ckpt, optimizer):
        self.loaded.append((ckpt.name, optimizer))
        return json.loads((ckpt / "trainer.json").read_text())


class Data:
    stream = None

    def __init__(self):
        self.sampler = D.ShardedSampler(np.arange(64), 4, 0, 1, seed=0)


def cfg(tmp_path, **overrides) -> TrainConfig:
    return TrainConfig(data="corpus", out_dir=str(tmp_path), batch_size=4, **overrides)


def manager(tmp_path, d=None, engine=None, lines=None, **overrides) -> CK.CheckpointManager:
    (tmp_path / "tokenizer").mkdir(exist_ok=True)
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")
    log = lines.append if lines is not None else (lambda msg: None)
    return CK.CheckpointManager(cfg(tmp_path, **overrides), tmp_path, d or Peers(), engine or Engine(), Data(), log)


def saved(tmp_path, *steps, **overrides) -> CK.CheckpointManager:
    """A run that saved these steps (its sampler one micro-batch further before each save)."""
    m = manager(tmp_path, keep_ckpts=10, **overrides)
    for step in steps:
        m.data.sampler.next_ids()
        m.save(step, step * 100, 1.5, None)
    return m


def truncate(ckpt) -> str:
    model = ckpt / "model.pt"
    size = model.stat().st_size
    model.write_bytes(model.read_bytes()[:100])
    return f"model.pt has 100 bytes, {size} when saved"


# ---------------------------------------------------------------------------------------------- candidate


def test_resume_candidate_is_resume_from_else_what_latest_names(tmp_path) -> None:
    root = tmp_path / "checkpoints"
    assert CK.resume_candidate(cfg(tmp_path), tmp_path) is None  # no checkpoints/ at all
    root.mkdir()
    (root / "latest").write_text("\n")
    assert CK.resume_candidate(cfg(tmp_path), tmp_path) is None  # an empty `latest` names nothing
    (root / "latest").write_text("step_0000008\n")
    assert CK.resume_candidate(cfg(tmp_path), tmp_path) == root / "step_0000008"
    assert CK.resume_candidate(cfg(tmp_path, resume_from="12"), tmp_path) == root / "step_0000012"
    elsewhere = tmp_path / "other" / "step_0000004"
    assert CK.resume_candidate(cfg(tmp_path, resume_from=str(elsewhere)), tmp_path) == elsewhere


def test_saved_batch_is_the_candidates_batch_only_when_resuming(tmp_path) -> None:
    saved(tmp_path, 4)
    assert CK.saved_batch(cfg(tmp_path), tmp_path) == 4
    assert CK.saved_batch(cfg(tmp_path, resume=False), tmp_path) == 0
    assert CK.saved_batch(cfg(tmp_path, resume=False, resume_from="4"), tmp_path) == 4
    assert CK.saved_batch(cfg(tmp_path, resume_from="99"), tmp_path) == 0  # no such checkpoint: auto decides
    (tmp_path / "checkpoints" / "step_0000004" / "trainer.json").write_text("{")
    assert CK.saved_batch(cfg(tmp_path), tmp_path) == 0


# ---------------------------------------------------------------------------------------------- save


def test_save_publishes_whole_points_latest_and_applies_retention(tmp_path) -> None:
    lines = []
    m = manager(tmp_path, lines=lines, keep_ckpts=2, keep_every=8)
    for step in (4, 8, 12, 16):
        ckpt = m.save(step, step * 10, 2.0, 1.9 if step == 16 else None)
    root = tmp_path / "checkpoints"
    assert ckpt == root / "step_0000016"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_0000008", "step_0000012", "step_0000016"]
    assert (root / "latest").read_text() == "step_0000016\n"
    assert all(V.verify(root / n) is None for n in ("step_0000008", "step_0000012", "step_0000016"))
    assert (ckpt / "rng_rank0.pt").is_file() and (ckpt / "tokenizer" / "tokenizer.json").is_file()
    meta = json.loads((ckpt / "trainer.json").read_text())
    assert (meta["step"], meta["tokens_seen"], meta["train_loss"], meta["val_loss"]) == (16, 160, 2.0, 1.9)
    assert meta["checksums"] is True and meta["world_size"] == 1 and meta["config"]["batch_size"] == 4
    assert meta["sampler"] == m.data.sampler.state_dict()
    assert lines[-1].startswith(f"checkpoint: {ckpt} (")


@pytest.mark.parametrize(
    ("error", "hint"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "the disk is full: free space or lower --keep_ckpts"),
        (RuntimeError("unexpected pos 128"), "unexpected pos 128"),
    ],
)
def test_a_failed_save_removes_its_part_and_keeps_latest(tmp_path, error, hint) -> None:
    m = saved(tmp_path, 4)
    m.engine.fail = error
    with pytest.raises(RunError, match=r"saving checkpoint .*step_0000008 failed: ") as e:
        m.save(8, 800, 1.0, None)
    assert hint in str(e.value) and e.value.code == 1
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_0000004"]  # no step_0000008.tmp left
    assert (root / "latest").read_text() == "step_0000004\n"


def test_a_save_that_failed_on_another_node_fails_here_too(tmp_path) -> None:
    m = manager(tmp_path, d=Peers(reduce=lambda values: [1.0]))  # some node's writer could not publish
    with pytest.raises(RunError, match="step_0000004 failed on another node"):
        m.save(4, 400, 1.0, None)


def test_remove_unfinished_is_the_writers_job(tmp_path, capsys) -> None:
    root = tmp_path / "checkpoints"
    (root / "step_0000012.tmp").mkdir(parents=True)
    manager(tmp_path, d=Peers(writer=False)).remove_unfinished()
    assert (root / "step_0000012.tmp").is_dir()
    manager(tmp_path).remove_unfinished()
    assert not (root / "step_0000012.tmp").exists()
    assert f"checkpoints: removed {root / 'step_0000012.tmp'} (a save cut short)" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- resume


def test_resume_loads_latest_with_its_position_and_rng(tmp_path) -> None:
    saved(tmp_path, 4, 8)
    after_save = torch.get_rng_state()
    torch.manual_seed(1234)
    lines = []
    m = manager(tmp_path, lines=lines, skip_optimizer=True)
    ckpt, meta = m.resume()
    assert ckpt == tmp_path / "checkpoints" / "step_0000008" and (meta["step"], meta["tokens_seen"]) == (8, 800)
    assert m.engine.loaded == [("step_0000008", False)]  # --skip_optimizer: the weights only
    assert (m.data.sampler.epoch, m.data.sampler.pos) == (0, 2)  # two micro-batches were dealt before it
    assert torch.equal(torch.get_rng_state(), after_save)
    assert m.quarantined == [] and lines == [f"resume: {ckpt} at step 8, 800 tokens seen, fresh optimizer state "
                                             "(--skip_optimizer)"]  # fmt: skip


def test_resume_says_what_changed_since_the_save(tmp_path) -> None:
    two = Peers()
    two.world_size = 2  # saved by a job of two ranks, resumed by one
    manager(tmp_path, d=two, block_size=64).save(4, 400, 1.0, None)
    lines = []
    m = manager(tmp_path, lines=lines)
    m.resume()
    per_rank = 4 * 128 * m.cfg.grad_accum
    assert lines[:2] == [
        "resume: warning: block_size was 64, now 128",
        f"resume: world size 2 -> 1: per-rank batch kept, tokens per step {2 * per_rank:,} -> {per_rank:,}; the "
        "data order goes on after the blocks already dealt in this epoch",
    ]


def test_ranks_that_resumed_at_different_steps_stop(tmp_path) -> None:
    saved(tmp_path, 4)
    m = manager(tmp_path, d=Peers(reduce=lambda values: [-4.0, 8.0] if len(values) == 2 else list(values)))
    with pytest.raises(RuntimeError, match=r"ranks resumed at different steps 4\.\.8"):
        m.resume()


def test_nothing_to_resume(tmp_path) -> None:
    assert manager(tmp_path).resume() is None


def test_only_some_nodes_have_a_checkpoint(tmp_path) -> None:
    saved(tmp_path, 4)
    m = manager(tmp_path, d=Peers(reduce=lambda values: [0.0]))  # another node has no `latest`
    with pytest.raises(RuntimeError, match="only some nodes have a checkpoint"):
        m.resume()


def test_latest_that_names_no_step(tmp_path) -> None:
    saved(tmp_path, 4)
    (tmp_path / "checkpoints" / "latest").write_text("garbage\n")
    with pytest.raises(RunError, match="names 'garbage', not a step_<n> checkpoint"):
        manager(tmp_path).resume()


def test_corrupt_newer_ones_are_quarantined_newest_first_and_latest_goes_back(tmp_path, capsys) -> None:
    saved(tmp_path, 4, 8, 12)
    root = tmp_path / "checkpoints"
    why8, why12 = truncate(root / "step_0000008"), truncate(root / "step_0000012")
    lines = []
    m = manager(tmp_path, lines=lines)
    ckpt, meta = m.resume()
    assert ckpt == root / "step_0000004" and meta["step"] == 4 and m.engine.loaded == [("step_0000004", True)]
    assert m.quarantined == [
        {"checkpoint": "step_0000012", "why": f"here: {why12}"},
        {"checkpoint": "step_0000008", "why": f"here: {why8}"},
    ]
    assert (root / "latest").read_text() == "step_0000004\n"
    assert sorted(p.name for p in root.glob("step_*")) == ["step_0000004"]
    (moved,) = root.glob("quarantine-step_0000008-*")
    assert (moved / "model.pt").stat().st_size == 100  # renamed as it was found, not deleted
    out = capsys.readouterr().out
    assert f"resume: {root / 'step_0000012'} failed verification: {why12}" in out
    assert f"resume: {root / 'step_0000008'} failed verification: {why8}" in out
    assert f"resume: falling back to step_0000004: quarantined step_0000012 (here: {why12}); step_0000008" in lines[0]


def test_a_checkpoint_that_failed_on_another_node_is_quarantined_here_too(tmp_path) -> None:
    """Whole here, but the other node's newest good one is step 4: this node goes down to it, and quarantines
    step 8 (which failed there) so that both resume from the same step."""
    saved(tmp_path, 4, 8)
    root = tmp_path / "checkpoints"

    def other(value):
        return [("other", {"step_0000008": "model.pt is missing"} if isinstance(value, dict) else 4)]

    m = manager(tmp_path, d=Peers(other))
    ckpt, _ = m.resume()
    assert ckpt == root / "step_0000004"
    assert m.quarantined == [{"checkpoint": "step_0000008", "why": "other: model.pt is missing"}]
    assert sorted(p.name for p in root.glob("step_*")) == ["step_0000004"] and len(list(root.glob("quar*"))) == 1
    assert (root / "latest").read_text() == "step_0000004\n"


def test_the_nodes_go_down_together_until_they_name_the_same_step(tmp_path) -> None:
    """Here step 4 is corrupt, the other node's step 8 is: the other node's newest good one is 4, so this node
    goes on down from 8 past its corrupt 4 to 2, and the other node follows to 2. Both quarantine 8 and 4."""
    saved(tmp_path, 2, 4, 8)
    root = tmp_path / "checkpoints"
    why4 = truncate(root / "step_0000004")

    def other(value):
        return [("other", {"step_0000008": "model.pt is missing"} if isinstance(value, dict) else min(value, 4))]

    m = manager(tmp_path, d=Peers(other))
    ckpt, _ = m.resume()
    assert ckpt == root / "step_0000002" and (root / "latest").read_text() == "step_0000002\n"
    assert m.quarantined == [
        {"checkpoint": "step_0000008", "why": "other: model.pt is missing"},
        {"checkpoint": "step_0000004", "why": f"here: {why4}"},
    ]
    assert sorted(p.name for p in root.glob("step_*")) == ["step_0000002"]


def test_a_node_without_a_good_checkpoint_stops_every_node(tmp_path) -> None:
    saved(tmp_path, 4, 8)
    m = manager(tmp_path, d=Peers(lambda value: [("other", None if not isinstance(value, dict) else {})]))
    with pytest.raises(RunError, match=r"no checkpoint up to step_0000008 verifies on other \(") as e:
        m.resume()
    assert e.value.code == 1
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == ["step_0000004", "step_0000008"]


def test_resume_from_is_verified_but_never_quarantined(tmp_path) -> None:
    saved(tmp_path, 4, 8)
    root = tmp_path / "checkpoints"
    why = truncate(root / "step_0000008")
    with pytest.raises(RunError, match=r"--resume_from=8: .*step_0000008 failed verification") as e:
        manager(tmp_path, resume_from="8").resume()
    assert f"(here: {why})" in str(e.value) and e.value.code == 1
    assert (root / "step_0000008").is_dir() and not list(root.glob("quar*"))
    with pytest.raises(RunError, match=r"--resume_from=99: .*step_0000099 is not a checkpoint \(") as e:
        manager(tmp_path, resume_from="99").resume()
    assert e.value.code == 2
    lacking = Peers(reduce=lambda values: [0.0])  # here, but not on another node
    with pytest.raises(RunError, match="step_0000004 is not a checkpoint on every node") as e:
        manager(tmp_path, d=lacking, resume_from="4").resume()
    assert e.value.code == 2
    m = manager(tmp_path, resume_from="4")
    ckpt, meta = m.resume()  # older than latest, chosen by hand: latest is left as it is
    assert ckpt == root / "step_0000004" and meta["step"] == 4
    assert (root / "latest").read_text() == "step_0000008\n"
