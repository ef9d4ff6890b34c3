"""The collective rungs: all-reduce (with the transport NCCL's log proves), all-gather, reduce-scatter and
all-to-all from files/probe.py, their floors and the bisection that names a slow node, and nccl-tests' own binaries.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.nccl import parse_nccl_log
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers as validate_parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import check, make_rung, rung_from_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.units import NO_SPEED, threshold_for

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
    checks = [check(h, *c) for h in sorted(nccl) for c in nccl_rules.transport_checks(nccl[h], rdma[h], require_gdr)]
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
        named = [check(h, "allreduce result", "fail", f"wrong result at {w} bytes") for h, w in wrong_on.items()]
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
            checks += [check(h, f"{name} result", "fail", f"wrong result at {w} bytes") for h, w in wrong_on.items()]
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
                checks.append(check(host, f"nccl-tests {coll}", "fail", f"rc {res.get('rc')}: {last[:200]}"))
                continue
            wrong = sum(r["wrong"] for r in parsed["rows"])
            if wrong:
                checks.append(check(host, f"nccl-tests {coll}", "fail", f"{wrong} wrong value(s) (#wrong)"))
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
            checks.append(check(host, f"nccl-tests {coll}", status, detail, value=value,
                                 threshold=floor_gbps or None, unit="Gb/s"))  # fmt: skip
    values = [c["value"] for c in checks if c["value"] is not None]
    held = "" if floor_gbps else "; no floor set, each node held to the best"
    rung = rung_from_checks(
        "nccl_tests", checks, value=min(values) if values else None, threshold=floor_gbps or None, unit="Gb/s",
        pass_reason=f"nccl-tests on {len(ran)} node(s){held}",
    )  # fmt: skip
    rung["busbw"] = busbw
    return rung


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_allreduce": evaluate_allreduce,
    "cluster_validate_collectives": evaluate_collectives,
    "cluster_validate_nccl_tests": evaluate_nccl_tests,
    "cluster_validate_collective_floors": collective_floors,
}
