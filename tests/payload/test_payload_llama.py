"""Any Hugging Face decoder-only model, built offline from a preset or a config.json, on CPU: the FLOP count
for MFU against hand arithmetic (grouped-query attention, SwiGLU, untied output layer), FSDP's decoder layers
found for every architecture, the block size refused above the model's positions, and clear errors."""

from __future__ import annotations

import json

import pytest
import torch

from payload.config import LLAMA_PRESETS, ConfigError, TrainConfig, parse_args, resolve
from payload.model import build_model, count_params, decoder_layers, model_flops_per_token

pytestmark = pytest.mark.payload

QUIET = dict(log=lambda m: None)


def llama_matmul_by_hand(d: int, layers: int, heads: int, kv_heads: int, head_dim: int, ff: int, vocab: int) -> int:
    """q and o: d x heads*head_dim; k and v: d x kv_heads*head_dim; SwiGLU gate, up, down: 3 x d x ff; the output
    layer d x vocab (counted once, tied or not: the input embedding is a lookup, no matmul)."""
    attn = 2 * d * heads * head_dim + 2 * d * kv_heads * head_dim
    return layers * (attn + 3 * d * ff) + d * vocab


def test_llama_tiny_flops_follow_gqa_swiglu_and_the_untied_head():
    model = build_model(TrainConfig(data="x", model="llama-tiny", block_size=64), 2000, 0, **QUIET)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.vocab_size == 2048  # 2000 -> x64
    assert model.config.num_key_value_heads == 2 and not model.config.tie_word_embeddings
    # 2 layers, d=128, 4 query heads and 2 key/value heads of 32, SwiGLU 352, untied head over 2048
    n = 2 * (2 * 128 * 128 + 2 * 128 * 64 + 3 * 128 * 352) + 128 * 2048
    assert n == llama_matmul_by_hand(128, 2, 4, 2, 32, 352, 2048) == 630_784
    total, matmul = count_params(model)
    # the untied input embedding (2048 x 128) and the norms (5 x 128) are parameters but no matmul
    assert (total, matmul) == (n + 2048 * 128 + 5 * 128, n)
    # 6N + 12 * L * (heads * head_dim) * T
    assert model_flops_per_token(model, 64) == 6 * n + 12 * 2 * 128 * 64 == 3_981_312


def test_llama_1b_flops_by_hand_on_the_meta_device():
    """The ~1B preset (Llama 3.2 1B's shape, head_dim 64 given explicitly) with its own 128256-token vocabulary:
    1.2358B parameters as Meta's config gives, tied output layer counted once."""
    with torch.device("meta"):
        model = build_model(TrainConfig(data="x", model="llama-1b", block_size=8192), 128256, 0, **QUIET)
    n = llama_matmul_by_hand(2048, 16, 32, 8, 64, 8192, 128256)
    total, matmul = count_params(model)
    assert matmul == n == 16 * (2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192) + 2048 * 128256
    assert total == n + 33 * 2048 == 1_235_814_400  # + 2 norms per layer and the final one; head tied
    assert model_flops_per_token(model, 8192) == 6 * n + 12 * 16 * 2048 * 8192


@pytest.mark.parametrize(
    ("preset", "vocab", "params"),
    [
        ("llama-125m", 49152, 134_515_008),  # HuggingFaceTB/SmolLM-135M's shape and vocabulary
        ("llama-125m", 50257, 135_178_560),  # with GPT-2's vocabulary (padded to 50304)
        ("llama-1b", 50257, 1_076_168_704),
    ],
)
def test_preset_parameter_counts(preset, vocab, params):
    with torch.device("meta"):
        model = build_model(TrainConfig(data="x", model=preset, block_size=1024), vocab, 0, **QUIET)
    assert count_params(model)[0] == params


def test_gpt2_flops_unchanged():
    """GPT-2 keeps its count (docs/benchmarks.md): all parameters but the position embeddings."""
    model = build_model(TrainConfig(data="x", model="tiny", block_size=64), 2048, 0, **QUIET)
    total, matmul = count_params(model)
    assert matmul == total - 1024 * 128
    assert model_flops_per_token(model, 64) == 6 * matmul + 12 * 2 * 128 * 64


def small(kind: str):
    import transformers

    common = dict(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512,
    )  # fmt: skip
    return getattr(transformers, f"{kind}Config")(**common)


