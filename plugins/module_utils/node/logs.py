"""The kernel's log: read from the journal (else dmesg -T), parsed into (time, identifier, message), and the events
the checks count in it: NVIDIA XIDs, and link downs and ups (the NIC driver's carrier, the RDMA core's port state)."""

from __future__ import annotations

import re
import time

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import Tools, last_line

_SHORT_UNIX = re.compile(r"^(\d+(?:\.\d+)?) (\S+) ([^:\s]+(?:\[\d+\])?): (.*)$")
_DMESG_T = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\] (.*)$")


def parse_log(text):
    """Journal lines (`journalctl -o short-unix`: `<epoch> <host> <identifier>: <message>`) or `dmesg -T` lines
    (`[Sun Feb 23 16:24:18 2025] <message>`, local time) -> [(epoch, identifier, message)]."""
    out = []
    for line in str(text).splitlines():
        match = _SHORT_UNIX.match(line)
        if match:
            out.append((float(match.group(1)), re.sub(r"\[\d+\]$", "", match.group(3)), match.group(4)))
            continue
        match = _DMESG_T.match(line)
        if match:
            try:
                when = time.mktime(time.strptime(match.group(1), "%a %b %d %H:%M:%S %Y"))
            except ValueError:
                continue
            out.append((when, "kernel", match.group(2)))
    return out


XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+)\): (\d+),\s*(.*)")
# Link events, the kernel's own: the NIC driver's carrier (mlx5e, mlx4: `<if>: Link up|down`) and the RDMA core's
# port state (`<dev>: Port: 1 Link ACTIVE|DOWN`, drivers/infiniband/core/cache.c; INIT and ARMED are steps on the
# way up). Not systemd-networkd's `Lost carrier`: it also logs the link changes it makes itself (netplan apply).
LINK_RE = re.compile(r"(?:^|\s)([^\s:]+): Link (up|down)\b", re.I)
PORT_RE = re.compile(r"(?:^|\s)([^\s:]+): Port: (\d+) Link (ACTIVE|DOWN)\b")


def xid_events(entries):
    """[(epoch, pci, xid, text)] of the kernel's NVRM Xid lines."""
    out = []
    for when, ident, msg in entries:
        match = XID_RE.search(msg) if ident == "kernel" else None
        if match:
            out.append((when, match.group(1).lower(), int(match.group(2)), match.group(3).strip()))
    return out


def link_events(entries, names):
    """[(epoch, link, "down"|"up")] of the kernel's link messages for the links in `names` (interfaces; an RDMA
    device's port is `dev:port`)."""
    out = []
    for when, ident, msg in entries:
        if ident != "kernel":
            continue
        match = PORT_RE.search(msg)
        if match and match.group(1) in names:
            out.append((when, f"{match.group(1)}:{match.group(2)}", "up" if match.group(3) == "ACTIVE" else "down"))
            continue
        match = LINK_RE.search(msg)
        if match and match.group(1) in names:
            out.append((when, match.group(1), match.group(2).lower()))
    return out


def outages(events, now):
    """Per link: {"flaps": down events, "outages": [(start, seconds, ongoing)]} from time-ordered events."""
    out = {}
    down_since = {}
    for when, link, state in sorted(events):
        entry = out.setdefault(link, {"flaps": 0, "outages": []})
        if state == "down" and link not in down_since:
            down_since[link] = when
            entry["flaps"] += 1
        elif state == "up" and link in down_since:
            start = down_since.pop(link)
            entry["outages"].append((start, when - start, False))
    for link, start in down_since.items():
        out[link]["outages"].append((start, now - start, True))
    return out


def read_kernel_log(tools: Tools, since: float) -> dict:
    """The kernel's messages of this boot since `since`: {"source", "text", "kernel" (whether the journal holds any
    kernel message of this boot: a container's may not)} or {"error"}. The journal first, else `dmesg -T`."""
    res = tools.run(["journalctl", "-k", "--no-pager", "--quiet", "--output=short-unix", f"--since=@{int(since)}"])
    if res is not None and res["rc"] == 0:
        kernel = any(ident == "kernel" for _, ident, _ in parse_log(res["out"]))
        if not kernel:  # a quiet window, or no kernel messages at all?
            probe = tools.run(["journalctl", "-k", "--no-pager", "--quiet", "--output=short-unix", "-n", "1"])
            kernel = bool(probe and probe["rc"] == 0 and any(i == "kernel" for _, i, _ in parse_log(probe["out"])))
        return {"source": "journalctl", "text": res["out"], "kernel": kernel}
    dmesg = tools.run(["dmesg", "-T"])
    if dmesg is not None and dmesg["rc"] == 0:
        return {"source": "dmesg -T", "text": dmesg["out"], "kernel": bool(dmesg["out"].strip())}
    why = f"journalctl: {last_line(res)}" if res is not None else "journalctl not installed"
    why += f"; dmesg: {last_line(dmesg)}" if dmesg is not None else "; dmesg not installed"
    return {"error": why}
