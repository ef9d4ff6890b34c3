"""`train.py average`: the mean of a run's last checkpoints' weights as a Hugging Face directory (checkpoint
averaging), on DDP checkpoints written here in one process; FSDP's and DeepSpeed's sharded checkpoints are averaged
in their engines' tests (tests/payload/test_payload_fsdp.py) from a real run."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from payload import ckpt_verify as V
from payload import commands as C
from payload import data as D
from payload.config import AverageConfig, ConfigError, TrainConfig, to_dict
from payload.model import build_model

pytestmark = pytest.mark.payload


@pytest.fixture
def run(tmp_path, tokenizer_dir):
    """A run directory with DDP checkpoints at steps 10, 20, 30: every floating weight of step s is base + s * delta."""
    tok = D.load_tokenizer(str(tokenizer_dir))
    cfg = TrainConfig(data="corpus", model="tiny", block_size=32, tokenizer=str(tokenizer_dir))
    model = build_model(cfg, len(tok), tok.convert_tokens_to_ids(D.EOS), log=lambda m: None)
    torch.manual_seed(0)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    delta = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in base.items()}
    out = tmp_path / "run"
    for step in (10, 20, 30):
        ckpt = out / "checkpoints" / f"step_{step:07d}"
        ckpt.mkdir(parents=True)
        state = {k: base[k] + step * delta[k] if v.is_floating_point() else v for k, v in base.items()}
        torch.save(state, ckpt / "model.pt")
        shutil.copytree(tokenizer_dir, ckpt / "tokenizer")
        meta = {"step": step, "config": to_dict(cfg), "checksums": True, "engine": "ddp"}
        (ckpt / "trainer.json").write_text(json.dumps(meta))
        V.write(ckpt)
    (out / "checkpoints" / "latest").write_text("step_0000030\n")
    return out, base, delta


def exported(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True).state_dict()


def test_average_of_the_last_two_and_of_named_steps(run, capsys) -> None:
    out, base, delta = run
    assert C.average(AverageConfig(out_dir=str(out), last=2)) == 0
    assert "averaged 2 checkpoint(s) of steps 20, 30 ->" in capsys.readouterr().out
    got = exported(out / "hf_model_avg")
    checked = [k for k in base if k in got and base[k].is_floating_point()]
    assert checked and "transformer.wte.weight" in checked
    for k in checked:
        torch.testing.assert_close(got[k], base[k] + 25 * delta[k], rtol=1e-5, atol=1e-5)
    record = json.loads((out / "hf_model_avg" / "averaged_from.json").read_text())
    assert record["steps"] == [20, 30]
    assert (out / "hf_model_avg" / "tokenizer.json").exists()

    target = out / "avg-10-30"
    assert C.average(AverageConfig(out_dir=str(out), steps="10,30", export_dir=str(target))) == 0
    got = exported(target)
    for k in checked:
        torch.testing.assert_close(got[k], base[k] + 20 * delta[k], rtol=1e-5, atol=1e-5)
    # One checkpoint is that checkpoint.
    assert C.average(AverageConfig(out_dir=str(out), steps="30", export_dir=str(out / "one"))) == 0
    got = exported(out / "one")
    for k in checked:
        torch.testing.assert_close(got[k], base[k] + 30 * delta[k], rtol=1e-5, atol=1e-5)


def test_average_refuses_a_damaged_or_foreign_checkpoint(run, capsys) -> None:
    out, _, _ = run
    ckpt = out / "checkpoints" / "step_0000020"
    (ckpt / "model.pt").write_bytes(b"torn")
    assert C.average(AverageConfig(out_dir=str(out))) == 1
    assert f"error: {ckpt}: model.pt has 4 bytes" in capsys.readouterr().err
    shutil.rmtree(ckpt)
    other = out / "checkpoints" / "step_0000030" / "trainer.json"
    meta = json.loads(other.read_text())
    meta["config"]["block_size"] = 64
    other.write_text(json.dumps(meta))
    V.write(other.parent)
    assert C.average(AverageConfig(out_dir=str(out))) == 1
    assert "step_0000030 is another model than" in capsys.readouterr().err
    assert C.average(AverageConfig(out_dir=str(out), last=5)) == 1
    assert "--last=5 but 2 checkpoint(s) on disk" in capsys.readouterr().err
    assert C.average(AverageConfig(out_dir=str(out), steps="40")) == 1
    assert "no checkpoint of step(s) 40" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"last": -1}, "--last=-1"), ({"steps": "10,x"}, "comma-separated"), ({"last": 2, "steps": "10"}, "one or")],
)
def test_average_options(kwargs, error) -> None:
    with pytest.raises(ConfigError, match=error):
        AverageConfig(**kwargs).validate()
