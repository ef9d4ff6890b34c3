"""A compact GPT-2 for training: the same parameters, names and shapes as Hugging Face's GPT2LMHeadModel.

Why not train the Hugging Face module itself: it is general (caches, masks, heads, hooks) and its step costs
about 30% more on an H100 than this one (docs/benchmarks.md). This module keeps GPT2LMHeadModel's state_dict
layout (Conv1D weights stored `in x out`, `transformer.h.N.attn.c_attn.*`, ...), so a checkpoint is a Hugging
Face state dict and `to_hf()` gives back a GPT2LMHeadModel with identical logits: init_from, export and
generate keep working through transformers.

- attention: torch's scaled_dot_product_attention (flash / memory-efficient kernels on GPUs), fused QKV;
- the output layer is the token embedding (tied), its rows padded to a multiple of 64 (faster matmuls; the
  padded logits are cut off before the softmax, so they never change the loss or the logits);
- the loss: `linear_cross_entropy`, a chunked fused output layer + cross-entropy that never holds the whole
  (tokens x vocabulary) logits, in any precision;
- the residual stream in the compute dtype under autocast (`residual_dtype=auto`; `float32` keeps it as
  GPT2LMHeadModel does under autocast);
- optional activation checkpointing per block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

# Hugging Face options this module implements as GPT-2 has them; anything else stays with the HF module.
SUPPORTED = {
    "activation_function": ("gelu_new", "gelu_pytorch_tanh"),
    "scale_attn_weights": (True,),
    "scale_attn_by_inverse_layer_idx": (False,),
    "reorder_and_upcast_attn": (False,),
    "add_cross_attention": (False,),
    "tie_word_embeddings": (True,),
}


def unsupported(config) -> list[str]:
    """Options of a GPT2Config this module does not implement (empty: it computes the same function)."""
    return [f"{k}={getattr(config, k, None)!r}" for k, ok in SUPPORTED.items() if getattr(config, k, ok[0]) not in ok]


def pad64(n: int) -> int:
    return -(-n // 64) * 64


class Conv1D(nn.Module):
    """y = x @ W + b with W stored `in x out`, as GPT-2's original and Hugging Face's checkpoints store it."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.t(), self.bias)


def sdpa_backends(name: str):
    """The scaled_dot_product_attention kernels to allow (None: torch's own choice)."""
    from torch.nn.attention import SDPBackend

    return {
        "auto": None,
        "flash": [SDPBackend.FLASH_ATTENTION],
        "cudnn": [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION],
        "efficient": [SDPBackend.EFFICIENT_ATTENTION],
        "math": [SDPBackend.MATH],
    }[name]


class Attention(nn.Module):
    def __init__(self, d: int, n_head: int, dropout: float, backends=None):
        super().__init__()
        self.n_head, self.dropout, self.backends = n_head, dropout, backends
        self.c_attn = Conv1D(d, 3 * d)  # fused q, k, v
        self.c_proj = Conv1D(d, d)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        if self.backends is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            from torch.nn.attention import sdpa_kernel

            with sdpa_kernel(self.backends):
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(b, t, d)))


class MLP(nn.Module):
    def __init__(self, d: int, dropout: float):
        super().__init__()
        self.c_fc = Conv1D(d, 4 * d)
        self.c_proj = Conv1D(4 * d, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))  # = HF's gelu_new


