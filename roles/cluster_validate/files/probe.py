#!/usr/bin/env python3
"""The validation ladder's node-side probes, one file copied once to every node. Stdlib only (allreduce: torch).
The node's own checks (node_health, nic_counters) are rdma-node-check's: module rdma_llm.cluster.node_check.

  probe.py ping --targets JSON [--df]                      every peer on every rail at once (path MTU with --df)
  probe.py pair server|client --tool T --rails JSON ...    one end of a pair test on every rail: iperf3, perftest
  probe.py allreduce --rank R --world N --master A ...     collectives' busbw over a size sweep, bisected when slow
                                                           (the venv's python)
  probe.py nccl_tests --gpus G ...                         nccl-tests' binaries on the node's GPUs, where installed

Each prints one JSON object; every decision is made on the controller (cluster_validate filters), but for the
way a bisection goes (against the floor the controller passed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

# ------------------------------------------------------------------------------------------- ping


def ping(target: dict, df: bool, count: int) -> dict:
    """One target: {"peer" (its label), "address", "source" (this node's address on that rail), "size"}."""
    name, address, size = target["peer"], target["address"], target.get("size")
    cmd = ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2"]
    if target.get("source"):
        cmd += ["-I", target["source"]]
    if size is not None:
        cmd += ["-s", str(size)]
    if df:
        cmd += ["-M", "do"]
    out = {"peer": name, "address": address}
    if size is not None:
        out["mtu"] = size + 28  # the IPv4 packet size the probe carried
    try:
        proc = subprocess.run([*cmd, address], capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        return out | {"ok": False, "detail": "ping is not installed (iputils-ping)"}
    text = proc.stdout + proc.stderr
    stats = re.search(r"(\d+) packets transmitted, (\d+) received", text)
    sent, got = (int(stats.group(1)), int(stats.group(2))) if stats else (count, 0)
    rtt = re.search(r"= [\d.]+/([\d.]+)/", text)
    too_big = re.search(r"(message too long|frag needed|mtu\s*=\s*\d+)", text, re.I)
    detail = f"{got}/{sent} replies" + (f", avg {rtt.group(1)} ms" if rtt else "")
    if too_big:
        detail += f" ({too_big.group(0)})"
    elif proc.returncode not in (0, 1):
        detail += f" ({text.strip().splitlines()[-1] if text.strip() else 'ping rc ' + str(proc.returncode)})"
    return out | {"ok": proc.returncode == 0 and got == sent, "detail": detail}


def ping_peers(args) -> dict:
    targets = json.loads(args.targets)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        return {"pings": list(pool.map(lambda t: ping(t, args.df, args.count), targets))}


# ------------------------------------------------------------------------------------------- pair
# One end of a pair test on every rail at once (one tool process per rail, port + rail index), as training
# drives them. The server serves one test and exits (iperf3 -1; perftest servers do by default), bounded by a
# timeout. The client retries while the server is not listening yet. The raw output is parsed on the controller.

NOT_READY = ("Connection refused", "Couldn't connect", "unable to connect", "Failed to connect")
# iperf3 gives up on a link that stops moving data (a throttled or flapping rail) instead of waiting 120 s.
IPERF3_STALL_MS = "10000"


def command(args, rail: dict, port: int) -> list[str]:
    """The tool's command line for one rail: {"name", "peer" (client), "local" (the rail's own address),
    "device", "ib_port", "gid_index", "tclass" | "sl" (perftest)}."""
    if args.tool == "iperf3":
        bind = ["-B", rail["local"]] if rail.get("local") else []
        if args.mode == "server":
            return ["iperf3", "-s", "-1", "-p", str(port), *bind, "--rcv-timeout", IPERF3_STALL_MS]
        return [
            "iperf3",
            "-c",
            rail["peer"],
            "-p",
            str(port),
            *bind,
            "-t",
            str(args.seconds),
            "-J",
            "--connect-timeout",
            "2000",
            "--snd-timeout",
            IPERF3_STALL_MS,
        ]
    cmd = [args.tool, "-d", rail["device"], "-p", str(port), "-F"]
    if rail.get("ib_port") is not None:
        cmd += ["-i", str(rail["ib_port"])]
    if rail.get("gid_index") is not None:
        cmd += ["-x", str(rail["gid_index"])]
    # The lossless class's traffic: perftest's --tclass sets the GRH traffic class, the ToS of RoCE v2 packets
    # (-T/--tos acts only with -R, rdma_cm); --sl the InfiniBand service level (perftest_parameters.c, usage()).
    if rail.get("tclass") is not None:
        cmd += [f"--tclass={rail['tclass']}"]
    if rail.get("sl") is not None:
        cmd += [f"--sl={rail['sl']}"]
    if args.tool.endswith("_bw"):
        cmd += ["-D", str(args.seconds)]
    else:
        cmd += ["-n", "1000"]
    return [*cmd, rail["peer"]] if args.mode == "client" else cmd


def pair_rail(args, rail: dict, port: int) -> dict:
    limit = args.seconds + args.wait + 30
    deadline = time.monotonic() + args.wait
    while True:
        try:
            proc = subprocess.run(command(args, rail, port), capture_output=True, text=True, timeout=limit, check=False)
            rc, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc, output = 124, f"{args.tool} did not finish within {limit:.0f} s: {exc}"
        except FileNotFoundError:
            rc, output = 127, f"{args.tool} is not installed"
        # Not rc alone: iperf3 3.12 with -J exits 0 when the connection was refused.
        if args.mode == "server" or time.monotonic() > deadline or not any(s in output for s in NOT_READY):
            break
        time.sleep(0.3)
    return {"rail": rail.get("name"), "rc": rc, "output": output[-20000:]}


def pair_test(args) -> dict:
    rails = json.loads(args.rails)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(rails))) as pool:
        results = list(pool.map(lambda ir: pair_rail(args, ir[1], args.port + ir[0]), enumerate(rails)))
    return {"tool": args.tool, "mode": args.mode, "rails": results}


# ------------------------------------------------------------------------------------------- allreduce


# NCCL's own account of the transport it chose, for the controller to judge: the network (IB or Socket), the
# devices, GPUDirect RDMA per HCA and GPU, and every channel's path (`via NET/IB/0/GDRDMA`).
NCCL_LINE = re.compile(
    r"NCCL version|Using network|NET/\S+ ?: (?:Using|No device)|GPU Direct RDMA|DMA-BUF|\bvia NET/|NCCL WARN",
)


def nccl_env(args) -> dict:
    """The job's NCCL settings (rdma_stack_nccl_env on the controller: the HCA and GID index the launch uses,
    the QoS fact's NCCL_IB_TC and NCCL_IB_QPS_PER_CONNECTION) from `--env`. The debug log goes to a file: NCCL logs
    to stdout, which carries this probe's JSON."""
    return dict(kv.split("=", 1) for kv in args.env or [])


def nccl_log(directory: Path, limit: int = 400) -> list[str]:
    lines = []
    for path in sorted(directory.glob("nccl.*")):
        lines += [line.rstrip() for line in path.read_text(errors="replace").splitlines() if NCCL_LINE.search(line)]
    return lines[:limit]


def allreduce_expected(world: int) -> float:
    """Every element of the sum when rank r contributes r + 1: 1 + 2 + ... + n."""
    return world * (world + 1) / 2


# nccl-tests' bus bandwidth (doc/PERFORMANCE.md): busbw = algbw x this factor of the rank count, so that every
# collective's busbw compares with the links' speed whatever the count. Size is nccl-tests' too: the larger buffer
# (all-gather's output, reduce-scatter's input).
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def chunk_values(name: str, rank: int, n: int) -> tuple[list[float], list[float]]:
    """What rank `rank` of `n` sends (one value per chunk of its input) and must receive (per chunk of its output).
    Every chunk carries a value its sender and place fix, so a chunk delivered to the wrong place or rank is seen:
    all-reduce r+1 (sum n(n+1)/2); all-gather r+1 (chunk j holds j+1); reduce-scatter chunk j holds r+1+j (rank j
    gets n(n+1)/2 + n*j); all-to-all chunk j holds r*n+j (chunk i of rank j's output holds i*n+j)."""
    if name == "all_reduce":
        return [rank + 1.0], [allreduce_expected(n)]
    if name == "all_gather":
        return [rank + 1.0], [j + 1.0 for j in range(n)]
    if name == "reduce_scatter":
        return [rank + 1.0 + j for j in range(n)], [allreduce_expected(n) + n * rank]
    if name == "all_to_all":
        return [rank * n + j + 0.0 for j in range(n)], [i * n + rank + 0.0 for i in range(n)]
    raise ValueError(f"unknown collective {name}")


def measure(dist, torch, name: str, size: int, group, rank: int, n: int, iters: int, warmup: int, device) -> dict:
    """`iters` timed calls of one collective over `group` (this rank is `rank` of its `n`), after `warmup` ones.
    Returns the nccl-tests numbers and whether this rank's output was right."""
    per = max(1, size // 4 // n)  # float32 elements per chunk; the larger buffer holds n chunks
    send_vals, want_vals = chunk_values(name, rank, n)

    def filled(values):
        return torch.cat([torch.full((per,), v, dtype=torch.float32, device=device) for v in values])

    send, want = filled(send_vals), filled(want_vals)
    if name == "all_reduce":  # in place over the full size: each call starts again from the rank's values
        send, want = torch.cat([send] * n), torch.cat([want] * n)
        out = torch.empty_like(send)

        def call():
            out.copy_(send)
            dist.all_reduce(out, group=group)

    elif name == "all_gather":
        out = torch.empty(per * n, dtype=torch.float32, device=device)

        def call():
            dist.all_gather_into_tensor(out, send, group=group)
    elif name == "reduce_scatter":
        out = torch.empty(per, dtype=torch.float32, device=device)

        def call():
            dist.reduce_scatter_tensor(out, send, group=group)
    else:
        out = torch.empty(per * n, dtype=torch.float32, device=device)

        def call():
            dist.all_to_all_single(out, send, group=group)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        call()
    dist.barrier(group=group)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    seconds = (time.perf_counter() - start) / iters
    nbytes = per * n * 4
    algbw = nbytes * 8 / seconds / 1e9
    return {
        "bytes": nbytes,
        "seconds": round(seconds, 6),
        "algbw_gbps": round(algbw, 3),
        "busbw_gbps": round(algbw * BUS_FACTOR[name](n), 3),
        "correct": bool(torch.equal(out, want)),
    }


# --------------------------------------------------------------------------------- bisection
# When a collective over every node is below its floor, the nodes are halved and each half runs it alone (both
# halves at once, each its own process group): the slow half holds the slow node, and so on — NVIDIA's cluster
# readiness engine isolates one bad node in log2(N) such rounds. A half of one node borrows a node from outside
# the suspects (presumed good: one slow node assumed), so the last round is node + known-good pairs. Which way the
# bisection goes is the one decision taken on the node, against the floor the controller computed and passed;
# the controller judges every measured number again.


def bisect_halves(world: int, suspects: list[int]) -> list[tuple[list[int], list[int] | None]]:
    """The suspects in two halves, each with the group that tests it (None: a half of one node with nobody
    outside the suspects to pair it with)."""
    half = (len(suspects) + 1) // 2
    helpers = [r for r in range(world) if r not in suspects]
    halves = []
    for part in (suspects[:half], suspects[half:]):
        if len(part) >= 2:
            halves.append((part, part))
        elif part and helpers:
            halves.append((part, sorted([*part, helpers.pop(0)])))
        elif part:
            halves.append((part, None))
    return halves


def bisect_next(halves: list[tuple[list[int], list[int] | None]], slow: list[bool | None]) -> tuple[list[int], str]:
    """The next suspects from one round (slow: per half, True/False, None where untested), and why the bisection
    stops there ("" while it goes on)."""
    (a, _), (b, _) = halves
    sa, sb = slow
    if sa and sb:
        return a + b, "both halves are slow alone: more than one slow node"
    if sa is False and sb is False:
        return a + b, "each half is fast alone: slow only all together (the fabric between them, not a node)"
    if sa or sb is False:
        return a, ""
    return b, ""


def bisect(world: int, run_round, floor: float) -> dict:
    """Bisect the ranks until one is left or a round cannot tell. run_round(groups) -> busbw (Gb/s) per group,
    each group's collective run at once. Returns {"suspects" (ranks), "rounds", "reason"}."""
    suspects, rounds, reason = list(range(world)), [], ""
    while len(suspects) > 1 and not reason:
        halves = bisect_halves(world, suspects)
        groups = [g for _, g in halves if g]
        if not groups:
            reason = "too few nodes to halve"
            break
        busbw = dict(zip(map(tuple, groups), run_round(groups), strict=True))
        slow = [None if g is None else busbw[tuple(g)] < floor for _, g in halves]
        rounds.append(
            [
                {"group": g, "busbw_gbps": busbw[tuple(g)], "slow": s}
                for (_, g), s in zip(halves, slow, strict=True)
                if g
            ]
        )
        suspects, reason = bisect_next(halves, slow)
    return {"suspects": suspects, "rounds": rounds, "reason": reason}


# ------------------------------------------------------------------------------------------- collectives


def collectives(args) -> dict:
    """Rank 0 hosts the store. Each collective of `--collectives`, each size of the sweep (`--gpu-sizes` on NCCL):
    warm-up, then `iters` timed calls on float32 tensors, busbw by nccl-tests' factors. Every rank checks its own
    output (`chunk_values`) and returns the sizes where it was wrong (`wrong`, per collective); rank 0 returns the
    sweeps (`collectives`, each a list of sizes). A collective whose largest size is below its `--floor`
    is bisected over the nodes at that size (`bisection`). On NCCL, every rank returns the lines of NCCL's debug
    log that say which transport it used."""
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "=" + args.ifname)  # exact name (NCCL matches a prefix otherwise)

    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    logdir = Path(tempfile.mkdtemp(prefix="validate-nccl-")) if backend == "nccl" else None
    if logdir:  # NCCL reads its environment when the process group starts
        torch.cuda.set_device(device)
        os.environ.update(nccl_env(args))
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=str(logdir / "nccl.%h.%p"))
    names = [c for c in args.collectives.split(",") if c]
    floors = dict((k, float(v)) for k, v in (f.split("=", 1) for f in args.floor or []))
    sizes = [int(s) for s in ((args.gpu_sizes if backend == "nccl" and args.gpu_sizes else args.sizes).split(",")) if s]
    out = {"ok": True, "rank": args.rank, "world": args.world, "backend": backend}
    try:
        store = dist.TCPStore(
            args.master, args.port, args.world, is_master=args.rank == 0, timeout=timedelta(seconds=args.timeout)
        )
        dist.init_process_group(
            backend, store=store, rank=args.rank, world_size=args.world, timeout=timedelta(seconds=args.timeout)
        )
        n, world = args.world, dist.group.WORLD
        sweeps, wrong = {}, {}
        for name in names:
            sweeps[name] = []
            for size in sizes:
                result = measure(dist, torch, name, size, world, args.rank, n, args.iters, args.warmup, device)
                sweeps[name].append(result)
                if not result["correct"]:
                    wrong.setdefault(name, []).append(result["bytes"])
        # Rank 0's timing decides for every rank: all must take the same branch.
        slow = [None]
        if args.rank == 0:
            slow = [next((c for c in names if c in floors and sweeps[c][-1]["busbw_gbps"] < floors[c]), None)]
        dist.broadcast_object_list(slow, src=0)
        if slow[0] and n > 1:
            out["bisection"] = dict(
                collective=slow[0],
                bytes=sizes[-1],
                floor_gbps=floors[slow[0]],
                **bisect(n, lambda groups: bisect_round(dist, torch, args, slow[0], sizes[-1], groups, device),
                         floors[slow[0]]),
            )  # fmt: skip
        dist.destroy_process_group()
        out["wrong"] = wrong
        if args.rank == 0:
            out["collectives"] = sweeps
    except Exception as exc:  # reported with the rank, the controller names the host
        out = {"ok": False, "rank": args.rank, "error": f"{type(exc).__name__}: {exc}"[:500]}
    finally:
        if logdir:  # with the HCA NCCL was given: then a fall-back to sockets is a failure
            out["nccl_log"] = nccl_log(logdir)
            out["nccl_ib_hca"] = os.environ.get("NCCL_IB_HCA")
            shutil.rmtree(logdir, ignore_errors=True)
    return out


