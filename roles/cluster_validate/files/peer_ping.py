#!/usr/bin/env python3
"""Ping every peer's fabric address at once (optionally don't-fragment at a given size). Stdlib + iputils ping.

  peer_ping.py --peers name=addr,name=addr [--size BYTES --df] [--count 3]

Prints {"pings": [{"peer", "address", "ok", "detail"}]}: `ok` when every probe came back.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import subprocess


def ping(name: str, address: str, size: int | None, df: bool, count: int) -> dict:
    cmd = ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2"]
    if size is not None:
        cmd += ["-s", str(size)]
    if df:
        cmd += ["-M", "do"]
    proc = subprocess.run([*cmd, address], capture_output=True, text=True, timeout=30, check=False)
    out = proc.stdout + proc.stderr
    stats = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    sent, got = (int(stats.group(1)), int(stats.group(2))) if stats else (count, 0)
    rtt = re.search(r"= [\d.]+/([\d.]+)/", out)
    too_big = re.search(r"(message too long|frag needed|mtu\s*=\s*\d+)", out, re.I)
    detail = f"{got}/{sent} replies" + (f", avg {rtt.group(1)} ms" if rtt else "")
    if too_big:
        detail += f" ({too_big.group(0)})"
    elif proc.returncode not in (0, 1):
        detail += f" ({out.strip().splitlines()[-1] if out.strip() else 'ping rc ' + str(proc.returncode)})"
    return {"peer": name, "address": address, "ok": proc.returncode == 0 and got == sent, "detail": detail}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", required=True, help="name=address,... ")
    ap.add_argument("--size", type=int, help="ICMP payload bytes (MTU - 28 for IPv4)")
    ap.add_argument("--df", action="store_true", help="set don't-fragment (path MTU probe)")
    ap.add_argument("--count", type=int, default=3)
    args = ap.parse_args()
    peers = [p.split("=", 1) for p in args.peers.split(",") if p]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(peers))) as pool:
        results = list(pool.map(lambda p: ping(p[0], p[1], args.size, args.df, args.count), peers))
    out = {"pings": results}
    if args.size is not None:
        out["mtu"] = args.size + 28  # the IPv4 packet size the probes carried
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
