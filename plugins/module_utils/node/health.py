"""The controller's side of rdma-node-check: its config from the inventory, and the cluster's own baseline from the
last passing validation verdict.

The node_health role renders /etc/rdma-llm/node-check.json with node_health_config(); the validation ladder builds
the same config for its node_health rung, so the ladder and a scheduler's health check judge one node by the same
rules (module_utils/node/) and the same values. Tested in tests/unit/plugins/module_utils/node/test_health.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.nccl import first_ipv4
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import CONFIG_SCHEMA, ConfigError, resolve

DOCUMENTATION = """
name: node_health_config
short_description: rdma-node-check's config from the inventory and the last passing validation verdict
description: See roles/node_health/README.md.
"""


def node_health_config(
    interfaces,
    host="",
    link_layer="ethernet",
    devices=None,
    modules=None,
    gpus=0,
    line_rate_gbps=0,
    thresholds=None,
    baseline=None,
    venv="",
):
    """The config file (schema rdma-llm-cluster/node-check-config/1) from cluster_fabric_interfaces (name, the first
    IPv4 of `addresses`, mtu), the link layer, the expected RDMA devices, kernel modules, GPUs and line rate, the
    thresholds over the command's defaults (every one written out, so the file says what the node is held to),
    the baseline (node_health_baseline) and the training venv whose torch and NCCL the stack check reads.
    RuleError when the command would refuse it."""
    config = {
        "schema": CONFIG_SCHEMA,
        "host": str(host or ""),
        "link_layer": link_layer or "ethernet",
        "interfaces": [
            {"name": i.get("name"), "address": first_ipv4(i.get("addresses")), "mtu": int(i.get("mtu") or 1500)}
            for i in interfaces or []
        ],
        "devices": list(devices or []),
        "modules": list(modules or []),
        "gpus": int(gpus or 0),
        "line_rate_gbps": float(line_rate_gbps or 0),
        "thresholds": dict(thresholds or {}),
        "baseline": dict(baseline or {}),
        "venv": str(venv or ""),
    }
    try:
        resolved = resolve(config)
    except ConfigError as exc:
        raise RuleError(f"{host or 'node'}: {exc}") from exc
    return {"schema": CONFIG_SCHEMA, **{k: v for k, v in resolved.items() if k != "schema"}}


def _rung(verdict, name):
    return next((r for r in verdict.get("rungs") or [] if r.get("name") == name), None)


def _measured(verdict, host):
    """The lowest rate each of the host's rails measured in the pair tests (RDMA, else TCP): {rail: Gb/s}."""
    out = {}
    for name in ("rdma_bw", "tcp_bw"):
        rung = _rung(verdict, name)
        for pair in (rung or {}).get("pairs") or []:
            if host in (pair.get("pair") or []) and pair.get("gbps") is not None:
                rail = pair.get("rail") or "fabric"
                out[rail] = min(out.get(rail, pair["gbps"]), pair["gbps"])
        if out:
            return out
    return out


def node_health_baseline(verdict_dir, host):
    """The cluster's own baseline for one node, from the newest passing verdict under `verdict_dir`
    (<dir>/<UTC timestamp>/verdict.json, the ladder's artifacts on the controller); {} when there is none.

    Takes: `rail_gbps` (node_health's rail_speeds: each link's line rate when the ladder passed; a link found below
    it has trained down), `gpus` (the GPUs node_health counted, when the inventory expects none: one lost fails),
    `measured_gbps` (each rail's lowest pair-test rate: reported, the command runs no traffic), `stack` (the
    versions most of the fleet ran: the command warns where this node now runs another), and where it came from
    (`verdict`, `finished`)."""
    base = Path(str(verdict_dir))
    found = []
    for path in sorted(base.glob("*/verdict.json")) if base.is_dir() else []:
        try:
            verdict = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if verdict.get("status") == "pass" and host in (verdict.get("hosts") or []):
            found.append((verdict.get("finished") or path.parent.name, path, verdict))
    if not found:
        return {}
    finished, path, verdict = max(found, key=lambda f: (str(f[0]), str(f[1])))
    health = _rung(verdict, "node_health") or {}
    out = {"verdict": str(path.relative_to(base)), "finished": finished}
    rails = {rail: rate for rail, rate in ((health.get("rail_speeds") or {}).get(host) or {}).items() if rate}
    if rails:
        out["rail_gbps"] = rails
    gpus = next(
        (c.get("value") for c in health.get("checks") or [] if c.get("host") == host and c.get("check") == "gpus"),
        None,
    )
    if isinstance(gpus, int) and gpus > 0:
        out["gpus"] = gpus
    measured = _measured(verdict, host)
    if measured:
        out["measured_gbps"] = measured
    if health.get("stack"):
        out["stack"] = health["stack"]
    return out


FILTERS = {
    "node_health_config": node_health_config,
    "node_health_baseline": node_health_baseline,
}
