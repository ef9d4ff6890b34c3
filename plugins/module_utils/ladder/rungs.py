"""The ladder's rungs: one result per rung (pass, fail or skip, its value against its threshold, the hosts or
pairs to blame), from what the tools measured.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.nccl import parse_nccl_log
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers as validate_parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairing import (
    peer_host,
    rail_suspects,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.units import (
    NO_SPEED,
    rail_rate,
    slowest,
    threshold_for,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as slurm_launch
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import conf as slurm_rules

STATUSES = ("pass", "fail", "skip")


def make_rung(name, status, reason=None, value=None, threshold=None, unit=None, **extra):
    """One rung of the ladder: status pass|fail|skip, the measured value, the threshold, the unit."""
    if status not in STATUSES:
        raise ValueError(f"rung {name}: status must be one of {STATUSES}, got {status!r}")
    rung = {
        "name": name,
        "status": status,
        "reason": reason,
        "value": value,
        "threshold": threshold,
        "unit": unit,
        "bad_hosts": sorted(extra.pop("bad_hosts", []) or []),
        "bad_pairs": [list(p) for p in extra.pop("bad_pairs", []) or []],
        "checks": extra.pop("checks", []) or [],
    }
    rung.update(extra)
    return rung


def _fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


def console_line(rung):
    """One line per rung for the console: `[PASS] pairwise_bw  9.41 Gb/s (threshold 22.5)  reason`."""
    head = f"[{rung['status'].upper():4}] {rung['name']:<14}"
    if rung.get("value") is not None:
        head += f" {_fmt(rung['value'])} {rung.get('unit') or ''}".rstrip()
        if rung.get("threshold") is not None:
            head += f" (threshold {_fmt(rung['threshold'])})"
    if rung.get("bad_pairs"):
        head += " bad pairs: " + ", ".join("-".join(p) for p in rung["bad_pairs"])
    if rung.get("bad_hosts"):
        head += " bad hosts: " + ", ".join(rung["bad_hosts"])
    if rung.get("reason"):
        head += f" — {rung['reason']}"
    return head


def _check(host, name, status, detail, value=None, threshold=None, unit=None):
    return {
        "host": host,
        "check": name,
        "status": status,
        "detail": detail,
        "value": value,
        "threshold": threshold,
        "unit": unit,
    }


def _good_hosts(hosts, checks):
    """The hosts none of whose checks failed."""
    return [h for h in hosts if not any(c["host"] == h and c["status"] == "fail" for c in checks)]


def _rung_from_checks(name, checks, value=None, threshold=None, unit=None, skip_reason=None, **extra):
    """Rung status from its checks: any fail fails; all skip skips; else pass."""
    failed = [c for c in checks if c["status"] == "fail"]
    if failed:
        status = "fail"
        reason = "; ".join((f"{c['host']}: " if c["host"] else "") + c["detail"] for c in failed[:6])
    elif checks and all(c["status"] == "skip" for c in checks):
        status = "skip"
        reason = skip_reason or "; ".join(sorted({c["detail"] for c in checks}))
    elif not checks:
        status, reason = "skip", skip_reason or "nothing to check"
    else:
        status = "pass"
        reason = extra.pop("pass_reason", None)
    extra.pop("pass_reason", None)
    return make_rung(
        name,
        status,
        reason=reason,
        value=value,
        threshold=threshold,
        unit=unit,
        checks=checks,
        bad_hosts=sorted({c["host"] for c in failed if c["host"]}),
        **extra,
    )


def evaluate_reachability(results, hosts):
    """results: {host: {"unreachable": bool, "msg": str, "pings": [{peer, ok, detail}]}} -> rung."""
    checks = []
    for host in hosts:
        res = results.get(host) or {"unreachable": True, "msg": "no result"}
        if res.get("unreachable"):
            checks.append(_check(host, "ssh", "fail", f"unreachable over the management network: {res.get('msg', '')}"))
            continue
        checks.append(_check(host, "ssh", "pass", "reachable"))
        for ping in res.get("pings") or []:
            ok = ping.get("ok")
            checks.append(
                _check(
                    host,
                    f"fabric ping {ping['peer']}",
                    "pass" if ok else "fail",
                    f"fabric ping to {ping['peer']} ({ping.get('address')}): "
                    + (ping.get("detail") or ("ok" if ok else "no reply")),
                )
            )
    bad_pairs = sorted(
        {
            tuple(sorted((c["host"], peer_host(c["check"].split()[-1]))))
            for c in checks
            if c["status"] == "fail" and c["check"].startswith("fabric")
        }
    )
    ok = sum(1 for c in checks if c["status"] == "pass")
    return _rung_from_checks(
        "reachability", checks, value=ok, threshold=len(checks), unit="checks", bad_pairs=bad_pairs
    )


def evaluate_path_mtu(results, hosts):
    """results: {host: {"pings": [{peer, ok, detail, mtu}]}} -> rung (DF pings at the configured MTU of each
    rail: the smaller of its two ends)."""
    checks, mtus = [], []
    for host in hosts:
        res = results.get(host) or {}
        if res.get("error"):
            checks.append(_check(host, "path mtu", "fail", res["error"]))
        for ping in res.get("pings") or []:
            mtu = ping.get("mtu")
            mtus += [mtu] if mtu else []
            checks.append(
                _check(
                    host,
                    f"path mtu {ping['peer']}",
                    "pass" if ping.get("ok") else "fail",
                    f"{mtu}-byte don't-fragment ping to {ping['peer']}: {ping.get('detail') or 'ok'}",
                    value=mtu,
                    unit="bytes",
                )
            )
    bad_pairs = sorted(
        {
            tuple(sorted((c["host"], peer_host(c["check"].split()[-1]))))
            for c in checks
            if c["status"] == "fail" and c["check"] != "path mtu"
        }
    )
    return _rung_from_checks(
        "path_mtu",
        checks,
        value=min(mtus) if mtus else None,
        unit="bytes",
        bad_pairs=bad_pairs,
        skip_reason="fewer than two hosts",
    )


def _node_check_results(results, hosts, checks):
    """(host, result) for each host, sorted, whose rdma-node-check answered; a failed `probe` check is appended to
    `checks` for each host whose check did not run or returned nothing."""
    for host in sorted(hosts):
        res = results.get(host)
        if not res or not res.get("checks"):
            why = (res or {}).get("reason") or "host failed or unreachable"
            checks.append(_check(host, "probe", "fail", f"no node check result ({why})"))
            continue
        yield host, res


def fleet_stack(stacks):
    """{key: value the most hosts run} over {host: {key: version}} (a host without the key counts as running
    none); a key where two values tie for the most hosts has no majority and is left out."""
    majority = {}
    for key in sorted({k for s in stacks.values() for k in s}):
        counts = Counter(s.get(key) for s in stacks.values()).most_common()
        if len(counts) == 1 or counts[0][1] > counts[1][1]:
            majority[key] = counts[0][0]
    return majority


def _stack_checks(stacks, status):
    """Each host's stack against the fleet's majority (fleet_stack): one check per key a host differs on, at
    `status` (cluster_validate_stack_mismatch), naming the majority; a tie names every host. One passing check per
    host that runs what the others run. Fewer than two hosts: nothing to compare."""
    if len(stacks) < 2:
        return []
    majority, checks = fleet_stack(stacks), []
    keys = sorted({k for s in stacks.values() for k in s})
    for host, mine in sorted(stacks.items()):
        odd = []
        for key in keys:
            if key not in majority:
                values = ", ".join(f"{h} {s.get(key) or 'none'}" for h, s in sorted(stacks.items()))
                odd.append(_check(host, f"stack {key}", status, f"{key}: no majority ({values})", mine.get(key)))
            elif mine.get(key) != majority[key]:
                runs = sum(s.get(key) == majority[key] for s in stacks.values())
                detail = f"{key} {mine.get(key) or 'none'}, {runs} of {len(stacks)} hosts run {majority[key] or 'none'}"
                odd.append(_check(host, f"stack {key}", status, detail, mine.get(key), majority[key]))
        checks += odd or [_check(host, "stack consistency", "pass", f"the fleet's {len(keys)} versions")]
    return checks


def evaluate_node_health(results, hosts, stack_mismatch="fail"):
    """Node health: each host's rdma-node-check result (module rdma_llm.cluster.node_check: the node's checks and
    their verdicts, the same rules a scheduler's health check runs), gathered into the rung, and each host's
    software stack against the fleet's majority (stack_mismatch: fail, warn or report an odd host).

    results: {host: node_check result | None (the module failed)}; hosts: the nodes of the rung. Each check gets
    its host; a warning passes and is noted. Returns the rung with `speeds` (host -> its slowest link),
    `rail_speeds` (host -> rail -> Gb/s: the interface, or `hca:port` on InfiniBand), `stacks` (host -> versions)
    and `stack` (the fleet's majority: node_health's baseline once the ladder passes)."""
    if stack_mismatch not in ("fail", "warn", "report"):
        raise RuleError(f"cluster_validate_stack_mismatch must be fail, warn or report (got {stack_mismatch!r})")
    checks, notes, rates, stacks = [], [], {}, {}
    for host, res in _node_check_results(results, hosts, checks):
        if "stack" in (res.get("groups") or []):
            stacks[host] = res.get("stack") or {}
        for c in res["checks"]:
            checks.append(_check(host, c["check"], c["status"], c["detail"], c.get("value"), c.get("threshold"),
                                 c.get("unit")))  # fmt: skip
            if c["status"] == "warn":
                notes.append(f"{host}: warning: {c['detail']}")
        notes += [f"{host}: {n}" for n in res.get("notes") or []]
        rates[host] = res.get("rail_speeds") or {}
    odd = _stack_checks(stacks, "pass" if stack_mismatch == "report" else stack_mismatch)
    checks += odd
    notes += [f"{c['host']}: warning: {c['detail']}" for c in odd if c["status"] == "warn"]
    good = _good_hosts(hosts, checks)
    skipped = sorted({c["detail"].split(": ", 1)[-1] for c in checks if c["status"] == "skip"})
    return _rung_from_checks(
        "node_health",
        checks,
        value=len(good),
        threshold=len(hosts),
        unit="hosts",
        pass_reason=("skipped: " + "; ".join(skipped)) if skipped else None,
        notes=notes,
        speeds={h: slowest(v) for h, v in rates.items()},
        rail_speeds=rates,
        stacks=stacks,
        stack=fleet_stack(stacks),
    )


def evaluate_nic_counters(results, hosts):
    """The NIC port counters around the stress rungs: each host's rdma-node-check `--only counters` after the
    all-reduce, against the reading its node_health run kept (the ladder's state dir). An error counter that grew
    fails, naming host, device, port and counter; the mlx5 congestion counters and the no-drop priority's pause
    counters are reported (`deltas`, `pause`)."""
    checks, deltas, pause = [], {}, {}
    for host, res in _node_check_results(results, hosts, checks):
        checks += [_check(host, c["check"], c["status"], c["detail"]) for c in res["checks"]]
        counters = res.get("counters") or {}
        if counters.get("deltas"):
            deltas[host] = counters["deltas"]
        if any(counters.get("pause", {}).values()):
            pause[host] = counters["pause"]
    grew = [c for c in checks if c["status"] == "fail"]
    return _rung_from_checks(
        "nic_counters",
        checks,
        value=len(grew),
        threshold=0,
        unit="hosts",
        pass_reason="no NIC error counter grew across the stress rungs",
        deltas=deltas,
        pause=pause,
    )


def _rail_label(multi, rail):
    return f" {rail}" if multi and rail else ""


def _several_rails(measurements):
    """Whether the pairs were measured on more than one rail (then each check and suspect names its rail)."""
    return len({m.get("rail") for m in measurements}) > 1


def _with_suspects(rung, bad):
    """The pair rung's suspects (bad: [(a, b, rail)] that failed): bad_rails per host, and those hosts."""
    rung["bad_rails"] = rail_suspects(bad)
    rung["bad_hosts"] = sorted(rung["bad_rails"])
    return rung


def _named_suspects(rung, multi):
    return ", ".join(
        h + (f" ({', '.join(map(str, rung['bad_rails'][h]))})" if multi else "") for h in rung["bad_hosts"]
    )


def evaluate_pairs(measurements, rail_speeds, fraction=0.9, consistency=0.5, name="pairwise_bw", tool="iperf3"):
    """Pairwise bandwidth rung, every rail of every pair.

    measurements: [{"pair": [a, b], "rail": name|None, "gbps": float|None, "error": str|None}]
    rail_speeds: {host: {rail: line rate Gb/s | None}} (node_health): a rail is held to its own rate where known,
    else to the host's slowest link. Absolute check: gbps >= fraction x min(line rates of the pair); without a
    known speed there is no absolute threshold (said so).
    Consistency check: every rail of every pair reaches `consistency` x the best — finds the slow host or rail
    even where no line rate is known.
    """
    best = max((m["gbps"] for m in measurements if m.get("gbps") is not None), default=None)
    multi = _several_rails(measurements)
    checks, pairs, bad = [], [], []
    thresholds = []
    for m in measurements:
        a, b = m["pair"]
        rail = m.get("rail")
        rates = [rail_rate(a, rail, rail_speeds), rail_rate(b, rail, rail_speeds)]
        limit = threshold_for(min(rates), fraction) if None not in rates else None
        if limit is not None:
            thresholds.append(limit)
        gbps = m.get("gbps")
        entry = {
            "pair": [a, b],
            "rail": rail,
            "gbps": gbps,
            "threshold": limit,
            "error": m.get("error"),
            "status": "pass",
        }
        if gbps is None:
            entry["status"] = "fail"
            detail = m.get("error") or "no result"
        elif limit is not None and gbps < limit:
            entry["status"] = "fail"
            detail = f"{gbps:g} Gb/s < {limit:g} ({fraction:.0%} of {min(rates):g} Gb/s line rate)"
        elif best and gbps < consistency * best:
            entry["status"] = "fail"
            detail = f"{gbps:g} Gb/s < {consistency:.0%} of the best {'rail' if multi else 'pair'} ({best:g} Gb/s)"
        else:
            detail = f"{gbps:g} Gb/s" + ("" if limit is not None else f" ({NO_SPEED})")
        if entry["status"] == "fail":
            bad.append((a, b, rail))
        pairs.append(entry)
        checks.append(
            _check(
                f"{a}-{b}{_rail_label(multi, rail)}",
                tool,
                entry["status"],
                detail,
                value=gbps,
                threshold=limit,
                unit="Gb/s",
            )
        )
    values = [p["gbps"] for p in pairs if p["gbps"] is not None]
    bad_pairs = sorted({(a, b) for a, b, _ in bad})
    rung = _rung_from_checks(
        name,
        checks,
        value=min(values) if values else None,
        threshold=min(thresholds) if thresholds else None,
        unit="Gb/s",
        skip_reason="fewer than two hosts",
        pass_reason=None if thresholds else f"{NO_SPEED}; every pair within {consistency:.0%} of the best",
        bad_pairs=bad_pairs,
        pairs=pairs,
        tool=tool,
    )
    rung["rails"] = sorted({str(p["rail"]) for p in pairs if p["rail"]})
    _with_suspects(rung, bad)
    if rung["status"] == "fail":
        count = f"{len(bad)} of {len(pairs)} " + ("rail(s) of the pairs" if multi else "pair(s)")
        rung["reason"] = (
            f"{count} failed"
            + (f"; suspect host(s): {_named_suspects(rung, multi)}" if rung["bad_hosts"] else "")
            + "; "
            + "; ".join(f"{c['host']}: {c['detail']}" for c in checks if c["status"] == "fail")[:600]
        )
    return rung


def evaluate_latency(measurements, ceiling_usec, name="pairwise_lat"):
    """measurements: [{"pair": [a, b], "rail", "usec": float|None, "error": str|None}] -> rung (typical latency
    ceiling, every rail)."""
    multi = _several_rails(measurements)
    checks, bad = [], []
    for m in measurements:
        a, b = m["pair"]
        usec = m.get("usec")
        if usec is None:
            status, detail = "fail", m.get("error") or "no result"
        else:
            status = "pass" if usec <= ceiling_usec else "fail"
            detail = f"{usec:g} µs (ceiling {ceiling_usec:g})"
        if status == "fail":
            bad.append((a, b, m.get("rail")))
        checks.append(
            _check(
                f"{a}-{b}{_rail_label(multi, m.get('rail'))}",
                "latency",
                status,
                detail,
                value=usec,
                threshold=ceiling_usec,
                unit="usec",
            )
        )
    values = [c["value"] for c in checks if c["value"] is not None]
    rung = _rung_from_checks(
        name,
        checks,
        value=max(values) if values else None,
        threshold=ceiling_usec,
        unit="usec",
        bad_pairs=sorted({(a, b) for a, b, _ in bad}),
    )
    return _with_suspects(rung, bad)


# The collectives probe.py measures (nccl-tests' names): all-reduce is rung `allreduce`, the rest rung
# `collectives` (FSDP's all-gather and reduce-scatter, MoE's all-to-all).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def collective_floors(speeds, fraction=0.7, floors=None, names=COLLECTIVES):
    """{collective: busbw floor in Gb/s or None}: `floors` (cluster_validate_collective_floor_gbps: an absolute
    figure, a vendor's acceptance number or a healthy run's) where given, else fraction x the slowest link's line
    rate, None where a link's speed is unknown (never a made-up number). The probe bisects below it."""
    rates = list((speeds or {}).values())
    derived = threshold_for(min(rates), fraction) if rates and None not in rates else None
    out = {}
    for name in names:
        value = (floors or {}).get(name, derived)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise RuleError(f"cluster_validate_collective_floor_gbps.{name}: {value!r} is not a positive number")
        out[name] = None if value is None else float(value)
    return out


def _probe_failures(outputs):
    return {h: o.get("error") or "no result" for h, o in outputs.items() if not o or o.get("error") or not o.get("ok")}


def _rank0(outputs):
    return next((o for o in outputs.values() if o and o.get("rank") == 0 and o.get("collectives") is not None), None)


def bisection_suspects(outputs, collective):
    """(hosts, text) of the probe's bisection of `collective` (rank 0's `bisection`), ranks named by the hosts that
    ran them; (None, "") where it was not bisected."""
    report = _rank0(outputs) or {}
    b = report.get("bisection")
    if not b or b.get("collective") != collective:
        return None, ""
    host_of = {o["rank"]: h for h, o in outputs.items() if o and o.get("rank") is not None}
    hosts = [host_of.get(r, f"rank {r}") for r in b["suspects"]]
    steps = "; ".join(
        " | ".join(
            f"{'+'.join(host_of.get(r, str(r)) for r in g['group'])} {g['busbw_gbps']:g}"
            + (" slow" if g["slow"] else "")
            for g in round_
        )
        for round_ in b["rounds"]
    )
    runs = f"{len(b['rounds'])} round(s)" + (f": {steps}" if steps else "")
    if len(hosts) == 1 and not b.get("reason"):
        return hosts, f"bisection names {hosts[0]} ({runs}, floor {b['floor_gbps']:g} Gb/s)"
    return hosts, f"bisection could not name one node: {b.get('reason')}; suspects {', '.join(hosts)} ({runs})"


def _wrong(outputs, collective):
    return {h: o["wrong"][collective] for h, o in outputs.items() if o and (o.get("wrong") or {}).get(collective)}


def evaluate_allreduce(outputs, speeds, fraction=0.7, world=None, expect=None, require_gdr=True, floors=None):
    """All-reduce busbw over a size sweep (files/probe.py allreduce on every node; rank 0 reports).

    outputs: {host: parsed JSON line|{"error"}}. Threshold: collective_floors' (fraction x the slowest link's line
    rate, or the inventory's floor), on the largest size; none when a link speed is unknown. Below it, the probe's
    bisection names the node. On NCCL (GPUs), each node's `nccl_log` proves the transport:
    RDMA where NCCL was given an HCA (`nccl_ib_hca`) or `expect` ({host: {"devices"}}, node_health's
    expectations) wants RDMA devices, and there GPUDirect RDMA (a failure unless `require_gdr` is false).
    """
    failed = _probe_failures(outputs)
    nccl = {h: parse_nccl_log(o["nccl_log"]) for h, o in outputs.items() if o and o.get("nccl_log") is not None}
    rdma = {h: bool(outputs[h].get("nccl_ib_hca") or (expect or {}).get(h, {}).get("devices")) for h in nccl}
    checks = [_check(h, *c) for h in sorted(nccl) for c in nccl_rules.transport_checks(nccl[h], rdma[h], require_gdr)]
    transport = {h: {k: v for k, v in p.items() if k != "warnings"} for h, p in nccl.items()}
    report = _rank0(outputs)
    if failed or report is None:
        reason = "; ".join(f"{h}: {e}" for h, e in sorted(failed.items())) or "rank 0 reported nothing"
        bad = [c for c in checks if c["status"] == "fail"]
        reason += "".join(f"; {c['host']}: {c['detail']}" for c in bad)
        return make_rung(
            "allreduce", "fail", reason=reason, unit="Gb/s", bad_hosts=sorted(set(failed) | {c["host"] for c in bad}),
            checks=checks, transport=transport,
        )  # fmt: skip
    results = report["collectives"].get("all_reduce") or []
    # Every rank checks its own result (each element must be n(n+1)/2): a rank whose result is wrong is named.
    wrong_on = _wrong(outputs, "all_reduce")
    wrong = sorted({r["bytes"] for r in results if not r.get("correct")} | {b for w in wrong_on.values() for b in w})
    largest = max(results, key=lambda r: r["bytes"])
    limit = collective_floors(speeds, fraction, floors, names=["all_reduce"])["all_reduce"]
    value = largest["busbw_gbps"]
    bad = [c for c in checks if c["status"] == "fail"]
    suspects, bisected = None, ""
    if wrong:
        status = "fail"
        reason = "wrong all-reduce result at " + ", ".join(str(b) for b in wrong) + " bytes"
        reason += f" on {', '.join(sorted(wrong_on))}" if wrong_on else ""
        named = [_check(h, "allreduce result", "fail", f"wrong result at {w} bytes") for h, w in wrong_on.items()]
        checks, bad = checks + named, bad + named
    elif bad:
        status = "fail"
        reason = "; ".join(f"{c['host']}: {c['detail']}" for c in bad[:6])
    elif limit is not None and value < limit:
        status = "fail"
        suspects, bisected = bisection_suspects(outputs, "all_reduce")
        reason = f"busbw {value:g} Gb/s < {limit:g} ({_floor_source(floors, 'all_reduce', fraction)})"
        reason += f"; {bisected}" if bisected else ""
    else:
        status = "pass"
        reason = f"{report['backend']} over {report['world']} ranks, results correct" + (
            "" if limit is not None else f"; {NO_SPEED}"
        )
        reason += _transport_summary(nccl, checks)
    return make_rung(
        "allreduce",
        status,
        reason=reason,
        value=value,
        threshold=limit,
        unit="Gb/s",
        sweep=results,
        backend=report.get("backend"),
        world=report.get("world"),
        bad_hosts=sorted({c["host"] for c in bad} | set(_one(suspects))),
        checks=checks,
        transport=transport,
        **({"bisection": report["bisection"], "suspects": suspects} if suspects else {}),
    )


def _one(suspects):
    """A bisection names a bad host only when it ended at one node."""
    return suspects if suspects and len(suspects) == 1 else []


def _floor_source(floors, name, fraction):
    return "the inventory's floor" if name in (floors or {}) else f"{fraction:.0%} of the slowest link"


def evaluate_collectives(outputs, speeds, fraction=0.7, floors=None):
    """All-gather, reduce-scatter and all-to-all from the same probe run as `allreduce` (rank 0's `collectives`):
    each result correct on every rank, each busbw at the largest size >= its floor (collective_floors); the
    probe's bisection names the node when one is below. Skipped where only the all-reduce was asked."""
    failed = _probe_failures(outputs)
    report = _rank0(outputs)
    if failed or report is None:
        reason = "; ".join(f"{h}: {e}" for h, e in sorted(failed.items())) or "rank 0 reported nothing"
        return make_rung("collectives", "fail", reason=reason, unit="Gb/s", bad_hosts=sorted(failed))
    sweeps = {n: r for n, r in (report.get("collectives") or {}).items() if n != "all_reduce" and r}
    if not sweeps:
        return make_rung("collectives", "skip", reason="only the all-reduce asked (cluster_validate_collectives)")
    limits = collective_floors(speeds, fraction, floors, names=list(sweeps))
    checks, problems, bad_hosts, extra = [], [], set(), {}
    for name, results in sweeps.items():
        largest = max(results, key=lambda r: r["bytes"])
        wrong_on = _wrong(outputs, name)
        wrong = sorted(
            {r["bytes"] for r in results if not r.get("correct")} | {b for w in wrong_on.values() for b in w}
        )
        limit, value = limits[name], largest["busbw_gbps"]
        if wrong:
            where = f" on {', '.join(sorted(wrong_on))}" if wrong_on else ""
            problems.append(f"wrong {name} result at {', '.join(map(str, wrong))} bytes{where}")
            bad_hosts |= set(wrong_on)
            checks += [_check(h, f"{name} result", "fail", f"wrong result at {w} bytes") for h, w in wrong_on.items()]
        elif limit is not None and value < limit:
            suspects, bisected = bisection_suspects(outputs, name)
            problems.append(
                f"{name} busbw {value:g} Gb/s < {limit:g} ({_floor_source(floors, name, fraction)})"
                + (f"; {bisected}" if bisected else "")
            )
            bad_hosts |= set(_one(suspects))
            if suspects:
                extra = {"bisection": report["bisection"], "suspects": suspects}
    values = [max(r, key=lambda x: x["bytes"])["busbw_gbps"] for r in sweeps.values()]
    known = [v for v in limits.values() if v is not None]
    summary = ", ".join(f"{n} {max(r, key=lambda x: x['bytes'])['busbw_gbps']:g}" for n, r in sweeps.items())
    if problems:
        status, reason = "fail", "; ".join(problems)
    else:
        status = "pass"
        reason = f"{summary} Gb/s busbw, {report['backend']} over {report['world']} ranks, results correct" + (
            "" if known else f"; {NO_SPEED}"
        )
    return make_rung(
        "collectives",
        status,
        reason=reason,
        value=min(values),
        threshold=min(known) if known else None,
        unit="Gb/s",
        sweeps=sweeps,
        backend=report.get("backend"),
        world=report.get("world"),
        bad_hosts=sorted(bad_hosts),
        checks=checks,
        **extra,
    )


def _transport_summary(nccl, checks):
    """`; NCCL 2.27.5 over IB (mlx5_0:1/RoCE), GPUDirect RDMA on every node` for a passing rung."""
    if not nccl:
        return ""
    versions = sorted({p["version"] for p in nccl.values() if p["version"]})
    nets = sorted({p["network"] for p in nccl.values() if p["network"]})
    devices = sorted({d for p in nccl.values() for d in p["devices"]})
    if not versions and not nets:
        return "; NCCL's log does not show its transport"
    text = "; NCCL" + (f" {'/'.join(versions)}" if versions else "") + (f" over {'/'.join(nets)}" if nets else "")
    text += f" ({', '.join(devices)})" if devices else ""
    gdr = [c for c in checks if c["check"] == "gpudirect rdma"]
    if gdr and all(c["status"] == "pass" for c in gdr):
        text += ", GPUDirect RDMA on every node"
    elif gdr:
        text += ", without GPUDirect RDMA on " + ", ".join(sorted({c["host"] for c in gdr if c["status"] != "pass"}))
    return text


def stress_class(qos, rdma):
    """The switch class the pair tests' traffic rode: {"qos_group", "dscp", "what"}, from a node's QoS fact
    (rdma_qos: the host's DSCP-to-priority map, which the inventory contract makes the switch's qos-groups).

    rdma: perftest with the fact's traffic class (pair_rails), whose DSCP is the RoCE one: the no-drop priority.
    Otherwise iperf3, marked with fabric TCP's DSCP: its own priority, or the no-drop one where cluster_tcp_lossless
    marks it with the RoCE DSCP. Without the fact (rdma_qos did not run) the traffic carries DSCP 0: class 0."""
    qos = qos or {}
    env = qos.get("nccl_env") or {}
    if rdma and env.get("NCCL_IB_SL") is not None:
        return {"qos_group": qos.get("pfc_priority"), "dscp": None, "what": f"perftest on SL {env['NCCL_IB_SL']}"}
    if rdma:
        tos = env.get("NCCL_IB_TC")
        dscp, what = (int(tos) >> 2, f"perftest with ToS {tos}") if tos is not None else (0, "perftest, no ToS")
    elif qos.get("mark_tcp"):
        dscp, what = int(qos.get("tcp_mark_dscp", 0)), "iperf3"
    else:
        dscp, what = 0, "iperf3, TCP unmarked"
    by_dscp = {qos.get("tcp_dscp"): qos.get("tcp_priority"), qos.get("roce_dscp"): qos.get("pfc_priority")}
    group = by_dscp.get(dscp)
    return {"qos_group": 0 if group is None else int(group), "dscp": dscp, "what": f"{what} (DSCP {dscp})"}


def switch_port_hosts(hostvars, switches, nodes, override=None):
    """{"switch:port": node} for the host behind each RoCE port of each switch: the node the port's `peer` names, or
    its description's first word (`lab-node3 rdma0`; cabling.links, the one reading of the port map), else
    `override` (cluster_validate_switch_ports): `switch:port` keys as given, a bare port name only for a port that
    names nobody. A port whose far end is another switch (an uplink) names no host."""
    override = dict(override or {})
    names = slurm_rules.host_aliases(hostvars, list(nodes or []))
    ports = slurm_rules.switch_ports(hostvars, list(switches or []))
    hosts = set(names.values())
    owners = {(ln["switch"], ln["port"]): ln["peer"] for ln in cabling.links(ports, names) if ln["peer"] in hosts}
    out = {}
    for sw, items in ports.items():
        for item in items:
            name = str(item.get("name") or "") if isinstance(item, dict) else ""
            if not name:
                continue
            owner = owners.get((sw, cabling.port_name(name)))
            if owner:
                out[f"{sw}:{name}"] = owner
            elif not item.get("description") and not item.get("peer") and name in override:
                out[f"{sw}:{name}"] = override[name]
    out.update({k: v for k, v in override.items() if ":" in str(k)})
    return out


def evaluate_switch(before, after, nodrop_group, port_hosts=None, skip_reason=None, stress=None):
    """Switch rung: drops in the no-drop class must not grow across the stress rungs; pauses and ECN marks reported.

    before/after: {switch: switch_counters(...)}; port_hosts: {"switch:port": host} (switch_port_hosts) to name the
    host; stress:
    stress_class() of the pair tests, whose class the rung names: the no-drop class is judged with the traffic it
    carried, and traffic that rode a lossy class is said to have (its drops reported, not judged: that class may
    drop), so a rung that stressed no lossless traffic does not read as if it had.
    """
    if skip_reason:
        return make_rung("switch", "skip", reason=skip_reason)
    if not any(k.startswith("drops_q") for ports in after.values() for c in ports.values() for k in c):
        return make_rung("switch", "skip", reason="the switch printed no per-qos-group drop counters (show queuing)")
    port_hosts = port_hosts or {}
    checks = []
    deltas = {}
    for switch, ports in after.items():
        for port, counters in ports.items():
            if not any(k.startswith("drops_q") for k in counters):
                continue  # listed by the PFC show only: not a RoCE port the ladder read (show queuing)
            old = before.get(switch, {}).get(port, {})
            delta = {k: v - old.get(k, 0) for k, v in counters.items()}
            deltas[f"{switch}:{port}"] = delta
            drops = delta.get(f"drops_q{nodrop_group}", 0) + delta.get("ingress_drops", 0)
            who = port_hosts.get(f"{switch}:{port}", "")
            label = f"{switch} {port}" + (f" ({who})" if who else "")
            checks.append(
                _check(
                    who or f"{switch}:{port}",
                    "no-drop class drops",
                    "pass" if drops == 0 else "fail",
                    f"{label}: {drops} dropped in qos-group {nodrop_group}, "
                    f"{delta.get('pause_rx', 0)} PFC pauses received, {delta.get('pause_tx', 0)} sent, "
                    f"{delta.get(f'ecn_q{nodrop_group}', 0)} ECN-marked",
                    value=drops,
                    threshold=0,
                    unit="packets",
                )
            )
    total = sum(c["value"] for c in checks)
    pauses = sum(d.get("pause_rx", 0) + d.get("pause_tx", 0) for d in deltas.values())
    marked = sum(d.get(f"ecn_q{nodrop_group}", 0) for d in deltas.values())
    summary = f"no drops in qos-group {nodrop_group} on {len(checks)} port(s); {pauses} PFC pauses, {marked} ECN-marked"
    if stress and stress.get("qos_group") == nodrop_group:
        summary += f"; the pair tests' traffic ({stress['what']}) rode it"
    elif stress:
        group = stress.get("qos_group")
        lossy = sum(d.get(f"drops_q{group}", 0) for d in deltas.values())
        summary += (
            f"; the pair tests' traffic ({stress['what']}) rode lossy qos-group {group}, not the no-drop one: "
            f"{lossy} dropped there (reported, not judged)"
        )
    extra = {"stress": stress} if stress else {}
    return _rung_from_checks(
        "switch", checks, value=total, threshold=0, unit="packets", deltas=deltas, pass_reason=summary, **extra
    )


def evaluate_train(report, floor_tokens_per_s, skip_reason=None, min_mfu=0.0):
    """Short training run: outcome completed, tokens/s (whole job) at or above the floor, and on GPUs MFU at or
    above min_mfu. On CPUs the payload's MFU is an estimate against a guessed peak: reported, never judged.

    report: the launch's report.json (plugins/module_utils/launch/report.py), its `results` the hosts' result.json.
    """
    unit = "tokens/s"
    if skip_reason:
        return make_rung("train", "skip", reason=skip_reason, unit=unit, threshold=floor_tokens_per_s)
    if not report or (report.get("error") and not report.get("outcome")):
        why = (report or {}).get("error") or "the training run left no report"
        return make_rung("train", "fail", reason=why, unit=unit, threshold=floor_tokens_per_s)
    tps = report.get("tokens_per_s_median", report.get("tokens_per_s"))
    if report.get("outcome") != "completed":
        return make_rung(
            "train",
            "fail",
            reason=f"training {report.get('outcome')}: {report.get('message') or report.get('error')}",
            value=tps,
            threshold=floor_tokens_per_s,
            unit=unit,
        )
    results = [r for r in (report.get("results") or {}).values() if isinstance(r, dict)]
    rank0 = next((r for r in results if r.get("mfu") is not None), results[0] if results else {})
    mfu, device = report.get("mfu", rank0.get("mfu")), rank0.get("device") or "?"
    problems = []
    if tps is None or tps < floor_tokens_per_s:
        problems.append(f"{_fmt(tps) if tps is not None else 'no'} tokens/s below the floor {_fmt(floor_tokens_per_s)}")
    if device == "cuda":
        if mfu is None:
            note = "MFU unknown (unknown GPU peak: give the payload peak_tflops)"
        else:
            note = f"MFU {mfu:.1%}" + (f" (floor {min_mfu:.0%})" if min_mfu else "")
            if min_mfu and mfu < min_mfu:
                problems.append(f"MFU {mfu:.1%} below {min_mfu:.0%}")
    else:
        note = f"{device}: MFU " + (f"{mfu:.1%} (estimated CPU peak, not judged)" if mfu is not None else "not known")
    world = rank0.get("world_size") or report.get("world_size")
    detail = f"{report.get('model')} on {world} rank(s), {report.get('final_step')} steps; {note}"
    return make_rung(
        "train",
        "fail" if problems else "pass",
        reason="; ".join([*problems, detail]),
        value=tps,
        threshold=floor_tokens_per_s,
        unit=unit,
        mfu=mfu,
        device=device,
        run_id=report.get("run_id"),
    )


def evaluate_host_errors(name, errors, hosts, pass_reason=None, unreachable=None):
    """A rung from per-host error messages ({host: message or ''}): pass when no host has one.

    unreachable: {host: why} of the hosts that did not answer over SSH (unreachable_hosts): each fails the rung
    with why, and what the rung would have checked on it is said not to have run.
    """
    unreachable = unreachable or {}
    checks = []
    for h in hosts:
        if h in unreachable:
            checks.append(_check(h, "ssh", "fail", f"unreachable over SSH ({unreachable[h]}); host checks not run"))
        else:
            checks.append(_check(h, name, "fail" if errors.get(h) else "pass", errors.get(h) or "ok"))
    return _rung_from_checks(name, checks, value=sum(1 for c in checks if c["status"] == "pass"), threshold=len(hosts),
                             unit="hosts", pass_reason=pass_reason)  # fmt: skip


def slurm_topology(hostvars, groups, found, mode="auto"):
    """The topology.conf lines the inventory gives (the slurm role's rule, module_utils/slurm/conf.py `topology`, from
    the switches' RoCE ports), with each node under the NodeName Slurm knows it by (`found`: host -> its
    `scontrol show node` fields, slurm_launch.node_map; a node not found keeps its short name). None where the
    role writes no topology.conf (slurm_topology: none, or no switch in the inventory)."""
    if mode != "auto":
        return None
    nodes = list(groups.get(slurm_rules.NODES) or [])
    switches = list(groups.get(slurm_rules.SWITCHES) or [])
    if not switches:
        return None
    nodename = {h: (found.get(h) or {}).get("NodeName") or h.split(".")[0] for h in nodes}
    names = slurm_rules.host_aliases(hostvars, nodes, switches)
    return slurm_rules.topology(slurm_rules.switch_ports(hostvars, switches), nodes, names, nodename)["lines"]


# A node the ladder's srun may use: idle (a node running another job would share the ladder's stress tests).
SLURM_READY = ("IDLE",)


def evaluate_slurm(nodes, topology_text, srun, hosts, aliases, expected_topology=None, skip_reason=None):
    """The scheduler: every node of the ladder is a Slurm node, idle and neither down nor drained (a node
    rdma-node-check drained is named with the check's reason), one `srun` step answers from every node (its
    SLURMD_NODENAME), and the topology Slurm reports (`scontrol show topology`) equals the inventory's
    (slurm_topology's lines; None: no topology.conf is expected).

    nodes, srun: {"rc", "stdout", "stderr"} of `scontrol show nodes --oneliner` and of the step; aliases: host ->
    the names Slurm may know it by (slurm_launch.aliases)."""
    if skip_reason:
        return make_rung("slurm", "skip", reason=skip_reason, unit="hosts", threshold=len(hosts))
    if nodes.get("rc") != 0:
        why = " ".join((nodes.get("stderr") or nodes.get("msg") or "").split())[-300:]
        return make_rung(
            "slurm", "fail", reason=f"scontrol show nodes failed: {why}", unit="hosts", threshold=len(hosts),
            value=0, bad_hosts=[],
        )  # fmt: skip
    found = slurm_launch.node_map(nodes.get("stdout") or "", aliases)
    answered = set((srun.get("stdout") or "").split())
    srun_error = " ".join((srun.get("stderr") or "").split())[-300:] or f"srun exit {srun.get('rc')}"
    checks = []
    for host in hosts:
        fields = found.get(host)
        if not fields:
            names = ", ".join(aliases.get(host) or [host])
            checks.append(_check(host, "slurm node", "fail", f"not a Slurm node (none is named {names})"))
            continue
        name, words = fields.get("NodeName", "?"), slurm_launch.node_words(fields)
        reason = f": {fields['Reason']}" if fields.get("Reason") else ""
        if [w for w in words if w in slurm_launch.UNUSABLE]:
            checks.append(_check(host, "slurm node", "fail", f"Slurm node {name} is {fields.get('State')}{reason}"))
        elif words[:1] != ["IDLE"]:
            checks.append(
                _check(host, "slurm node", "fail", f"Slurm node {name} is {fields.get('State')}, not idle: a job runs")
            )
        else:
            checks.append(_check(host, "slurm node", "pass", f"Slurm node {name} idle"))
        if name in answered:
            checks.append(_check(host, "srun", "pass", f"srun step ran on {name}"))
        else:
            checks.append(_check(host, "srun", "fail", f"srun step did not run on {name}: {srun_error}"))
    if expected_topology is not None:
        differences = slurm_launch.topology_differences(list(expected_topology), topology_text or "")
        checks.append(
            _check("", "topology", "fail" if differences else "pass", "; ".join(differences) or "as the inventory")
        )
    good = _good_hosts(hosts, checks)
    topo = next((c for c in checks if c["check"] == "topology"), None)
    return _rung_from_checks(
        "slurm",
        checks,
        value=len(good),
        threshold=len(hosts),
        unit="hosts",
        pass_reason="topology " + ("as the inventory" if topo else "not configured (no topology.conf)"),
        nodes={h: f.get("NodeName") for h, f in found.items()},
    )


def evaluate_nccl_tests(outputs, floor_gbps=0.0, consistency=0.5):
    """Rung nccl_tests: nccl-tests' own binaries on each node's GPUs (files/probe.py nccl_tests; their numbers are
    the ones vendors' acceptance figures quote). outputs: {host: the probe's JSON}. Per collective and node: no
    wrong value (nccl-tests' #wrong), busbw at the largest size >= floor_gbps (cluster_validate_nccl_tests_floor_gbps;
    0: none) and >= consistency x the best node's (a node whose GPUs talk slower than its peers'). Skipped where
    no node has nccl-tests and two GPUs."""
    failed = _probe_failures(outputs)
    if failed:
        reason = "; ".join(f"{h}: {e}" for h, e in sorted(failed.items()))
        return make_rung("nccl_tests", "fail", reason=reason, unit="Gb/s", bad_hosts=sorted(failed))
    ran = {h: o for h, o in outputs.items() if o.get("outputs")}
    if not ran:
        why = sorted({o.get("skipped") or "not run" for o in outputs.values()})
        return make_rung("nccl_tests", "skip", reason="; ".join(why) or "no node", unit="Gb/s")
    checks, busbw = [], {}
    for host, out in sorted(ran.items()):
        for coll, res in sorted(out["outputs"].items()):
            parsed = validate_parsers.parse_nccl_tests(res.get("stdout")) if res.get("rc") == 0 else None
            if parsed is None:
                last = ((res.get("stderr") or res.get("stdout") or "").strip().splitlines() or ["no output"])[-1]
                checks.append(_check(host, f"nccl-tests {coll}", "fail", f"rc {res.get('rc')}: {last[:200]}"))
                continue
            wrong = sum(r["wrong"] for r in parsed["rows"])
            if wrong:
                checks.append(_check(host, f"nccl-tests {coll}", "fail", f"{wrong} wrong value(s) (#wrong)"))
                continue
            busbw.setdefault(coll, {})[host] = parsed["rows"][-1]["busbw_gbps"]
    for coll, per_host in sorted(busbw.items()):
        best = max(per_host.values())
        for host, value in sorted(per_host.items()):
            if floor_gbps and value < floor_gbps:
                status, detail = "fail", f"{coll} busbw {value:g} Gb/s < {floor_gbps:g} (the inventory's floor)"
            elif value < consistency * best:
                status, detail = "fail", f"{coll} busbw {value:g} Gb/s < {consistency:.0%} of the best node ({best:g})"
            else:
                status, detail = "pass", f"{coll} busbw {value:g} Gb/s on {ran[host].get('gpus') or '?'} GPUs"
            checks.append(_check(host, f"nccl-tests {coll}", status, detail, value=value,
                                 threshold=floor_gbps or None, unit="Gb/s"))  # fmt: skip
    values = [c["value"] for c in checks if c["value"] is not None]
    held = "" if floor_gbps else "; no floor set, each node held to the best"
    rung = _rung_from_checks(
        "nccl_tests", checks, value=min(values) if values else None, threshold=floor_gbps or None, unit="Gb/s",
        pass_reason=f"nccl-tests on {len(ran)} node(s){held}",
    )  # fmt: skip
    rung["busbw"] = busbw
    return rung


def evaluate_cabling(hostvars, switches, nodes, switch_lldp, host_lldp=None, macs=None):
    """Rung cabling: the inventory's port map (cabling.links: each RoCE port's `peer`/`peer_port`, else its
    description's first two words) against LLDP from the switches (switch_lldp: switch -> `show lldp neighbors
    detail` text; a switch not read is absent) and from the hosts (host_lldp: host -> `lldpcli -f json0 show
    neighbors` text, None where lldpd is not installed). macs: host -> {interface: MAC}."""
    switches, nodes = list(switches or []), list(nodes or [])
    if not switches:
        return make_rung("cabling", "skip", reason="no switch in the inventory (group switches)")
    names = slurm_rules.host_aliases(hostvars, nodes, switches)
    links = cabling.links(slurm_rules.switch_ports(hostvars, switches), names)
    switch_seen = {sw: cabling.parse_nxos_lldp(text) for sw, text in (switch_lldp or {}).items() if text is not None}
    host_seen = {
        h: (cabling.parse_lldpcli(text) if text is not None else None) for h, text in (host_lldp or {}).items()
    }
    checks = [
        _check(c["where"], "cabling", c["status"], c["detail"])
        for c in cabling.compare(links, switch_seen, host_seen, names, macs)
    ]
    failed = [c for c in checks if c["status"] == "fail"]
    bad = set()
    for link in links:
        if link["kind"] == "host" and any(c["host"] in (cabling.end(link), cabling.far(link)) for c in failed):
            bad.add(link["peer"])
    notes = cabling.strangers(links, switch_seen)
    passed = [c for c in checks if c["status"] == "pass"]
    if failed:
        status = "fail"
        reason = "; ".join(c["detail"] for c in failed[:6]) + (f"; {len(failed) - 6} more" if len(failed) > 6 else "")
    elif passed:
        status = "pass"
        reason = f"{len(passed)} link end(s) as the inventory says"
        skipped = sorted({c["detail"] for c in checks if c["status"] == "skip"})
        reason += f"; not seen: {', '.join(skipped[:4])}" if skipped else ""
    else:
        status = "skip"
        reason = "; ".join(sorted({c["detail"] for c in checks})[:6]) or "no RoCE port in the inventory's map"
    return make_rung(
        "cabling", status, reason=reason, value=len(failed), threshold=0, unit="links off the map",
        bad_hosts=sorted(bad), checks=checks, notes=notes, links=links,
    )  # fmt: skip


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_rung": make_rung,
    "cluster_validate_console_line": console_line,
    "cluster_validate_reachability": evaluate_reachability,
    "cluster_validate_path_mtu": evaluate_path_mtu,
    "cluster_validate_node_health": evaluate_node_health,
    "cluster_validate_nic_counters": evaluate_nic_counters,
    "cluster_validate_pairs": evaluate_pairs,
    "cluster_validate_latency": evaluate_latency,
    "cluster_validate_allreduce": evaluate_allreduce,
    "cluster_validate_collectives": evaluate_collectives,
    "cluster_validate_nccl_tests": evaluate_nccl_tests,
    "cluster_validate_collective_floors": collective_floors,
    "cluster_validate_switch": evaluate_switch,
    "cluster_validate_switch_port_hosts": switch_port_hosts,
    "cluster_validate_cabling": evaluate_cabling,
    "cluster_validate_stress_class": stress_class,
    "cluster_validate_train": evaluate_train,
    "cluster_validate_host_errors": evaluate_host_errors,
    "cluster_validate_slurm": evaluate_slurm,
    "cluster_validate_slurm_topology": slurm_topology,
}
