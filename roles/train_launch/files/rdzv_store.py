#!/usr/bin/env python3
"""The rendezvous store of a training job, as a service of its own (train_launch_rdzv_host).

torchrun's c10d rendezvous keeps its state in a TCPStore; by default the agent of node rank 0 hosts it, so losing
that node loses the rendezvous and ends the job even where `min_nodes` would let the others go on. Run here instead,
on a host the inventory names, every agent joins as a client (`--rdzv-conf=is_host=0`) and any training node may be
lost. Runs until stopped (SIGTERM: the launch stops it with the job); prints one line once it listens.

  rdzv_store.py --port P [--timeout S]
"""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import timedelta


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a client's request may wait")
    args = ap.parse_args()
    from torch.distributed import TCPStore

    # multi_tenant: the agents (clients) of every restart round share it, as torchrun's own store is shared.
    store = TCPStore(
        "0.0.0.0", args.port, is_master=True, multi_tenant=True, wait_for_workers=False,
        timeout=timedelta(seconds=args.timeout),
    )  # fmt: skip
    print(f"rendezvous store listening on port {args.port}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    del store
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main())
