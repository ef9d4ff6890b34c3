"""Parsers of what the ladder reads: perftest (bandwidth, latency), iperf3, NX-OS's PFC and queuing counters,
and Ansible's own results (which nodes did not answer, and why); each on recorded real outputs
(tests/fixtures/validate/).

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

import json
import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.units import mib_per_s_to_gbps


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


def stdout_if_ok(res):
    """A command's stdout where it ran and succeeded (rc 0), else None (not installed, its daemon down, skipped)."""
    return res.get("stdout") if isinstance(res, dict) and res.get("rc") == 0 else None


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


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
# nccl-tests' result row: size, count, type, redop, root, then out-of-place time, algbw, busbw (GB/s), #wrong and
# the same in place (src/common.cu's format; #wrong is N/A without a check; `0: ` before it where a launcher labels
# its ranks' lines).
_NCCL_TESTS_ROW = re.compile(
    r"^\s*(?:\d+:\s+)?(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)"
    r"(?:\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A))?\s*$"
)


def parse_nccl_tests(text):
    """An nccl-tests run's stdout (`all_reduce_perf -b 1M -e 1G -f 2 -g 8`): {"rows": [{"bytes", "busbw_gbps" (the
    better of out-of-place and in-place, in Gb/s: nccl-tests prints GB/s), "wrong"}], "avg_busbw_gbps", "gpus"}, rows
    by size; None where it printed no result row."""
    rows = []
    for line in (text or "").splitlines():
        m = _NCCL_TESTS_ROW.match(line)
        if not m:
            continue
        busbw = max(float(m.group(5)), float(m.group(9) or 0))
        wrong = sum(int(w) for w in (m.group(6), m.group(10)) if w and w != "N/A")
        rows.append({"bytes": int(m.group(1)), "busbw_gbps": round(busbw * 8, 2), "wrong": wrong})
    if not rows:
        return None
    avg = re.search(r"^# Avg bus bandwidth\s*:\s*([\d.]+)", text, re.M)
    gpus = re.search(r"nGpus\s+(\d+)", text)
    return {
        "rows": sorted(rows, key=lambda r: r["bytes"]),
        "avg_busbw_gbps": round(float(avg.group(1)) * 8, 2) if avg else None,
        "gpus": int(gpus.group(1)) if gpus else None,
    }


FILTERS = {
    "cluster_validate_parse_nccl_tests": parse_nccl_tests,
    "cluster_validate_parse_perftest_bw": parse_perftest_bw,
    "cluster_validate_parse_perftest_lat": parse_perftest_lat,
    "cluster_validate_parse_iperf3": parse_iperf3,
    "cluster_validate_switch_counters": switch_counters,
    "cluster_validate_switch_counters_of": switch_counters_of,
    "cluster_validate_measurements": measurements,
    "cluster_validate_host_json": host_json,
    "cluster_validate_stdout_if_ok": stdout_if_ok,
    "cluster_validate_reach_result": reach_result,
    "cluster_validate_unreachable": unreachable_hosts,
    "cluster_validate_lost_hosts": lost_hosts,
}