class Block(nn.Module):
    def __init__(self, d: int, n_head: int, dropout: float, eps: float, backends=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = Attention(d, n_head, dropout, backends)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = MLP(d, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2 language model. `forward(ids)` gives logits; `forward(ids, targets)` gives the mean loss."""

    def __init__(
        self,
        config,
        grad_checkpoint: bool = False,
        ce_chunk: int = 4096,
        attn_backend: str = "auto",
        residual_dtype: str = "auto",
    ):
        super().__init__()
        self.config = config  # a transformers GPT2Config: kept for to_hf() and the model's description
        bad = unsupported(config)
        if bad:
            raise ValueError(f"the compact GPT-2 does not implement {', '.join(bad)}: use --model_impl=hf")
        d, p = config.n_embd, config.resid_pdrop
        self.vocab_size, self.padded_vocab = config.vocab_size, pad64(config.vocab_size)
        self.grad_checkpoint, self.ce_chunk, self.residual_dtype = grad_checkpoint, ce_chunk, residual_dtype
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(self.padded_vocab, d),
                wpe=nn.Embedding(config.n_positions, d),
                drop=nn.Dropout(config.embd_pdrop),
                h=nn.ModuleList(
                    Block(d, config.n_head, p, config.layer_norm_epsilon, sdpa_backends(attn_backend))
                    for _ in range(config.n_layer)
                ),
                ln_f=nn.LayerNorm(d, eps=config.layer_norm_epsilon),
            )
        )
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2's initialisation (as Hugging Face does it): N(0, 0.02), residual projections scaled by
        1/sqrt(2 * layers), zero biases, unit norms."""
        std = self.config.initializer_range
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.normal_(0.0, std / math.sqrt(2 * self.config.n_layer))
            elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.fill_(1.0)
            elif p.dim() >= 2:
                p.normal_(0.0, std)
            else:
                p.zero_()

    # ------------------------------------------------------------------------------------------ forward

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        tr = self.transformer
        pos = torch.arange(ids.size(1), device=ids.device)
        x = tr.drop(tr.wte(ids) + tr.wpe(pos))
        if self.residual_dtype == "auto" and torch.is_autocast_enabled(x.device.type):
            # The residual stream in the compute dtype, as under FSDP's or DeepSpeed's bf16 parameters (layer
            # norms still compute in fp32): on a GPU the step is bound by the bytes the activations move.
            x = x.to(torch.get_autocast_dtype(x.device.type))
        recompute = self.grad_checkpoint and self.training
        for block in tr.h:
            x = checkpoint(block, x, use_reentrant=False) if recompute else block(x)
        return tr.ln_f(x)

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        h = self.hidden(input_ids)
        w = self.transformer.wte.weight
        if targets is None:
            return F.linear(h, w)[..., : self.vocab_size]
        h, targets = h.reshape(-1, h.size(-1)), targets.reshape(-1)
        if self.ce_chunk <= 0:  # plain: the whole logits, softmax in fp32
            return F.cross_entropy(F.linear(h, w)[:, : self.vocab_size].float(), targets)
        return linear_cross_entropy(h, w, targets, self.vocab_size, self.ce_chunk)

    # ------------------------------------------------------------------------------------------ HF format

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Takes this module's own state dict or a GPT2LMHeadModel's (lm_head.weight is the tied embedding;
        the vocabulary rows are padded)."""
        drop = ("lm_head.weight",)
        sd = {k: v for k, v in state_dict.items() if k not in drop and not k.endswith((".attn.bias", ".masked_bias"))}
        wte = sd.get("transformer.wte.weight")
        if wte is not None and wte.size(0) < self.padded_vocab:
            pad = wte.new_zeros(self.padded_vocab - wte.size(0), wte.size(1))
            sd["transformer.wte.weight"] = torch.cat([wte, pad])
        return super().load_state_dict(sd, strict=strict, assign=assign)

    def hf_state_dict(self, state: dict | None = None) -> dict:
        """GPT2LMHeadModel's state dict (fp32, CPU): vocabulary rows unpadded, lm_head tied to wte."""
        state = self.state_dict() if state is None else state
        sd = {k: v.detach().float().cpu() for k, v in state.items()}
        sd["transformer.wte.weight"] = sd["transformer.wte.weight"][: self.vocab_size].clone()
        sd["lm_head.weight"] = sd["transformer.wte.weight"]
        return sd

    def to_hf(self, state: dict | None = None):
        """A transformers GPT2LMHeadModel with this module's weights (or `state`, a state dict of it)."""
        from transformers import GPT2LMHeadModel

        hf = GPT2LMHeadModel(self.config)
        hf.load_state_dict(self.hf_state_dict(state))
        hf.tie_weights()
        return hf.eval()

    @classmethod
    def from_hf(cls, hf, **kwargs) -> GPT2:
        model = cls(hf.config, **kwargs)
        model.load_state_dict(hf.state_dict())
        return model


# ---------------------------------------------------------------------------------------------- loss


def _ce_chunk(logits: torch.Tensor, targets: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of the chunk's losses, d(scale * sum)/d(logits)) for one chunk; softmax in fp32."""
    z = logits.float()
    lse = torch.logsumexp(z, dim=-1)
    loss = (lse - z.gather(1, targets[:, None]).squeeze(1)).sum()
    if torch.compiler.is_compiling():
        # softmax - one_hot(targets), written pointwise so the compiler fuses it into one pass over the chunk
        hit = torch.arange(z.size(1), device=z.device)[None, :] == targets[:, None]
        grad = (torch.exp(z - lse[:, None]) - hit.to(z.dtype)) * scale
    else:  # eager: in place, the one-hot touches one element per row
        grad = z.sub(lse[:, None]).exp_()
        grad[torch.arange(z.size(0), device=z.device), targets] -= 1.0
        grad.mul_(scale)
    return loss, grad.to(logits.dtype)


class _LinearCrossEntropy(torch.autograd.Function):
    """mean(cross_entropy(h @ w[:vocab].T, targets)), computed `chunk` rows at a time. The forward pass also
    computes the gradients of h and w chunk by chunk (the backward pass only scales them), so at most one
    chunk of logits exists at any moment: the same matmul FLOPs as the plain loss, a fraction of its memory."""

    @staticmethod
    def forward(ctx, h, w, targets, vocab: int, chunk: int):
        # Under autocast the matmuls run in its dtype and the logits come out in it; the softmax is fp32.
        n = h.size(0)
        w_used = w[:vocab]
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros(vocab, w.size(1), dtype=torch.float32, device=w.device)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        for s in range(0, n, chunk):
            hs = h[s : s + chunk]
            loss, g = _ce_chunk(hs @ w_used.t(), targets[s : s + chunk], 1.0 / n)
            total += loss
            grad_h[s : s + chunk] = g @ w_used
            grad_w += (g.t() @ hs).float()
        if vocab < w.size(0):
            grad_w = torch.cat([grad_w, grad_w.new_zeros(w.size(0) - vocab, w.size(1))])
        ctx.save_for_backward(grad_h, grad_w.to(w.dtype))
        return total / n

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None


def linear_cross_entropy(
    h: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, vocab: int, chunk: int = 4096
) -> torch.Tensor:
    """Mean cross-entropy of the logits h @ w[:vocab].T (h: tokens x d, w: padded vocab x d)."""
    if torch.is_grad_enabled() and (h.requires_grad or w.requires_grad):
        return _LinearCrossEntropy.apply(h, w, targets, vocab, chunk)
    total = sum(
        F.cross_entropy(F.linear(h[s : s + chunk], w[:vocab]).float(), targets[s : s + chunk], reduction="sum")
        for s in range(0, h.size(0), chunk)
    )
    return total / h.size(0)