@pytest.mark.parametrize("kind", ["Llama", "Mistral", "Qwen2", "Qwen3"])
def test_model_dir_builds_offline_and_fsdp_finds_its_layers(kind, tmp_path):
    small(kind).save_pretrained(tmp_path / kind)
    cfg = parse_args(["--data=x", f"--model={tmp_path / kind}", "--block_size=512"])
    model = build_model(cfg, 200, 0, **QUIET)
    assert type(model).__name__ == f"{kind}ForCausalLM" and model.config.vocab_size == 256  # config.json's own
    layers = decoder_layers(model)
    assert [type(m).__name__ for m in layers] == [f"{kind}DecoderLayer"] * 3
    assert all(a is b for a, b in zip(layers, model.model.layers, strict=True))
    head_dim = 128 if kind == "Qwen3" else 16  # Qwen3Config's head_dim defaults to 128, not hidden / heads
    n = llama_matmul_by_hand(64, 3, 4, 2, head_dim, 128, 256)  # q/k/v biases (Qwen2) are no matmul weights
    assert count_params(model)[1] == n
    assert model_flops_per_token(model, 512) == 6 * n + 12 * 3 * 4 * head_dim * 512


def test_decoder_layers_of_both_gpt2_modules():
    from transformers import GPT2Config, GPT2LMHeadModel

    from payload.gpt2 import GPT2

    config = GPT2Config(n_layer=3, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
    hf, fast = GPT2LMHeadModel(config), GPT2(config)
    assert [type(m).__name__ for m in decoder_layers(hf)] == ["GPT2Block"] * 3  # _no_split_modules
    assert decoder_layers(fast) == list(fast.transformer.h)  # no _no_split_modules: the largest ModuleList


def test_block_size_limits():
    assert resolve({"data": "x", "model": "llama-1b", "block_size": 8192})["block_size"] == 8192
    assert resolve({"data": "x", "model": "llama-125m", "block_size": 2048})["block_size"] == 2048
    for values, message in [
        ({"model": "llama-1b", "block_size": 8193}, "--block_size=8193: llama-1b takes at most 8192 positions"),
        ({"model": "llama-125m", "block_size": 4096}, "llama-125m takes at most 2048 positions"),
        ({"model": "./my-model", "block_size": 16384}, "./my-model takes at most 8192 positions"),
        ({"init_from": "/m/gpt2", "block_size": 8193}, "/m/gpt2 takes at most 8192 positions"),
        ({"model": "gpt2", "block_size": 2048}, "GPT-2 has 1024 positions"),
        ({"model": "llama-7b"}, "--model='llama-7b': must be one of tiny, mini, gpt2"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
            resolve({"data": "x", **values})
    # init_from may be any architecture: its own positions are checked where it is built (below)
    assert resolve({"data": "x", "init_from": "./llama", "block_size": 4096})["block_size"] == 4096
    assert LLAMA_PRESETS["llama-tiny"]["max_position_embeddings"] == 8192


def test_init_from_gpt2_refuses_a_block_beyond_its_positions(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=256, n_positions=64)).save_pretrained(
        tmp_path / "gpt2"
    )
    cfg = parse_args(["--data=x", f"--init_from={tmp_path / 'gpt2'}", "--block_size=128"])
    with pytest.raises(ValueError, match=r"--block_size=128: .*gpt2 has 64 positions .*use --block_size<=64"):
        build_model(cfg, 200, 0, **QUIET)


def test_model_dir_errors_are_clear(tmp_path):
    small("Llama").save_pretrained(tmp_path / "short")  # 512 positions
    cfg = parse_args(["--data=x", f"--model={tmp_path / 'short'}", "--block_size=1024"])
    with pytest.raises(ValueError, match=r"--block_size=1024: .*short has 512 positions .*use --block_size<=512"):
        build_model(cfg, 200, 0, **QUIET)
    cfg = parse_args(["--data=x", f"--model={tmp_path / 'short'}", "--block_size=64"])
    with pytest.raises(ValueError, match="vocab_size 256 < the tokenizer's 300 tokens"):
        build_model(cfg, 300, 0, **QUIET)
    with pytest.raises(ValueError, match=r"no config\.json there"):
        build_model(parse_args(["--data=x", f"--model={tmp_path / 'none'}"]), 200, 0, **QUIET)
    from transformers import T5Config

    T5Config(vocab_size=256, d_model=32, num_layers=1, num_heads=2).save_pretrained(tmp_path / "t5")
    with pytest.raises(ValueError, match=r"--model=.*t5: not a decoder-only") as error:
        build_model(parse_args(["--data=x", f"--model={tmp_path / 't5'}"]), 200, 0, **QUIET)
    assert len(str(error.value)) < 200  # one line, not transformers' list of every causal LM


def test_init_from_loads_weights_of_any_architecture(tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    src = AutoModelForCausalLM.from_config(small("Qwen2"))
    src.save_pretrained(tmp_path / "qwen")
    cfg = parse_args(["--data=x", "--model=llama-tiny", f"--init_from={tmp_path / 'qwen'}", "--block_size=64"])
    model = build_model(cfg, 200, 0, **QUIET)
    assert type(model).__name__ == "Qwen2ForCausalLM" and next(model.parameters()).dtype == torch.float32
    ids = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, src.eval()(ids).logits, rtol=0, atol=0)


def test_init_from_a_config_only_directory_builds_its_architecture(tmp_path):
    """What the launch stages for `-e model=<config dir>`: the staged directory arrives as init_from; with no
    weights in it, its config.json is the architecture (random init), not the `model` preset."""
    from transformers import GPT2Config

    small("Mistral").save_pretrained(tmp_path / "mistral")
    logs = []
    cfg = parse_args(["--data=x", "--model=llama-tiny", f"--init_from={tmp_path / 'mistral'}", "--block_size=64"])
    model = build_model(cfg, 200, 0, log=logs.append)
    assert type(model).__name__ == "MistralForCausalLM" and model.config.num_hidden_layers == 3
    assert any("building" in m and "mistral" in m for m in logs), logs
    GPT2Config(vocab_size=320, n_positions=256, n_layer=1, n_head=2, n_embd=64).save_pretrained(tmp_path / "gpt2")
    cfg = parse_args(["--data=x", "--model=gpt2", f"--init_from={tmp_path / 'gpt2'}", "--block_size=64"])
    model = build_model(cfg, 300, 0, **QUIET)
    assert model.config.n_layer == 1 and model.config.vocab_size == 320  # the directory's GPT-2, not the preset
    cfg = parse_args(["--data=x", f"--init_from={tmp_path / 'gpt2'}", "--block_size=512"])
    with pytest.raises(ValueError, match="block_size=512"):
        build_model(cfg, 300, 0, **QUIET)


def test_save_hf_names_the_transformers_class_not_fsdps(tmp_path):
    """fully_shard re-classes the module (FSDPLlamaForCausalLM): config.json must still say LlamaForCausalLM."""
    from transformers import AutoModelForCausalLM

    from payload.model import save_hf

    model = AutoModelForCausalLM.from_config(small("Llama"))
    from torch.distributed.fsdp import FSDPModule

    wrapped_class = type("FSDPLlamaForCausalLM", (FSDPModule, type(model)), {})  # what fully_shard does
    model.__class__ = wrapped_class
    save_hf(model, str(tmp_path / "out"), {k: v.clone() for k, v in model.state_dict().items()})
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    back = AutoModelForCausalLM.from_pretrained(str(tmp_path / "out"), local_files_only=True)
    assert type(back).__name__ == "LlamaForCausalLM"


def test_deepspeed_export_misses_only_a_tied_output_layer(tmp_path, monkeypatch):
    """ZeRO's merged state holds a tied lm_head.weight once, as the embedding; an untied one (llama-tiny's) that is
    missing is a broken checkpoint. DeepSpeed's merge is replaced by the state it would return."""
    import sys
    import types

    from transformers import AutoModelForCausalLM

    from payload.engines import export_deepspeed_checkpoint

    merged: dict = {}
    zero_to_fp32 = types.ModuleType("deepspeed.utils.zero_to_fp32")
    zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint = lambda root, tag: merged
    monkeypatch.setitem(sys.modules, "deepspeed.utils.zero_to_fp32", zero_to_fp32)  # found first: no deepspeed import
    for tied in (True, False):
        config = small("Llama")
        config.tie_word_embeddings = tied
        model = AutoModelForCausalLM.from_config(config)
        merged.clear()
        merged.update({k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"})
        target = tmp_path / f"tied-{tied}"
        if tied:
            export_deepspeed_checkpoint(tmp_path / "step_1", model, target)
            back = AutoModelForCausalLM.from_pretrained(str(target), local_files_only=True)
            assert back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr()
        else:
            with pytest.raises(RuntimeError, match=r"missing \['lm_head\.weight'\]"):
                export_deepspeed_checkpoint(tmp_path / "step_1", model, target)
