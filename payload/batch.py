"""`batch_size=auto`: the micro-batch per rank, picked from the device's memory.

On a GPU, a short probe before the engine starts: the model's own forward and backward, eager, on random tokens
of the run's block size, at micro-batches 1, 2, 4, ... while each one's peak memory (plus the optimizer state the
probe does not allocate) stays within HEADROOM of what the device has; it stops before a batch whose peak,
extrapolated from the last two, would not fit, so it never has to run out of memory to find the limit (it copes
if it does). Powers of two: the batch shapes cuBLAS and the attention kernels handle best. The compiled step's
peak is not the eager one's: on an H200 (docs/benchmarks.md) the compact GPT-2's compiled run peaked 9-15 % above
its probe, the Llama 1B's under FSDP2 24 % below; HEADROOM leaves room for the first.

On a CPU memory does not limit a step, time does: auto is CPU_BATCH. Every rank probes its own device and the
run takes the smallest pick, so all ranks step with the same micro-batch. A resumed run keeps its batch.
"""

from __future__ import annotations

from collections.abc import Callable

CPU_BATCH = 4  # the micro-batch on CPUs (the payload's fixed default before auto)
# Share of the device memory the probed (eager) step may take: the rest covers a compiled step that peaks higher
# (+15 % measured, compact GPT-2 at 128 on an H200: 46.2 GiB probed, 53.1 GiB trained), NCCL's buffers and the
# allocator's fragmentation over a long run.
HEADROOM = 0.8
MAX_BATCH = 1024  # the doubling stops here (a micro-batch of 1024 sequences is never the limit worth finding)
GIB = 1 << 30


def optimizer_bytes(n_params: int, world_size: int, ddp: bool, ema: bool) -> int:
    """Memory a training step holds that a bare forward+backward does not: AdamW's two fp32 moments (8 bytes a
    parameter), DDP's gradient buckets where gradients are all-reduced (4), an EMA copy of the weights (4).
    Counted for the whole model also where FSDP or ZeRO shard it (a safe overestimate)."""
    per_param = 8 + (4 if ddp and world_size > 1 else 0) + (4 if ema else 0)
    return n_params * per_param


def data_cap(train_blocks: int, val_blocks: int, world_size: int) -> int:
    """The largest micro-batch the corpus gives every rank: at least one training batch per epoch and one
    validation batch (val_blocks 0: validation has its own corpus, checked against its own blocks)."""
    cap = train_blocks // world_size
    if val_blocks:
        cap = min(cap, val_blocks // world_size)
    return max(cap, 0)


def largest_fit(peak: Callable[[int], int | None], budget: int, cap: int) -> tuple[int, list[tuple[int, int | None]]]:
    """The largest power-of-two micro-batch b <= cap with peak(b) <= budget, and what was measured.

    peak(b): bytes the step takes at micro-batch b, None where it ran out of memory. Doubling from 1, it stops at
    the first batch over budget, or before one whose peak extrapolated linearly from the last two measured would
    be (activations grow linearly with the batch; the weights, gradients and optimizer state do not). 0: not even
    a batch of 1 fits."""
    best, tried, b, last = 0, [], 1, None
    while b <= min(cap, MAX_BATCH):
        used = peak(b)
        tried.append((b, used))
        if used is None or used > budget:
            break
        best = b
        # per-sample growth from b/2 to b, times the b more samples of the next batch
        if last is not None and used + 2 * (used - last) > budget:
            break
        last, b = used, b * 2
    return best, tried


def describe(batch: int, tried: list[tuple[int, int | None]], budget: int, total: int) -> str:
    """One log line: the pick and the measurements behind it."""
    seen = ", ".join(f"{b}: {'out of memory' if used is None else f'{used / GIB:.1f}'}" for b, used in tried)
    return (
        f"batch_size auto: {batch} (eager step peak GiB by micro-batch {seen}; budget {budget / GIB:.1f} GiB = "
        f"{HEADROOM:.0%} of {total / GIB:.1f} GiB available)"
    )


def step_peak(model, batch: int, block_size: int, vocab: int, device, bf16: bool, fast: bool, extra: int):
    """Peak bytes of one eager forward+backward of `model` at this micro-batch on a CUDA device, plus `extra`;
    None if it ran out of memory. Random tokens from a generator of its own and torch's RNG state restored:
    the run's initialisation and dropout streams are the same as without the probe."""
    import contextlib

    import torch

    from .model import model_loss

    gen = torch.Generator(device=device).manual_seed(batch)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    with torch.random.fork_rng(devices=[device]):
        try:
            x = torch.randint(vocab, (batch, block_size), device=device, generator=gen)
            with autocast:
                loss = model_loss(model, x, x, fast)
            loss.backward()
            torch.cuda.synchronize(device)
            used = torch.cuda.max_memory_allocated(device) + extra
        except torch.cuda.OutOfMemoryError:
            used = None
        finally:
            loss = x = None
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    return used


def cuda_budget(device) -> tuple[int, int]:
    """(budget, available): HEADROOM of the memory this process can have on the device, counting what its
    allocator already holds (the model's weights) as available."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    available = free + torch.cuda.memory_reserved(device)
    return int(available * HEADROOM), available


def auto(cfg, model, d, data, n_params: int, bf16: bool, saved: int, log: Callable[[str], None]) -> int:
    """batch_size=auto on every rank together: a resumed run's own batch (`saved`, payload/checkpoint.py
    saved_batch); else CPU_BATCH on CPUs, the probe on GPUs (every rank probes its own device, all take the
    smallest pick). `d` is payload/runtime.py Dist, `data` payload/data.py RunData (the corpus caps the batch)."""
    import torch
    import torch.distributed as dist

    from .model import is_fast
    from .runtime import RunError

    saved = int(d.all_reduce([saved], dist.ReduceOp.MIN, d.setup)[0])
    if saved:
        log(f"batch_size auto: {saved}, the batch of the run this launch resumes")
        return saved
    if d.device.type != "cuda":
        log(f"batch_size auto: {CPU_BATCH} (a CPU: memory does not limit the step)")
        return CPU_BATCH
    train_blocks, held_out = data.auto_batch_blocks()
    cap = data_cap(MAX_BATCH * d.world_size if train_blocks is None else train_blocks, held_out, d.world_size)
    extra = optimizer_bytes(n_params, d.world_size, cfg.engine == "ddp", cfg.ema_decay > 0)
    try:
        model.to(d.device)
    except torch.cuda.OutOfMemoryError as e:
        raise RunError("batch_size=auto: the model does not fit one GPU to probe; give --batch_size", 2) from e
    budget, available = cuda_budget(d.device)
    vocab = len(data.tok)

    def peak(b: int) -> int | None:
        return step_peak(model, b, cfg.block_size, vocab, d.device, bf16, is_fast(model), extra)

    batch, tried = largest_fit(peak, budget, cap)
    torch.cuda.reset_peak_memory_stats(d.device)  # result.json's peak is the training's, not the probe's
    print(f"rank {d.rank}: " + describe(batch, tried, budget, available), flush=True)
    batch = int(d.all_reduce([batch], dist.ReduceOp.MIN, d.setup)[0])
    if not batch:
        raise RunError(
            "batch_size=auto: not even a micro-batch of 1 fits the GPU's memory on some rank (its line above): "
            "try --grad_checkpoint=true, --engine=fsdp over more GPUs or a smaller --block_size",
            2,
        )
    log(f"batch_size auto: {batch} on every rank")
    return batch
