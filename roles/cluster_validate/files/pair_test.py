#!/usr/bin/env python3
"""One end of a pairwise link test: iperf3 (TCP) or perftest (ib_write_bw, ib_write_lat). Stdlib only.

  pair_test.py server --tool iperf3 --port P --seconds S [--device D --gid-index G]
  pair_test.py client --tool iperf3 --peer ADDR --port P --seconds S [--device D --gid-index G]

The server serves one test and exits (iperf3 -1; perftest servers do by default), bounded by a timeout.
The client retries while the server is not listening yet. Prints {"tool", "rc", "output"}: the raw output
is parsed on the controller (cluster_validate filters).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

NOT_READY = ("Connection refused", "Couldn't connect", "unable to connect", "Failed to connect")


def command(args) -> list[str]:
    if args.tool == "iperf3":
        if args.mode == "server":
            return ["iperf3", "-s", "-1", "-p", str(args.port)]
        return [
            "iperf3",
            "-c",
            args.peer,
            "-p",
            str(args.port),
            "-t",
            str(args.seconds),
            "-J",
            "--connect-timeout",
            "2000",
        ]
    cmd = [args.tool, "-d", args.device, "-p", str(args.port), "-F"]
    if args.gid_index is not None:
        cmd += ["-x", str(args.gid_index)]
    if args.tool.endswith("_bw"):
        cmd += ["-D", str(args.seconds)]
    else:
        cmd += ["-n", "1000"]
    return [*cmd, args.peer] if args.mode == "client" else cmd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["server", "client"])
    ap.add_argument("--tool", choices=["iperf3", "ib_write_bw", "ib_write_lat"], required=True)
    ap.add_argument("--peer")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--device")
    ap.add_argument("--gid-index", type=int)
    ap.add_argument("--wait", type=float, default=20.0, help="client: how long to retry a server not yet listening")
    args = ap.parse_args()
    limit = args.seconds + args.wait + 30
    deadline = time.monotonic() + args.wait
    while True:
        try:
            proc = subprocess.run(command(args), capture_output=True, text=True, timeout=limit, check=False)
            rc, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, output = 124, f"{args.tool} did not finish within {limit:.0f} s: {exc}"
        except FileNotFoundError:
            rc, output = 127, f"{args.tool} is not installed"
        if args.mode == "server" or rc == 0 or time.monotonic() > deadline or not any(s in output for s in NOT_READY):
            break
        time.sleep(0.3)
    print(json.dumps({"tool": args.tool, "mode": args.mode, "rc": rc, "output": output[-20000:]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
