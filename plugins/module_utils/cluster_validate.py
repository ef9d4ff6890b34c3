"""The validation ladder's logic: parsers of the tools' output, thresholds, pairing and the verdict.

Everything the cluster_validate role decides lives here and is unit-tested on recorded outputs
(tests/fixtures/validate/). The role's tasks only run the tools and hand their raw output to these filters.

Units: bandwidth is reported in Gb/s (10^9 bit/s) everywhere. perftest's "MB/sec" is MiB/s (perftest divides
by 0x100000); its "Gb/sec" (--report_gbits) is 10^9 bit/s. iperf3 reports bit/s. Latency is in microseconds.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check
from ansible_collections.rdma_llm.cluster.plugins.module_utils import rdma_stack_nccl as nccl_rules

DOCUMENTATION = """
name: cluster_validate
short_description: Parsers, thresholds, round-robin pairing and the verdict of the validation ladder
description: See roles/cluster_validate/README.md.
"""


roce_gid_of = nccl_rules.roce_gid_of
parse_nccl_log = nccl_rules.parse_nccl_log
# The node's own parsers and units live with the node checks (rdma-node-check runs them on the node).
link_rate_gbps = node_check.link_rate_gbps
required_ib_mtu = node_check.required_ib_mtu
parse_ibv_devinfo = node_check.parse_ibv_devinfo
parse_sminfo = node_check.parse_sminfo

SCHEMA = "rdma-llm-cluster/validate-verdict/1"
STATUSES = ("pass", "fail", "skip")
NO_SPEED = "no threshold: link speed unknown"


# ---------------------------------------------------------------------------------------------- rungs


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


def _rung_from_checks(name, checks, value=None, threshold=None, unit=None, skip_reason=None, **extra):
    """Rung status from its checks: any fail fails; all skip skips; else pass."""
    failed = [c for c in checks if c["status"] == "fail"]
    if failed:
        status = "fail"
        reason = "; ".join(f"{c['host']}: {c['detail']}" for c in failed[:6])
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


# ---------------------------------------------------------------------------------------------- units


def mib_per_s_to_gbps(mib_per_s):
    """perftest MB/sec (MiB/s) -> Gb/s."""
    return float(mib_per_s) * 1048576 * 8 / 1e9


def threshold_for(rate_gbps, fraction):
    """fraction x line rate, or None when the line rate is unknown (never a made-up number)."""
    if rate_gbps is None:
        return None
    return round(float(rate_gbps) * float(fraction), 3)


def busbw(algbw, world):
    """nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n."""
    n = int(world)
    if n < 1:
        raise ValueError("world size must be >= 1")
    return float(algbw) * 2 * (n - 1) / n


# ---------------------------------------------------------------------------------------------- pairing


def round_robin(hosts):
    """Disjoint pairs in rounds (circle method): every pair exactly once.

    N even: N-1 rounds of N/2 pairs; N odd: N rounds, one host sits out each round (a bye).
    """
    hosts = list(hosts)
    if len(hosts) < 2:
        return []
    ring = hosts + ([None] if len(hosts) % 2 else [])
    n = len(ring)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = ring[i], ring[n - 1 - i]
            if a is not None and b is not None:
                pairs.append(sorted((a, b), key=hosts.index))
        rounds.append(pairs)
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def round_roles(rounds, host):
    """Per round, what `host` does: {"role": server|client|bye, "peer": name|None, "pair": [a, b]|None}."""
    out = []
    for pairs in rounds:
        entry = {"role": "bye", "peer": None, "pair": None}
        for a, b in pairs:
            if host == a:
                entry = {"role": "client", "peer": b, "pair": [a, b]}
            elif host == b:
                entry = {"role": "server", "peer": a, "pair": [a, b]}
        out.append(entry)
    return out


def suspects(bad_pairs, hosts=None):
    """Hosts to blame for failing pairs: those in the most failing pairs when they are in at least two.

    One failing pair names both ends (a single link cannot tell which side is bad).
    """
    counts = Counter(h for pair in bad_pairs for h in pair)
    if not counts:
        return []
    top = max(counts.values())
    if top < 2:
        return sorted(counts)
    return sorted(h for h, c in counts.items() if c == top)


# ---------------------------------------------------------------------------------------------- parsers


def parse_perftest_bw(text):
    """ib_write_bw / ib_send_bw / ib_read_bw report -> {bytes, iterations, peak, average, unit, gbps, ...}.

    None when the output has no result line (the test did not run).
    """
    text = str(text)
    header = re.search(r"#bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+BW average\[(?:MB|Gb)/sec\]", text)
    if not header:
        return None
    unit = header.group(1)
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", text[header.end() :], re.M)
    if not rows:
        return None
    size, iters, peak, avg, rate = rows[-1]
    to_gbps = mib_per_s_to_gbps if unit == "MB" else float
    out = {
        "bytes": int(size),
        "iterations": int(iters),
        "bw_peak": float(peak),
        "bw_average": float(avg),
        "unit": f"{unit}/sec",
        "msg_rate_mpps": float(rate),
        "gbps": round(to_gbps(avg), 3),
    }
    for field, pattern in (
        ("device", r"Device\s*:\s*(\S+)"),
        ("link_type", r"Link type\s*:\s*(\S+)"),
        ("mtu", r"Mtu\s*:\s*(\d+)"),
        ("gid_index", r"GID index\s*:\s*(\d+)"),
    ):
        match = re.search(pattern, text)
        if match:
            out[field] = int(match.group(1)) if field in ("mtu", "gid_index") else match.group(1)
    return out


def parse_perftest_lat(text):
    """ib_write_lat / ib_send_lat report -> {bytes, iterations, t_min, t_max, t_typical, t_avg, t_stdev, p99, p999}."""
    text = str(text)
    header = re.search(r"#bytes\s+#iterations\s+t_min\[usec\].*$", text, re.M)
    if not header:
        return None
    cols = ["t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p999"]
    for line in text[header.end() :].splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].isdigit() and parts[1].isdigit():
            values = [float(v) for v in parts[2:]]
            out = {"bytes": int(parts[0]), "iterations": int(parts[1]), "unit": "usec"}
            out.update(dict(zip(cols, values, strict=False)))
            return out
    return None


def parse_iperf3(text):
    """`iperf3 -J` client output -> {gbps (received), sent_gbps, retransmits, seconds} or {error}."""
    try:
        data = json.loads(str(text))
    except ValueError:
        return {"error": f"iperf3 printed no JSON: {str(text).strip()[:200]}"}
    if data.get("error"):
        return {"error": f"iperf3: {data['error']}"}
    end = data.get("end") or {}
    received = end.get("sum_received") or {}
    sent = end.get("sum_sent") or {}
    if "bits_per_second" not in received:
        return {"error": "iperf3 reported no result"}
    return {
        "gbps": round(received["bits_per_second"] / 1e9, 3),
        "sent_gbps": round(sent.get("bits_per_second", 0) / 1e9, 3),
        "retransmits": sent.get("retransmits"),
        "seconds": round(received.get("seconds", 0.0), 2),
    }


def parse_nxos_pfc(text):
    """`show interface priority-flow-control` (NX-OS) -> {port: {mode, oper, bitmap, rx_ppp, tx_ppp}}."""
    ports = {}
    row = re.compile(
        r"^(Ethernet\S+|port-channel\S+)\s+(On|Off|Auto)\s+(On|Off)\s*(?:\(\s*(\w+)\s*\))?\s+(\d+)\s+(\d+)"
    )
    for line in str(text).splitlines():
        match = row.match(line.strip())
        if match:
            ports[match.group(1)] = {
                "mode": match.group(2),
                "oper": match.group(3),
                "bitmap": int(match.group(4), 16) if match.group(4) else 0,
                "rx_ppp": int(match.group(5)),
                "tx_ppp": int(match.group(6)),
            }
    return ports


def _label(text):
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def parse_nxos_queuing(text):
    """`show queuing interface <if>` (Nexus 9000) -> {port: {"groups": {qos_group: {counter: n}}, "ingress": {...}}}.

    Reads the per-QoS-group boxes (`| Tx Pkts | unicast | multicast |`), summing unicast and multicast, and the
    ingress lines that carry counters (`Ingress MMU Drop Pkts`, `Ingress Overflow Drop Pkts`, PFC pause counts).
    """
    ports = {}
    port = group = None
    for raw in str(text).splitlines():
        line = raw.strip()
        match = re.match(r"^(?:Egress|Ingress) Queuing for (\S+)", line) or re.match(
            r"^Interface\s*:?\s*(Ethernet\S+)", line
        )
        if match:
            port = ports.setdefault(match.group(1), {"groups": {}, "ingress": {}})
            group = None
            continue
        if port is None:
            continue
        match = re.match(r"^\|\s*QOS GROUP (\d+)\s*\|$", line)
        if match:
            group = port["groups"].setdefault(int(match.group(1)), {})
            continue
        cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []
        if group is not None and len(cells) >= 2 and cells[0] and all(re.fullmatch(r"\d+", c) for c in cells[1:] if c):
            numbers = [int(c) for c in cells[1:] if c]
            if numbers:
                group[_label(cells[0])] = sum(numbers)
            continue
        match = re.match(r"^([A-Za-z][A-Za-z ]*?(?:Drop|Pause)[A-Za-z ]*?)\s*:?\s+(\d+)\s*$", line)
        if match:
            port["ingress"][_label(match.group(1))] = int(match.group(2))
    return ports


# ---------------------------------------------------------------------------------------------- rungs: hosts


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
            tuple(sorted((c["host"], _peer_host(c["check"].split()[-1]))))
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
            tuple(sorted((c["host"], _peer_host(c["check"].split()[-1]))))
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


def evaluate_node_health(results, hosts):
    """Node health: each host's rdma-node-check result (module rdma_llm.cluster.node_check: the node's checks and
    their verdicts, the same rules a scheduler's health check runs), gathered into the rung.

    results: {host: node_check result | None (the module failed)}; hosts: the nodes of the rung. Each check gets
    its host; a warning passes and is noted. Returns the rung with `speeds` (host -> its slowest link) and
    `rail_speeds` (host -> rail -> Gb/s: the interface, or `hca:port` on InfiniBand)."""
    checks, notes, rates = [], [], {}
    for host in sorted(hosts):
        res = results.get(host)
        if not res or not res.get("checks"):
            why = (res or {}).get("reason") or "host failed or unreachable"
            checks.append(_check(host, "probe", "fail", f"no node check result ({why})"))
            continue
        for c in res["checks"]:
            checks.append(_check(host, c["check"], c["status"], c["detail"], c.get("value"), c.get("threshold"),
                                 c.get("unit")))  # fmt: skip
            if c["status"] == "warn":
                notes.append(f"{host}: warning: {c['detail']}")
        notes += [f"{host}: {n}" for n in res.get("notes") or []]
        rates[host] = res.get("rail_speeds") or {}
    good = [h for h in hosts if not any(c["host"] == h and c["status"] == "fail" for c in checks)]
    skipped = sorted({c["detail"].split(": ", 1)[-1] for c in checks if c["status"] == "skip"})
    return _rung_from_checks(
        "node_health",
        checks,
        value=len(good),
        threshold=len(hosts),
        unit="hosts",
        pass_reason=("skipped: " + "; ".join(skipped)) if skipped else None,
        notes=notes,
        speeds={h: _slowest(v) for h, v in rates.items()},
        rail_speeds=rates,
    )


def evaluate_nic_counters(results, hosts):
    """The NIC port counters around the stress rungs: each host's rdma-node-check `--only counters` after the
    all-reduce, against the reading its node_health run kept (the ladder's state dir). An error counter that grew
    fails, naming host, device, port and counter; the mlx5 congestion counters and the no-drop priority's pause
    counters are reported (`deltas`, `pause`)."""
    checks, deltas, pause = [], {}, {}
    for host in sorted(hosts):
        res = results.get(host)
        if not res or not res.get("checks"):
            why = (res or {}).get("reason") or "host failed or unreachable"
            checks.append(_check(host, "probe", "fail", f"no node check result ({why})"))
            continue
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


def _slowest(rails):
    """A host's slowest known link ({rail: Gb/s | None} -> Gb/s | None): what a link of unknown rate is held to."""
    return min((r for r in rails.values() if r is not None), default=None)


def fabric_rails(interfaces):
    """Every fabric interface of a node (cluster_fabric_interfaces; the first is the node's fabric interface, the
    others the rails of a node with a NIC per GPU): [{"interface", "address" (its IPv4, "" if none), "mtu"}]."""
    return [
        {"interface": i["name"], "address": nccl_rules.first_ipv4(i.get("addresses")), "mtu": int(i.get("mtu") or 1500)}
        for i in interfaces or []
    ]


# ---------------------------------------------------------------------------------------------- rungs: traffic


def _rail_suspects(bad):
    """suspects() on each rail apart (bad: [(a, b, rail)]): a node with one slow rail is named with that rail,
    not blamed with every node it shares a failing pair with on another rail. Returns {host: [rails]}."""
    out = {}
    for rail in sorted({r for _, _, r in bad}, key=str):
        for host in suspects([(a, b) for a, b, r in bad if r == rail]):
            out.setdefault(host, []).append(rail)
    return dict(sorted(out.items()))


def _rail_label(multi, rail):
    return f" {rail}" if multi and rail else ""


def _several_rails(measurements):
    """Whether the pairs were measured on more than one rail (then each check and suspect names its rail)."""
    return len({m.get("rail") for m in measurements}) > 1


def _with_suspects(rung, bad):
    """The pair rung's suspects (bad: [(a, b, rail)] that failed): bad_rails per host, and those hosts."""
    rung["bad_rails"] = _rail_suspects(bad)
    rung["bad_hosts"] = sorted(rung["bad_rails"])
    return rung


def _named_suspects(rung, multi):
    return ", ".join(
        h + (f" ({', '.join(map(str, rung['bad_rails'][h]))})" if multi else "") for h in rung["bad_hosts"]
    )


def _rail_rate(host, rail, rail_speeds):
    """A host's line rate on a rail: the rail's own where node_health knows it, else the host's slowest link."""
    own = (rail_speeds or {}).get(host) or {}
    return own[rail] if rail in own else _slowest(own)


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
        rates = [_rail_rate(a, rail, rail_speeds), _rail_rate(b, rail, rail_speeds)]
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


def evaluate_allreduce(outputs, speeds, fraction=0.7, world=None, expect=None, require_gdr=True):
    """All-reduce busbw over a size sweep (files/probe.py allreduce on every node; rank 0 reports).

    outputs: {host: parsed JSON line|{"error"}}. Threshold: fraction x the slowest link's line rate, on the
    largest size; none when a link speed is unknown. On NCCL (GPUs), each node's `nccl_log` proves the transport:
    RDMA where NCCL was given an HCA (`nccl_ib_hca`) or `expect` ({host: {"devices"}}, node_health's
    expectations) wants RDMA devices, and there GPUDirect RDMA (a failure unless `require_gdr` is false).
    """
    failed = {
        h: o.get("error") or "no result" for h, o in outputs.items() if not o or o.get("error") or not o.get("ok")
    }
    nccl = {h: parse_nccl_log(o["nccl_log"]) for h, o in outputs.items() if o and o.get("nccl_log") is not None}
    rdma = {h: bool(outputs[h].get("nccl_ib_hca") or (expect or {}).get(h, {}).get("devices")) for h in nccl}
    checks = [_check(h, *c) for h in sorted(nccl) for c in nccl_rules.transport_checks(nccl[h], rdma[h], require_gdr)]
    transport = {h: {k: v for k, v in p.items() if k != "warnings"} for h, p in nccl.items()}
    report = next((o for o in outputs.values() if o and o.get("rank") == 0 and o.get("results")), None)
    if failed or report is None:
        reason = "; ".join(f"{h}: {e}" for h, e in sorted(failed.items())) or "rank 0 reported nothing"
        bad = [c for c in checks if c["status"] == "fail"]
        reason += "".join(f"; {c['host']}: {c['detail']}" for c in bad)
        return make_rung(
            "allreduce", "fail", reason=reason, unit="Gb/s", bad_hosts=sorted(set(failed) | {c["host"] for c in bad}),
            checks=checks, transport=transport,
        )  # fmt: skip
    results = report["results"]
    # Every rank checks its own result (each element must be n(n+1)/2): a rank whose result is wrong is named.
    wrong_on = {h: o["wrong"] for h, o in outputs.items() if o and o.get("wrong")}
    wrong = sorted({r["bytes"] for r in results if not r.get("correct")} | {b for w in wrong_on.values() for b in w})
    largest = max(results, key=lambda r: r["bytes"])
    rates = list(speeds.values())
    limit = threshold_for(min(rates), fraction) if rates and None not in rates else None
    value = largest["busbw_gbps"]
    bad = [c for c in checks if c["status"] == "fail"]
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
        reason = f"busbw {value:g} Gb/s < {limit:g} ({fraction:.0%} of the slowest link)"
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
        bad_hosts=sorted({c["host"] for c in bad}),
        checks=checks,
        transport=transport,
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


def switch_counters(pfc_text, queuing_text):
    """Counters of interest from one read of the switch: PFC pauses, drops and ECN marks per port/qos-group."""
    pfc = parse_nxos_pfc(pfc_text)
    queuing = parse_nxos_queuing(queuing_text) if queuing_text else {}
    ports = {}
    for port, row in pfc.items():
        ports.setdefault(port, {})["pause_rx"] = row["rx_ppp"]
        ports[port]["pause_tx"] = row["tx_ppp"]
    for port, data in queuing.items():
        entry = ports.setdefault(port, {})
        for group, counters in data["groups"].items():
            entry[f"drops_q{group}"] = sum(v for k, v in counters.items() if "drop_pkts" in k)
            entry[f"ecn_q{group}"] = sum(v for k, v in counters.items() if "ecn" in k)
        # Per-port ingress drops (MMU, overflow): a lossless class that drops shows here first.
        entry["ingress_drops"] = sum(v for k, v in data["ingress"].items() if "drop" in k)
    return ports


def switch_counters_of(outputs):
    """switch_counters() of nxos_command's stdout list [pfc text, queuing text of each port ...]."""
    outputs = list(outputs or [])
    return switch_counters(outputs[0] if outputs else "", "\n".join(outputs[1:]))


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


def evaluate_switch(before, after, nodrop_group, port_hosts=None, skip_reason=None, stress=None):
    """Switch rung: drops in the no-drop class must not grow across the stress rungs; pauses and ECN marks reported.

    before/after: {switch: switch_counters(...)}; port_hosts: {"switch port": host} to name the host; stress:
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
            who = port_hosts.get(port, "")
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

    report: the launch's report.json (plugins/module_utils/train_report.py), its `results` the hosts' result.json.
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


# ---------------------------------------------------------------------------------------------- verdict


def bandwidth_matrix(hosts, pairs):
    """Symmetric host x host matrix of Gb/s (None where not measured) and the failing cells. A pair measured on
    several rails shows its slowest rail (None if one has no number) and fails if any rail failed."""
    index = {h: i for i, h in enumerate(hosts)}
    values = [[None] * len(hosts) for _ in hosts]
    cells = {}
    for p in pairs:
        a, b = p["pair"]
        if a in index and b in index:
            cells.setdefault((a, b), []).append(p)
    failed = []
    for (a, b), rails in cells.items():
        gbps = [r.get("gbps") for r in rails]
        values[index[a]][index[b]] = values[index[b]][index[a]] = None if None in gbps else min(gbps)
        if any(r.get("status") == "fail" for r in rails):
            failed.append([a, b])
    rails = sorted({str(p["rail"]) for p in pairs if p.get("rail")})
    return {"hosts": list(hosts), "unit": "Gb/s", "values": values, "failed": failed, "rails": rails}


def verdict(rungs, hosts, cluster="", started=None, finished=None, keep_going=False, left_out=None):
    """The ladder's verdict: overall status, the first failing rung, the hosts and pairs to blame.

    left_out: {host: why} of the hosts the rungs after `inventory` did not run on (unreachable over SSH), or
    after the rung they left the play in (mark_lost).
    """
    first_fail = next((r["name"] for r in rungs if r["status"] == "fail"), None)
    bad_pairs = sorted({tuple(p) for r in rungs for p in r.get("bad_pairs") or []})
    bad_hosts = sorted({h for r in rungs for h in r.get("bad_hosts") or [] if h in hosts})
    pair_rung = next((r for r in rungs if r.get("pairs")), None)
    return {
        "schema": SCHEMA,
        "cluster": cluster,
        "started": started,
        "finished": finished,
        "hosts": list(hosts),
        "status": "fail" if first_fail else "pass",
        "first_failure": first_fail,
        "stopped_early": bool(first_fail) and not keep_going,
        "bad_hosts": bad_hosts,
        "bad_pairs": [list(p) for p in bad_pairs],
        "left_out": dict(sorted((left_out or {}).items())),
        "rungs": rungs,
        "matrix": bandwidth_matrix(hosts, pair_rung["pairs"]) if pair_rung else None,
    }


def skipped_after(names, failed_at):
    """Rungs not run because the ladder stopped at `failed_at`."""
    return [make_rung(n, "skip", reason=f"not run: the ladder stopped at the failing rung {failed_at}") for n in names]


# ---------------------------------------------------------------------------------------------- plumbing


def _addressed(rails):
    """The fabric rails (fabric_rails) that carry an IPv4 address: the ones a probe can reach or leave from."""
    return [r for r in rails or [] if r.get("address")]


def ping_targets(rails, me, df=False):
    """files/probe.py ping --targets: every other node on every rail both have, from this node's address on that
    rail (rails: {host: fabric_rails}; rail i meets the peer's rail i, as a rail-optimised fabric is cabled).
    The first rail is named by the peer alone, the others `peer/interface`. With `df`, each probe is as large as
    the smaller MTU of the two interfaces allows (IPv4 + ICMP headers: 28 bytes)."""
    mine = _addressed(rails.get(me))
    out = []
    for host in sorted(h for h in rails if h != me):
        theirs = _addressed(rails[host])
        for i, (local, peer) in enumerate(zip(mine, theirs, strict=False)):
            target = {"peer": host if i == 0 else f"{host}/{peer['interface']}", "address": peer["address"]}
            if i:  # the first rail leaves as routed; another rail's probe leaves from that rail's address
                target["source"] = local["address"]
            if df:
                target["size"] = min(int(local["mtu"]), int(peer["mtu"])) - 28
            out.append(target)
    return json.dumps(out)


def _peer_host(label):
    """The node of a ping target's label (`node` or `node/interface`)."""
    return label.split("/", 1)[0]


def pair_rails(endpoint, rails, qos_env=None):
    """The rails a node's pair tests run on: [{"name", "address", "device", "ib_port", "gid_index", "tclass" | "sl"}].

    With an RDMA endpoint (node_health: rdma_stack_endpoint) its rails, the path NCCL takes: on RoCE each rail's
    interface and address; on InfiniBand each ACTIVE port, reached over the first fabric address (perftest
    exchanges its connection data over TCP, then uses the port's LID). The stress traffic is the lossless class's:
    each RDMA rail carries what the host's QoS fact gives NCCL (qos_env: rdma_stack_qos_env), the RoCE traffic
    class (NCCL_IB_TC, for perftest's --tclass) or the InfiniBand service level (NCCL_IB_SL, for --sl). Without an
    endpoint (TCP, iperf3): every fabric interface with an IPv4 address. rails: fabric_rails of the node."""
    addressed = _addressed(rails)
    first = addressed[0]["address"] if addressed else ""
    if not endpoint or not endpoint.get("hca"):
        return [{"name": r["interface"], "address": r["address"]} for r in addressed]
    by_name = {r["interface"]: r["address"] for r in addressed}
    env = qos_env or {}
    qos = {k: int(env[n]) for k, n in (("tclass", "NCCL_IB_TC"), ("sl", "NCCL_IB_SL")) if env.get(n) is not None}
    return [
        {
            "name": r.get("interface") or f"{r['hca']}:{r['port']}",
            "address": by_name.get(r.get("interface"), first),
            "device": r["hca"],
            "ib_port": r["port"],
            "gid_index": r.get("gid_index"),
            **qos,
        }
        for r in endpoint.get("rails") or [endpoint | {"interface": None}]
    ]


def pair_rail_args(mine, theirs, mode):
    """files/probe.py pair --rails for one end of a pair: this node's rail i against the peer's rail i, for the
    rails both have (rail_gaps fails the others). The client reaches the peer's address on the rail; both ends
    bind their own (iperf3 -B), so each test runs on its rail whatever the routes say; each end's perftest sends in
    its own host's traffic class."""
    out = []
    for local, peer in zip(mine or [], theirs or [], strict=False):
        keys = ("name", "device", "ib_port", "gid_index", "tclass", "sl")
        rail = {k: local[k] for k in keys if local.get(k) is not None}
        rail["local"] = local["address"]
        if mode == "client":
            rail["peer"] = peer["address"]
        out.append(rail)
    return json.dumps(out)


def rail_gaps(rounds, rails, tools):
    """A failed measurement for every rail one end of a pair has and the other lacks (the pair tests meet rail i
    with rail i, so it cannot be measured): said, not left out. rounds: round_robin; rails: {host: pair_rails}."""
    out = []
    for a, b in (pair for pairs in rounds or [] for pair in pairs):
        mine, theirs = rails.get(a) or [], rails.get(b) or []
        short, long_ = (b, mine) if len(mine) > len(theirs) else (a, theirs)
        for i in range(min(len(mine), len(theirs)), len(long_)):
            error = (
                f"{short} has no rail {i + 1} ({long_[i]['name']}): {len(mine)} rail(s) on {a}, {len(theirs)} on {b}"
            )
            out += [{"pair": [a, b], "rail": long_[i]["name"], "tool": tool, "gbps": None, "usec": None,
                     "error": error} for tool in tools]  # fmt: skip
    return out


def measurements(raw, servers=None):
    """Client results of files/probe.py pair -> [{"pair", "rail", "tool", "gbps"|"usec", "error"}], one per
    rail (parsed per tool).

    raw: [{"pair", "tool", "out": {"tool", "rails": [{"rail", "rc", "output"}]}}]; servers: {"<tool> <a> <b>":
    the server end's result}, to say why a client could not connect.
    """
    out = []
    for item in raw or []:
        client = item.get("out") or {}
        server = (servers or {}).get(f"{item.get('tool')} {' '.join(item['pair'])}") or {}
        server_rails = {r.get("rail"): r for r in server.get("rails") or []}
        tool = client.get("tool") or item.get("tool")
        for res in client.get("rails") or [{"rail": None, "rc": None, "output": ""}]:
            out.append(_measurement(list(item["pair"]), tool, res, server_rails.get(res.get("rail")) or {}))
    return out


def _measurement(pair, tool, res, server):
    """One rail of one pair: the client's output parsed, or why there is no number."""
    text = res.get("output") or ""
    entry = {"pair": pair, "rail": res.get("rail"), "tool": tool, "gbps": None, "usec": None, "error": None}
    if tool == "iperf3":
        parsed = parse_iperf3(text)
        entry["gbps"] = parsed.get("gbps")
        entry["error"] = parsed.get("error")
    elif tool == "ib_write_bw":
        parsed = parse_perftest_bw(text)
        entry["gbps"] = parsed["gbps"] if parsed else None
    else:
        parsed = parse_perftest_lat(text)
        entry["usec"] = parsed["t_typical"] if parsed else None
    if parsed is None or (entry["gbps"] is None and entry["usec"] is None and not entry["error"]):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        entry["error"] = f"{tool} rc {res.get('rc')}: {lines[-1].strip() if lines else 'no output'}"[:300]
    if entry["error"] and server.get("rc"):
        lines = [line for line in (server.get("output") or "").strip().splitlines() if line.strip()]
        entry["error"] += f"; server {pair[1]}: {lines[-1].strip() if lines else 'rc ' + str(server['rc'])}"
    return entry


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


# Lines of an SSH error that say nothing about the cause, and the wrappers Ansible puts around the cause.
_SSH_NOISE = re.compile(r"^(warning: permanently added|debug\d*:|openssh_|mux_client_|muxclient|control ?socket|"
                        r"connection to \S+ closed|\s*$)", re.I)  # fmt: skip
_SSH_WRAPPERS = (
    re.compile(r"^task failed:\s*", re.I),
    re.compile(r"^failed to connect to the host via \w+:\s*", re.I),
    re.compile(r"^data could not be sent to remote host \S+\. make sure this host can be reached over ssh:\s*", re.I),
)
_SECRET = re.compile(r"\b(password|passwd|passphrase|secret|token)=\S+", re.I)


def unreachable_reason(msg, limit=160):
    """Ansible's unreachable message shortened to its cause, one line (`ssh: connect to host 10.88.0.13 port 22:
    No route to host`): wrappers and SSH chatter dropped, `password=...` values masked, at most `limit` chars."""
    lines = [line.strip() for line in str(msg or "").replace("\r", "\n").splitlines()]
    lines = [line for line in lines if line and not _SSH_NOISE.match(line)] or ["no answer"]
    text = " ".join(lines[-1].split())
    for wrapper in _SSH_WRAPPERS:
        text = wrapper.sub("", text)
    text = _SECRET.sub(lambda m: m.group(1) + "=***", text) or "no answer"
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def unreachable_hosts(results):
    """{host: registered ansible.builtin.ping result} -> {host: why} of the hosts that did not answer `pong`.

    A host with no result (dropped before the ping) or a failed ping counts as not answering: a host the ladder
    cannot reach is named, never silently left out.
    """
    out = {}
    for host, res in (results or {}).items():
        res = res or {}
        if res.get("ping") == "pong" and not res.get("unreachable") and not res.get("failed"):
            continue
        out[host] = unreachable_reason(res.get("msg") or ("no answer" if res else "no result (host left the play)"))
    return out


def lost_hosts(results):
    """The looped, delegated ping record.yml sends to each node that left the play during a rung -> {host: why}.

    Ansible drops a node that stops answering over SSH from the play: the rung it happened in never sees its
    results. A node that answers the ping left the play on a failed task instead (a probe's bug, not the
    node's); it is named all the same, never silently left out.
    """
    out = {}
    for res in results or []:
        host = (res or {}).get("item")
        if not host:
            continue
        if res.get("ping") == "pong" and not res.get("unreachable") and not res.get("failed"):
            out[host] = "a task failed on it; it answers over SSH"
        else:
            out[host] = "unreachable over SSH: " + unreachable_reason(res.get("msg") or "no answer")
    return out


def mark_lost(rung, lost):
    """A rung during which nodes left the play fails and names them first, whatever it measured on the rest."""
    if not lost:
        return rung
    names = sorted(lost)
    why = "; ".join(f"{h}: left the play during this rung ({lost[h]})" for h in names)
    return dict(
        rung,
        status="fail",
        lost=names,
        bad_hosts=sorted(set(rung.get("bad_hosts") or []) | set(names)),
        reason=f"{why}; {rung['reason']}" if rung.get("reason") else why,
    )


def note_left_out(rung, left_out, lost_at=None):
    """A rung run without the unreachable hosts says which it left out (its status is about the others).

    lost_at: {host: rung} of the hosts that left the play during an earlier rung (mark_lost); the others did
    not answer at rung `inventory`.
    """
    if not left_out:
        return rung
    names, lost_at = sorted(left_out), lost_at or {}
    at_start = [h for h in names if h not in lost_at]
    notes = [f"left out {', '.join(at_start)} (unreachable over SSH, see inventory)"] if at_start else []
    for where in sorted({lost_at[h] for h in names if h in lost_at}):
        gone = ", ".join(h for h in names if lost_at.get(h) == where)
        notes.append(f"left out {gone} (left the play during {where})")
    note = "; ".join(notes)
    return dict(rung, left_out=names, reason=f"{rung['reason']}; {note}" if rung.get("reason") else note)


def host_json(hostvars_of_host, register):
    """The JSON a probe script printed on one host (its last `{...}` line), or {"error": ...}."""
    res = hostvars_of_host.get(register) if hostvars_of_host else None
    if not res:
        return {"error": "not run (host failed earlier or is unreachable)"}
    if res.get("unreachable"):
        return {"error": f"unreachable: {res.get('msg', '')}"[:300]}
    if res.get("skipped"):
        return {"error": "skipped"}
    lines = [line for line in (res.get("stdout") or "").splitlines() if line.startswith("{")]
    if lines:
        try:
            return json.loads(lines[-1])
        except ValueError:
            pass
    text = (res.get("stderr") or res.get("msg") or "no output").strip().splitlines()
    return {"error": f"rc {res.get('rc')}: {text[-1] if text else ''}"[:300]}


def reach_result(hostvars_of_host):
    """Reachability of one host: its SSH ping and its fabric pings to every peer."""
    ping = hostvars_of_host.get("__cluster_validate_reg_ping") or {}
    if not ping or ping.get("unreachable") or ping.get("failed"):
        return {"unreachable": True, "msg": ping.get("msg", "no result")}
    out = host_json(hostvars_of_host, "__cluster_validate_reg_fabric_ping")
    if out.get("error"):
        return {"unreachable": False, "pings": [{"peer": "-", "ok": False, "detail": out["error"]}]}
    return {"unreachable": False, "pings": out.get("pings") or []}


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_rung": make_rung,
    "cluster_validate_console_line": console_line,
    "cluster_validate_round_robin": round_robin,
    "cluster_validate_round_roles": round_roles,
    "cluster_validate_link_rate": link_rate_gbps,
    "cluster_validate_parse_perftest_bw": parse_perftest_bw,
    "cluster_validate_parse_perftest_lat": parse_perftest_lat,
    "cluster_validate_parse_iperf3": parse_iperf3,
    "cluster_validate_switch_counters": switch_counters,
    "cluster_validate_switch_counters_of": switch_counters_of,
    "cluster_validate_reachability": evaluate_reachability,
    "cluster_validate_path_mtu": evaluate_path_mtu,
    "cluster_validate_node_health": evaluate_node_health,
    "cluster_validate_nic_counters": evaluate_nic_counters,
    "cluster_validate_pairs": evaluate_pairs,
    "cluster_validate_latency": evaluate_latency,
    "cluster_validate_allreduce": evaluate_allreduce,
    "cluster_validate_switch": evaluate_switch,
    "cluster_validate_stress_class": stress_class,
    "cluster_validate_train": evaluate_train,
    "cluster_validate_verdict": verdict,
    "cluster_validate_skipped_after": skipped_after,
    "cluster_validate_ping_targets": ping_targets,
    "cluster_validate_fabric_rails": fabric_rails,
    "cluster_validate_pair_rails": pair_rails,
    "cluster_validate_pair_rail_args": pair_rail_args,
    "cluster_validate_measurements": measurements,
    "cluster_validate_rail_gaps": rail_gaps,
    "cluster_validate_host_errors": evaluate_host_errors,
    "cluster_validate_host_json": host_json,
    "cluster_validate_reach_result": reach_result,
    "cluster_validate_unreachable": unreachable_hosts,
    "cluster_validate_left_out": note_left_out,
    "cluster_validate_lost_hosts": lost_hosts,
    "cluster_validate_mark_lost": mark_lost,
}
