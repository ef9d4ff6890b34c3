#!/usr/bin/env python3
"""Pre-flight for a training launch: every node joins a store on node 0, then one gloo all-reduce.

Run on every node at once with the training venv's python. Node 0 hosts the store and names the nodes
that did not join within --timeout, so a launch fails in seconds with a host name instead of hanging.

  allreduce_check.py --hosts h0,h1 --rank R --master ADDR --port P --ifname IF --timeout S
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
    ap.add_argument("--hosts", required=True, help="comma-separated host names in node-rank order")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ifname", required=True, help="fabric interface for gloo")
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    hosts = args.hosts.split(",")
    world, me = len(hosts), hosts[args.rank]
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname

    import torch
    import torch.distributed as dist

    t0 = time.monotonic()
    timeout = timedelta(seconds=args.timeout)
    try:
        store = dist.TCPStore(
            args.master, args.port, world, is_master=args.rank == 0, timeout=timeout, wait_for_workers=False
        )
    except Exception as exc:  # any failure to reach node 0 is reported the same way
        print(
            json.dumps(
                {
                    "ok": False,
                    "host": me,
                    "error": f"{me} could not reach node 0 ({hosts[0]}) at {args.master}:{args.port}: {exc}",
                }
            )
        )
        return 2
    store.set(f"joined/{args.rank}", me)
    if args.rank == 0:
        while time.monotonic() - t0 < args.timeout:
            missing = [h for r, h in enumerate(hosts) if not store.check([f"joined/{r}"])]
            if not missing:
                break
            time.sleep(0.2)
        if missing:
            store.set("abort", ",".join(missing))
            print(
                json.dumps(
                    {
                        "ok": False,
                        "host": me,
                        "missing": missing,
                        "error": f"did not join within {args.timeout:.0f} s: {', '.join(missing)}",
                    }
                )
            )
            return 3
    try:
        dist.init_process_group("gloo", store=store, rank=args.rank, world_size=world, timeout=timeout)
        value = torch.ones(1024) * (args.rank + 1)
        dist.all_reduce(value)
        expected = world * (world + 1) / 2
        wrong = (value != expected).nonzero().flatten().tolist()  # every element is checked, the first named
        ok = not wrong
        dist.destroy_process_group()
    except Exception as exc:  # reported with the host name
        aborted = store.check(["abort"]) and store.get("abort").decode()
        print(
            json.dumps(
                {
                    "ok": False,
                    "host": me,
                    "error": f"all-reduce failed on {me}: {exc}" + (f" (did not join: {aborted})" if aborted else ""),
                }
            )
        )
        return 4
    print(
        json.dumps(
            {
                "ok": ok,
                "host": me,
                "world_size": world,
                "seconds": round(time.monotonic() - t0, 2),
                "error": None
                if ok
                else f"all-reduce on {me} gave {value[wrong[0]].item()} at element {wrong[0]} "
                f"({len(wrong)} of {value.numel()} wrong), expected {expected}",
            }
        )
    )
    return 0 if ok else 5


if __name__ == "__main__":
    sys.exit(main())
