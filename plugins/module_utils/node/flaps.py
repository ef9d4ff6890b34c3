"""The link flaps: the fabric links' downs and outages in the kernel's log of this boot, in the flap window."""

from __future__ import annotations

import time

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import Judge
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import link_events, outages, parse_log


def flap_checks(j: Judge):
    log = j.facts.get("log") or {}
    if "error" in log:
        j.add("link flaps", "skip", f"kernel log not readable ({log['error']})")
        return
    if not log.get("kernel"):
        j.add("link flaps", "skip", "the journal holds no kernel message of this boot (a container?)")
        return
    now = j.facts["time"]
    since = max(now - j.t["flap_window_s"], j.facts.get("boot_time") or 0)
    names = {i["name"] for i in j.config["interfaces"]} | {d["name"] for d in j.facts.get("rdma") or []}
    events = [e for e in link_events(parse_log(log.get("text") or ""), names) if e[0] >= since]
    hours = j.t["flap_window_s"] / 3600
    fail, warn = [], []
    for link, seen in sorted(outages(events, now).items()):
        longest = max((s for _, s, _ in seen["outages"]), default=0)
        if longest >= j.t["outage_max_s"]:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(max(seen["outages"], key=lambda o: o[1])[0]))
            ongoing = any(o for _, s, o in seen["outages"] if s == longest)
            fail.append(f"{link}: down {longest:.0f} s from {when}" + (" (still down)" if ongoing else ""))
        elif seen["flaps"] >= j.t["flap_max"]:
            fail.append(f"{link}: {seen['flaps']} link flaps in {hours:g} h")
        elif seen["flaps"]:
            warn.append(f"{link}: {seen['flaps']} short link flap(s) in {hours:g} h (longest {longest:.0f} s)")
    if fail:
        j.add("link flaps", "fail", "; ".join(fail + warn))
    elif warn:
        j.add("link flaps", "warn", "; ".join(warn))
    else:
        j.add("link flaps", "pass", f"no link flap in {hours:g} h on {', '.join(sorted(names))}")
