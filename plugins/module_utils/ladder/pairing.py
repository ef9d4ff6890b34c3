"""Who meets whom in the ladder's pair tests: N-1 rounds of disjoint pairs, each rail against the peer's rail,
the ping targets, and the suspects behind failing pairs.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

import json
from collections import Counter

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules


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


def fabric_rails(interfaces):
    """Every fabric interface of a node (cluster_fabric_interfaces; the first is the node's fabric interface, the
    others the rails of a node with a NIC per GPU): [{"interface", "address" (its IPv4, "" if none), "mtu"}]."""
    return [
        {"interface": i["name"], "address": nccl_rules.first_ipv4(i.get("addresses")), "mtu": int(i.get("mtu") or 1500)}
        for i in interfaces or []
    ]


def rail_suspects(bad):
    """suspects() on each rail apart (bad: [(a, b, rail)]): a node with one slow rail is named with that rail,
    not blamed with every node it shares a failing pair with on another rail. Returns {host: [rails]}."""
    out = {}
    for rail in sorted({r for _, _, r in bad}, key=str):
        for host in suspects([(a, b) for a, b, r in bad if r == rail]):
            out.setdefault(host, []).append(rail)
    return dict(sorted(out.items()))


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


def peer_host(label):
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


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_round_robin": round_robin,
    "cluster_validate_round_roles": round_roles,
    "cluster_validate_ping_targets": ping_targets,
    "cluster_validate_fabric_rails": fabric_rails,
    "cluster_validate_pair_rails": pair_rails,
    "cluster_validate_pair_rail_args": pair_rail_args,
    "cluster_validate_rail_gaps": rail_gaps,
}
