"""The fabric during one training job: each node's NIC counters (rdma-node-check's `counters` group, read at launch
and again when the job ended, the second reading against the first) and the switches' PFC, ECN and drop counters
(the validation ladder's reads, module_utils/ladder/parsers.py), per host and per port, and whether the run was
lossless: no drop in the no-drop class on any switch port and no NIC error counter that grew.

Written by the launch to artifacts/<run_id>/fabric.json; the run's report.md shows it (train_report.py).
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import switches as validate_rungs

# What the hosts' hw_counters say of congestion (mlx5): reported per host, never judged.
CONGESTION = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets", "out_of_buffer")
# The watch's samples of the no-drop priority's PFC frames (node_check.PAUSE_COUNTER, without the durations).
PAUSE_FRAMES = re.compile(r"(rx|tx)_prio\d+_pause")


def _check(result: dict, name: str) -> dict:
    return next((c for c in (result or {}).get("checks") or [] if c.get("check") == name), {})


def host_account(result: dict | None) -> dict:
    """One node's end reading (node_check's result, only `counters`) as the report shows it: status pass (no
    error counter grew), fail (one did: the detail names device, port, counter), skip (no RDMA counters, no
    first reading, not read), the per-port deltas and the no-drop priority's pause counters."""
    if not result or result.get("failed") or result.get("unreachable") or "checks" not in result:
        why = (result or {}).get("msg") or "not read at the end (host lost or the job never started)"
        return {"status": "skip", "detail": str(why)[:240], "deltas": {}, "pause": {}, "congestion": {}}
    counters = _check(result, "port counters")
    pause = _check(result, "pause counters")
    deltas = ((result.get("counters") or {}).get("deltas")) or {}
    congestion = {
        port: {k: v for k, v in d.items() if k in CONGESTION and v} for port, d in deltas.items() if d
    }  # fmt: skip
    return {
        "status": counters.get("status") or "skip",
        "detail": counters.get("detail") or "no reading",
        "deltas": deltas,
        "pause": (result.get("counters") or {}).get("pause") or {},
        "pause_detail": pause.get("detail"),
        "congestion": {p: c for p, c in congestion.items() if c},
    }


def series(samples: list | None) -> dict[str, list]:
    """One host's counter samples (the watch's, one per poll: [[epoch, {"mlx5_0:1": {counter: value}, "rdma0":
    {"rx_prio3_pause": value}}], ...]) as what grew since the first: {"t": epoch, "congestion": CNPs + ECN marks
    + out-of-buffer, "errors": the error counters, "pauses": PFC pause frames of the no-drop priority, received and
    sent}, summed over the host's ports (pause durations are left out: microseconds, not frames). A counter that
    went back (a reset) counts from its new value."""
    out: dict[str, list] = {"t": [], "congestion": [], "errors": [], "pauses": []}
    first: dict = {}
    for epoch, ports in samples or []:
        grown = {"congestion": 0, "errors": 0, "pauses": 0}
        for port, counters in ports.items():
            for name, value in counters.items():
                kind = _kind(name)
                if kind is None:
                    continue
                base = first.setdefault((port, name), value)
                if value < base:
                    first[(port, name)] = base = value
                grown[kind] += value - base
        out["t"].append(epoch)
        for kind, value in grown.items():
            out[kind].append(value)
    return out


def _kind(name: str) -> str | None:
    if name in CONGESTION:
        return "congestion"
    if PAUSE_FRAMES.fullmatch(name):
        return "pauses"
    return None if "_pause" in name else "errors"


