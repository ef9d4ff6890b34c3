"""The NIC counters: RDMA port error counters that must not grow between two readings (this one and the last one
kept in the state dir), the mlx5 congestion counters and the no-drop priority's pause counters reported."""

from __future__ import annotations

import re
import time

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import PAUSE_COUNTER, STATE_SCHEMA
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_ethtool_stats


def counter_checks(j: Judge, previous: dict | None):
    """Port error counters must not grow between two readings (this one and the last one kept in the state dir);
    the mlx5 hw_counters and the no-drop priority's ethtool pause counters are reported."""
    ports = j.facts.get("counters") or {}
    prio = j.t["nodrop_priority"]
    pause = {}
    for ifname, raw in (j.facts.get("ethtool") or {}).items():
        stats = parse_ethtool_stats((raw or {}).get("out") or "") if raw and raw["rc"] == 0 else {}
        pause[ifname] = {k: v for k, v in stats.items() if re.fullmatch(PAUSE_COUNTER.format(prio=prio), k)}
    j.reading = {"time": j.facts["time"], "boot_time": j.facts.get("boot_time"), "ports": ports, "pause": pause}
    j.deltas = {}
    prev_ok = (
        previous is not None
        and previous.get("schema") == STATE_SCHEMA
        and previous.get("boot_time") == j.facts.get("boot_time")
    )
    if not ports:
        j.add("port counters", "skip", "no RDMA port counters (no RDMA device)")
    elif not prev_ok:
        why = "first reading" if previous is None else "the last reading is from another boot or another format"
        j.add("port counters", "skip", f"{why}: {len(ports)} port(s) read, kept for the next run")
    else:
        grew, reset = [], []
        for port, now_counters in ports.items():
            old = (previous.get("ports") or {}).get(port)
            if old is None:
                continue
            delta = {}
            for group in ("counters", "hw_counters"):
                for name, value in now_counters.get(group, {}).items():
                    before = old.get(group, {}).get(name)
                    if before is None:
                        continue
                    if value < before:
                        reset.append(f"{port} {name}")
                        continue
                    if group == "counters" and name in j.t["error_counters"] and value > before:
                        grew.append(f"{port.replace(':', ' port ')}: {name} +{value - before}")
                    if (group == "counters" and name in j.t["error_counters"]) or name in j.t["report_counters"]:
                        delta[name] = value - before
            j.deltas[port] = delta
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(previous.get("time") or 0))
        if grew:
            j.add("port counters", "fail", "; ".join(grew) + f" (since {since})")
        elif reset:
            j.add("port counters", "skip", f"counters went back (reset?) on {', '.join(reset[:3])}: reading kept")
        else:
            reported = ", ".join(
                f"{p} {k} +{v}" for p, d in j.deltas.items() for k, v in d.items() if k in j.t["report_counters"] and v
            )
            j.add("port counters", "pass", f"no error counter grew on {len(ports)} port(s) since {since}"
                  + (f" (reported: {reported})" if reported else ""))  # fmt: skip
    exposed = {i: p for i, p in pause.items() if p}
    if not j.facts.get("ethtool"):
        j.add("pause counters", "skip", "no fabric interface to read")
    elif all(v is None for v in (j.facts.get("ethtool") or {}).values()):
        j.add("pause counters", "skip", "ethtool not installed")
    elif not exposed:
        j.add("pause counters", "skip", f"no per-priority pause counters for priority {prio} (driver or PFC off)")
    else:
        old = (previous.get("pause") or {}) if prev_ok else {}
        parts = []
        for ifname, values in exposed.items():
            base = old.get(ifname) or {}
            grown = {k: f" (+{v - base[k]})" if k in base and v >= base[k] else "" for k, v in values.items()}
            parts.append(ifname + " " + ", ".join(f"{k} {v}{grown[k]}" for k, v in values.items()))
        j.add("pause counters", "pass", "reported: " + "; ".join(parts))
