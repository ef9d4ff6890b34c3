"""The pair rungs: bandwidth (iperf3, perftest) and latency of every rail of every pair of nodes, against each
rail's line rate and against the best pair, naming the suspect hosts and rails. Which nodes pair when, over which
rails: ladder/pairing.py.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairing import rail_suspects
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import check, rung_from_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.units import NO_SPEED, rail_rate, threshold_for


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
            check(
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
    rung = rung_from_checks(
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
            check(
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
    rung = rung_from_checks(
        name,
        checks,
        value=max(values) if values else None,
        threshold=ceiling_usec,
        unit="usec",
        bad_pairs=sorted({(a, b) for a, b, _ in bad}),
    )
    return _with_suspects(rung, bad)


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_pairs": evaluate_pairs,
    "cluster_validate_latency": evaluate_latency,
}