def bisect_round(dist, torch, args, name: str, size: int, groups: list[list[int]], device) -> list[float]:
    """One bisection round: every rank creates every group (torch.distributed's rule), the members of each run
    the collective at once, and every rank learns each group's busbw (its first rank's timing)."""
    handles = [dist.new_group(g) for g in groups]
    mine = None
    for g, handle in zip(groups, handles, strict=True):
        if args.rank in g:
            result = measure(
                dist, torch, name, size, handle, g.index(args.rank), len(g), args.iters, max(1, args.warmup), device
            )
            mine = [g, result["busbw_gbps"]] if g.index(args.rank) == 0 else None
    every = [None] * args.world
    dist.all_gather_object(every, mine)
    busbw = {tuple(e[0]): e[1] for e in every if e}
    return [busbw[tuple(g)] for g in groups]


# ------------------------------------------------------------------------------------------- nccl-tests

# nccl-tests' binary of each collective (its build/ names).
NCCL_TESTS = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "all_to_all": "alltoall_perf",
}


def nccl_tests(args) -> dict:
    """nccl-tests' own binaries on this node's GPUs (`-g <gpus>`: one process, every GPU; NVLink or PCIe), where
    they are installed: their output as printed, per collective, for the controller to parse. Across nodes they
    need MPI, which the ladder does not assume: the collectives rung measures the fabric."""
    if args.gpus < 2:
        return {"ok": True, "skipped": f"{args.gpus} GPU(s) on the node: nothing between GPUs to measure"}
    found = {}
    for name in (c for c in args.collectives.split(",") if c):
        binary = NCCL_TESTS[name]
        path = os.path.join(args.bin_dir, binary) if args.bin_dir else None
        path = path if path and os.access(path, os.X_OK) else shutil.which(binary)
        if path:
            found[name] = path
    if not found:
        where = f"{args.bin_dir} nor PATH" if args.bin_dir else "PATH"
        return {"ok": True, "skipped": f"nccl-tests not installed (no all_reduce_perf … in {where})"}
    out = {"ok": True, "gpus": args.gpus, "outputs": {}}
    for name, path in found.items():
        argv = [path, "-b", args.min_bytes, "-e", args.max_bytes, "-f", "2", "-g", str(args.gpus)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
            out["outputs"][name] = {
                "rc": proc.returncode,
                "stdout": proc.stdout[-20000:],
                "stderr": proc.stderr[-2000:],
            }
        except subprocess.TimeoutExpired:
            out["outputs"][name] = {"rc": 124, "stdout": "", "stderr": f"{path} ran past {args.timeout:.0f} s"}
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="probe", required=True)
    ping_ap = sub.add_parser("ping", help="ping every peer's fabric address on every rail at once")
    ping_ap.add_argument(
        "--targets", required=True, help='JSON list: {"peer", "address", "source", "size" (ICMP payload bytes)}'
    )
    ping_ap.add_argument("--df", action="store_true", help="set don't-fragment (path MTU probe)")
    ping_ap.add_argument("--count", type=int, default=3)
    ping_ap.set_defaults(run=ping_peers)
    pair_ap = sub.add_parser("pair", help="one end of a pairwise link test")
    pair_ap.add_argument("mode", choices=["server", "client"])
    pair_ap.add_argument("--tool", choices=["iperf3", "ib_write_bw", "ib_write_lat"], required=True)
    pair_ap.add_argument("--port", type=int, required=True, help="the first rail's port; rail i uses port + i")
    pair_ap.add_argument("--seconds", type=int, default=3)
    pair_ap.add_argument(
        "--rails",
        required=True,
        help='JSON list, one per rail: {"name", "peer" (client), "local", "device", "ib_port", "gid_index", "tclass"'
        ', "sl"}',
    )
    pair_ap.add_argument("--wait", type=float, default=20.0, help="client: how long to retry a server not yet up")
    pair_ap.set_defaults(run=pair_test)
    ar_ap = sub.add_parser("allreduce", help="collectives' bus bandwidth over a size sweep, every node at once")
    ar_ap.add_argument("--rank", type=int, required=True)
    ar_ap.add_argument("--world", type=int, required=True)
    ar_ap.add_argument("--master", required=True)
    ar_ap.add_argument("--port", type=int, required=True)
    ar_ap.add_argument("--ifname", required=True)
    ar_ap.add_argument("--collectives", default="all_reduce", help=f"comma-separated, of {', '.join(BUS_FACTOR)}")
    ar_ap.add_argument("--sizes", default="1048576,8388608,33554432", help="bytes, comma-separated")
    ar_ap.add_argument("--gpu-sizes", default="", help="bytes, comma-separated, on NCCL (default: --sizes)")
    ar_ap.add_argument("--floor", action="append", help="COLLECTIVE=GBPS: busbw below it at the largest size bisects")
    ar_ap.add_argument("--iters", type=int, default=5)
    ar_ap.add_argument("--warmup", type=int, default=1)
    ar_ap.add_argument("--timeout", type=float, default=60.0)
    ar_ap.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    ar_ap.add_argument("--env", action="append", help="KEY=VALUE for NCCL (NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_TC)")
    ar_ap.set_defaults(run=collectives)
    nt_ap = sub.add_parser("nccl_tests", help="nccl-tests' binaries on this node's GPUs, where installed")
    nt_ap.add_argument("--gpus", type=int, required=True)
    nt_ap.add_argument("--collectives", default="all_reduce", help=f"comma-separated, of {', '.join(NCCL_TESTS)}")
    nt_ap.add_argument("--bin-dir", default="", help="where the *_perf binaries are (default: PATH)")
    nt_ap.add_argument("--min-bytes", default="1M")
    nt_ap.add_argument("--max-bytes", default="1G")
    nt_ap.add_argument("--timeout", type=float, default=300.0)
    nt_ap.set_defaults(run=nccl_tests)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    print(json.dumps(args.run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