def job_fabric(
    hosts: dict[str, Any],
    switch_before: dict | None,
    switch_after: dict | None,
    nodrop_group: int,
    port_hosts: dict | None = None,
    switch_skip: str | None = None,
    samples: dict | None = None,
) -> dict:
    """hosts: {host: node_check's end reading}; switch_before/after: {switch: switch_counters} at launch and at the
    end (validate_parsers.switch_counters_of); switch_skip: why the switches were not read (none in the
    inventory, a read failed); samples: {host: the watch's counter samples}. Returns {"lossless": true|false|null,
    "reason", "hosts", "ports", "switch", "series": {host: series()} of the hosts sampled}."""
    accounts = {h: host_account(r) for h, r in sorted((hosts or {}).items())}
    if switch_skip is None and not switch_after:
        switch_skip = "no switch read"
    rung = validate_rungs.evaluate_switch(
        switch_before or {}, switch_after or {}, int(nodrop_group), port_hosts or {}, switch_skip
    )
    ports = {
        where: {
            "host": (port_hosts or {}).get(where),
            "pause_rx": d.get("pause_rx", 0),
            "pause_tx": d.get("pause_tx", 0),
            "ecn_marked": d.get(f"ecn_q{nodrop_group}", 0),
            "drops": d.get(f"drops_q{nodrop_group}", 0) + d.get("ingress_drops", 0),
        }
        for where, d in sorted((rung.get("deltas") or {}).items())
    }
    bad_ports = [c["detail"] for c in rung.get("checks") or [] if c["status"] == "fail"]
    bad_hosts = [f"{h}: {a['detail']}" for h, a in accounts.items() if a["status"] == "fail"]
    judged_hosts = [h for h, a in accounts.items() if a["status"] == "pass"]
    if bad_ports or bad_hosts:
        lossless, reason = False, "; ".join(bad_ports + bad_hosts)
    elif rung["status"] == "pass" or judged_hosts:
        seen = []
        if rung["status"] == "pass":
            seen.append(f"no drop in qos-group {nodrop_group} on {len(ports)} switch port(s)")
        if judged_hosts:
            seen.append(f"no NIC error counter grew on {len(judged_hosts)} host(s)")
        unread = [h for h, a in accounts.items() if a["status"] != "pass"]
        lossless, reason = True, "; ".join(seen)
        if rung["status"] != "pass":
            reason += f"; switches not read ({rung.get('reason')})"
        if unread:
            reason += f"; NIC counters not judged on {', '.join(unread)} ({accounts[unread[0]]['detail']})"
    else:
        lossless = None
        reason = f"switches: {rung.get('reason')}; NICs: " + (
            "; ".join(sorted({a["detail"] for a in accounts.values()})) or "no host read"
        )
    pauses = sum(p["pause_rx"] + p["pause_tx"] for p in ports.values())
    marked = sum(p["ecn_marked"] for p in ports.values())
    return {
        "lossless": lossless,
        "reason": reason,
        "nodrop_qos_group": int(nodrop_group),
        "switch": {"status": rung["status"], "reason": rung.get("reason"), "pauses": pauses, "ecn_marked": marked},
        "ports": ports,
        "hosts": accounts,
        "series": {h: series(v) for h, v in sorted((samples or {}).items()) if v},
    }


def plot(fabric: dict, path) -> bool:
    """fabric.png: each sampled host's congestion signals, PFC pause frames and error counters, grown since launch,
    over the run; False (no file) when no host was sampled (no RDMA device)."""
    sampled = {h: s for h, s in (fabric.get("series") or {}).items() if s.get("t")}
    if not sampled:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = min(s["t"][0] for s in sampled.values())
    panels = (
        ("congestion", "CNPs + ECN marks\n+ out-of-buffer"),
        ("pauses", f"PFC pauses, prio {fabric.get('nodrop_qos_group')}\n(rx + tx)"),
        ("errors", "error counters"),
    )
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 6.5), sharex=True)
    for ax, (kind, label) in zip(axes, panels, strict=True):
        for host, s in sampled.items():
            ax.plot([x - start for x in s["t"]], s.get(kind) or [0] * len(s["t"]), label=host)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("seconds since the first sample")
    axes[0].set_title("NIC counters grown during the run", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def markdown(fabric: dict) -> list[str]:
    """report.md's section for fabric.json."""
    verdict = {True: "yes", False: "**no**", None: "unknown"}[fabric.get("lossless")]
    lines = ["## Fabric during this run", "", f"Lossless during this run: {verdict} ({fabric.get('reason')})", ""]
    ports = fabric.get("ports") or {}
    if ports:
        group = fabric.get("nodrop_qos_group")
        lines += [f"| switch port | host | PFC pauses rx | PFC pauses tx | ECN marked (qos-group {group}) | drops |"]
        lines += ["|---|---|---|---|---|---|"]
        lines += [
            f"| {where} | {p.get('host') or '—'} | {p['pause_rx']} | {p['pause_tx']} | {p['ecn_marked']} "
            f"| {p['drops']} |"
            for where, p in ports.items()
        ]
        lines.append("")
    else:
        lines += [f"Switches: {(fabric.get('switch') or {}).get('reason')}", ""]
    lines += ["| host | NIC counters | CNPs, ECN marks | no-drop pause counters |", "|---|---|---|---|"]
    sampled = [h for h, s in (fabric.get("series") or {}).items() if s.get("t")]
    for host, a in (fabric.get("hosts") or {}).items():
        congestion = "; ".join(
            f"{port} " + ", ".join(f"{k} +{v}" for k, v in c.items()) for port, c in (a.get("congestion") or {}).items()
        )
        pause = "; ".join(
            f"{i} " + ", ".join(f"{k} {v}" for k, v in p.items()) for i, p in (a.get("pause") or {}).items() if p
        )
        lines.append(f"| {host} | {a['status']}: {a['detail']} | {congestion or '—'} | {pause or '—'} |")
    lines.append("")
    if sampled:
        lines += [
            f"NIC counters and the no-drop priority's PFC pauses (what each host's switch port paused) sampled at"
            f" every poll of the watch on {', '.join(sampled)}; the switches themselves are read at launch and at"
            " the end:",
            "",
            "![fabric](fabric.png)",
        ]
    else:
        lines.append("No NIC counters sampled during the run (no RDMA port counters on the hosts).")
    return [*lines, ""]


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {"train_launch_job_fabric": job_fabric}
