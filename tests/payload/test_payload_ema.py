"""The EMA of the weights (payload/engines.py EMA) in one process: the update rule, tied weights, start-over;
the engines' runs save, load and export it (test_payload_ddp.py, _fsdp.py, _deepspeed.py)."""

from __future__ import annotations

import pytest
import torch

from payload.config import ConfigError, TrainConfig
from payload.engines import EMA

pytestmark = pytest.mark.payload


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(4, 2)
        self.head = torch.nn.Linear(2, 4, bias=False)
        self.head.weight = self.wte.weight  # one parameter under two keys, as GPT-2's lm_head
        self.register_buffer("mask", torch.ones(2))


def test_ema_follows_the_weights_by_its_decay() -> None:
    model = Tied()
    with torch.no_grad():
        model.wte.weight.fill_(0.0)
    # decay 0.75, not 0.5 (where decay and 1 - decay are the same number): ema = 0.75 ema + 0.25 weights, each
    # value exact in binary; the swapped rule would give 3.0, 6.75, 7.6875.
    ema = EMA(model.named_parameters(), decay=0.75)
    assert ema.names == ["wte.weight"]  # the tied weight once
    for value, expected in ((4.0, 1.0), (8.0, 2.75), (8.0, 4.0625)):
        with torch.no_grad():
            model.wte.weight.fill_(value)
        ema.update()
        assert torch.equal(ema.state_dict()["wte.weight"], torch.full((4, 2), expected))
    state = ema.model_state(model, model.state_dict())
    assert torch.equal(state["head.weight"], torch.full((4, 2), 4.0625))  # the tied key follows its parameter
    assert torch.equal(state["mask"], torch.ones(2))  # a buffer stays
    saved = {k: v.clone() for k, v in ema.state_dict().items()}
    ema.reset()
    assert torch.equal(ema.state_dict()["wte.weight"], torch.full((4, 2), 8.0))
    ema.load_state_dict(saved)
    assert torch.equal(ema.state_dict()["wte.weight"], torch.full((4, 2), 4.0625))
    with pytest.raises(RuntimeError, match="the checkpoint's EMA lacks"):
        ema.load_state_dict({})


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"ema_decay": 1.0}, "--ema_decay=1.0: must be in"),
        ({"ema_decay": -0.1}, "--ema_decay=-0.1: must be in"),
        ({"ema_decay": 0.99, "engine": "deepspeed", "zero_stage": 3}, "DeepSpeed ZeRO-3 partitions them"),
    ],
)
def test_ema_options(kwargs, error) -> None:
    with pytest.raises(ConfigError, match=error):
        TrainConfig(data="corpus", **kwargs).validate()
