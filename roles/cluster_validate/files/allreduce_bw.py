#!/usr/bin/env python3
"""All-reduce bus bandwidth over a size sweep, every node at once (torch.distributed; gloo on CPU, NCCL on GPU).

  allreduce_bw.py --rank R --world N --master ADDR --port P --ifname IF --sizes 1048576,16777216 [--iters 5]

Rank 0 hosts the store. Each size: warm-up, then `iters` timed all-reduces of float32 tensors;
algbw = bytes / time, busbw = algbw x 2(n-1)/n (the nccl-tests definition). The result is also checked
(every rank contributes rank+1, so each element must equal n(n+1)/2). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ifname", required=True)
    ap.add_argument("--sizes", default="1048576,8388608,33554432", help="bytes, comma-separated")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    args = ap.parse_args()
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    os.environ.setdefault("NCCL_SOCKET_IFNAME", args.ifname)

    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    try:
        store = dist.TCPStore(
            args.master, args.port, args.world, is_master=args.rank == 0, timeout=timedelta(seconds=args.timeout)
        )
        dist.init_process_group(
            backend, store=store, rank=args.rank, world_size=args.world, timeout=timedelta(seconds=args.timeout)
        )
        n = args.world
        expected = n * (n + 1) / 2
        results = []
        for size in (int(s) for s in args.sizes.split(",") if s):
            tensor = torch.empty(max(1, size // 4), dtype=torch.float32, device=device)
            for _ in range(args.warmup):
                dist.all_reduce(tensor.fill_(1.0))
            tensor.fill_(float(args.rank + 1))
            dist.barrier()
            if backend == "nccl":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for i in range(args.iters):
                if i:
                    tensor.fill_(float(args.rank + 1))
                dist.all_reduce(tensor)
            if backend == "nccl":
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - start) / args.iters
            correct = bool(torch.all(tensor == expected).item())
            algbw = tensor.numel() * 4 * 8 / seconds / 1e9
            results.append(
                {
                    "bytes": tensor.numel() * 4,
                    "seconds": round(seconds, 6),
                    "algbw_gbps": round(algbw, 3),
                    "busbw_gbps": round(algbw * 2 * (n - 1) / n, 3),
                    "correct": correct,
                }
            )
        dist.destroy_process_group()
    except Exception as exc:  # reported with the rank, the controller names the host
        print(json.dumps({"ok": False, "rank": args.rank, "error": f"{type(exc).__name__}: {exc}"[:500]}))
        return 0
    out = {"ok": True, "rank": args.rank, "world": args.world, "backend": backend}
    if args.rank == 0:
        out["results"] = results
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
