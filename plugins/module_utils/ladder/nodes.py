"""The rungs about each node: reachability and path MTU over every rail, node health (rdma-node-check and the
fleet's software stack), and the NIC port counters around the stress rungs.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.pairing import peer_host
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import check, good_hosts, rung_from_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.units import slowest


def evaluate_reachability(results, hosts):
    """results: {host: {"unreachable": bool, "msg": str, "pings": [{peer, ok, detail}]}} -> rung."""
    checks = []
    for host in hosts:
        res = results.get(host) or {"unreachable": True, "msg": "no result"}
        if res.get("unreachable"):
            checks.append(check(host, "ssh", "fail", f"unreachable over the management network: {res.get('msg', '')}"))
            continue
        checks.append(check(host, "ssh", "pass", "reachable"))
        for ping in res.get("pings") or []:
            ok = ping.get("ok")
            checks.append(
                check(
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
    return rung_from_checks("reachability", checks, value=ok, threshold=len(checks), unit="checks", bad_pairs=bad_pairs)


def evaluate_path_mtu(results, hosts):
    """results: {host: {"pings": [{peer, ok, detail, mtu}]}} -> rung (DF pings at the configured MTU of each
    rail: the smaller of its two ends)."""
    checks, mtus = [], []
    for host in hosts:
        res = results.get(host) or {}
        if res.get("error"):
            checks.append(check(host, "path mtu", "fail", res["error"]))
        for ping in res.get("pings") or []:
            mtu = ping.get("mtu")
            mtus += [mtu] if mtu else []
            checks.append(
                check(
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
    return rung_from_checks(
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
            checks.append(check(host, "probe", "fail", f"no node check result ({why})"))
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
                odd.append(check(host, f"stack {key}", status, f"{key}: no majority ({values})", mine.get(key)))
            elif mine.get(key) != majority[key]:
                runs = sum(s.get(key) == majority[key] for s in stacks.values())
                detail = f"{key} {mine.get(key) or 'none'}, {runs} of {len(stacks)} hosts run {majority[key] or 'none'}"
                odd.append(check(host, f"stack {key}", status, detail, mine.get(key), majority[key]))
        checks += odd or [check(host, "stack consistency", "pass", f"the fleet's {len(keys)} versions")]
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
            checks.append(check(host, c["check"], c["status"], c["detail"], c.get("value"), c.get("threshold"),
                                 c.get("unit")))  # fmt: skip
            if c["status"] == "warn":
                notes.append(f"{host}: warning: {c['detail']}")
        notes += [f"{host}: {n}" for n in res.get("notes") or []]
        rates[host] = res.get("rail_speeds") or {}
    odd = _stack_checks(stacks, "pass" if stack_mismatch == "report" else stack_mismatch)
    checks += odd
    notes += [f"{c['host']}: warning: {c['detail']}" for c in odd if c["status"] == "warn"]
    good = good_hosts(hosts, checks)
    skipped = sorted({c["detail"].split(": ", 1)[-1] for c in checks if c["status"] == "skip"})
    return rung_from_checks(
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
        checks += [check(host, c["check"], c["status"], c["detail"]) for c in res["checks"]]
        counters = res.get("counters") or {}
        if counters.get("deltas"):
            deltas[host] = counters["deltas"]
        if any(counters.get("pause", {}).values()):
            pause[host] = counters["pause"]
    grew = [c for c in checks if c["status"] == "fail"]
    return rung_from_checks(
        "nic_counters",
        checks,
        value=len(grew),
        threshold=0,
        unit="hosts",
        pass_reason="no NIC error counter grew across the stress rungs",
        deltas=deltas,
        pause=pause,
    )


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_reachability": evaluate_reachability,
    "cluster_validate_path_mtu": evaluate_path_mtu,
    "cluster_validate_node_health": evaluate_node_health,
    "cluster_validate_nic_counters": evaluate_nic_counters,
}
