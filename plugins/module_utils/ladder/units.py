"""The ladder's units and thresholds: perftest's MiB/s, a link's threshold, all-reduce bus bandwidth, the
slowest rail.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import units as node_check

# The node's own parsers and units live with the node checks (rdma-node-check runs them on the node).
link_rate_gbps = node_check.link_rate_gbps


NO_SPEED = "no threshold: link speed unknown"


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


def slowest(rails):
    """A host's slowest known link ({rail: Gb/s | None} -> Gb/s | None): what a link of unknown rate is held to."""
    return min((r for r in rails.values() if r is not None), default=None)


def rail_rate(host, rail, rail_speeds):
    """A host's line rate on a rail: the rail's own where node_health knows it, else the host's slowest link."""
    own = (rail_speeds or {}).get(host) or {}
    return own[rail] if rail in own else slowest(own)


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_link_rate": link_rate_gbps,
}
