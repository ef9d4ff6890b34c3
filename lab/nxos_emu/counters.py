"""Per-port, per-qos-group traffic counters of the emulated switch and the show commands that print them.

The emulator forwards no packets, so every counter starts at zero and moves only when a test says so:
the hidden exec command `emulator counters ...` (over SSH, like any command), `Device.add_counters()`
(in-process) or the counters file (`--counters-file`, JSON, re-read at every show so a process outside
the emulator can write it). `clear qos statistics [interface NAME]` zeroes the emulator's own counters
(never the file's). Names and layout: lab/nxos_emu/README.md ("Counters").
"""

from __future__ import annotations

import json
from pathlib import Path

# Counter names as the control command and the counters file spell them.
NAMES = ("tx-pkts", "tx-bytes", "dropped", "dropped-bytes", "ecn-marked", "tx-pause", "rx-pause")

# Buffer numbers printed for a no-drop (PFC) qos-group in `show queuing interface` (bytes; the
# values a Nexus 93180YC-FX reports for a 100G port with MTU 9216, per the public outputs cited in
# the README). They are constant here: the emulator has no buffer model.
NODROP_BUFFER = (348608, 77376, 75712)


def empty() -> dict[str, int]:
    return dict.fromkeys(NAMES, 0)


class Counters:
    """{interface: {qos_group: {name: value}}} plus an optional file overlay."""

    def __init__(self, overlay_file: Path | None = None):
        self.values: dict[str, dict[int, dict[str, int]]] = {}
        self.overlay_file = overlay_file

    # -- changes -----------------------------------------------------------------------------------
    def add(self, interface: str, qos_group: int, **deltas: int) -> None:
        group = self.values.setdefault(interface, {}).setdefault(int(qos_group), empty())
        for name, value in deltas.items():
            key = name.replace("_", "-")
            if key not in NAMES:
                raise KeyError(f"unknown counter {name!r} (known: {', '.join(NAMES)})")
            group[key] += int(value)

    def clear(self, interface: str | None = None) -> None:
        if interface is None:
            self.values.clear()
        else:
            self.values.pop(interface, None)

    # -- persistence -------------------------------------------------------------------------------
    def dump(self) -> dict:
        return {port: {str(g): dict(c) for g, c in groups.items()} for port, groups in self.values.items()}

    def load(self, data: dict) -> None:
        self.values = {}
        for port, groups in (data or {}).items():
            for group, values in groups.items():
                self.add(port, int(group), **values)

    # -- reading -----------------------------------------------------------------------------------
    def _overlay(self) -> dict:
        if not self.overlay_file or not self.overlay_file.exists():
            return {}
        try:
            return json.loads(self.overlay_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}  # a half-written file reads as "no overlay" until the writer is done

    def get(self, interface: str, qos_group: int) -> dict[str, int]:
        total = empty()
        for name, value in self.values.get(interface, {}).get(int(qos_group), {}).items():
            total[name] += value
        for name, value in (self._overlay().get(interface, {}).get(str(qos_group)) or {}).items():
            if name in total:
                total[name] += int(value)
        return total


def _cell(value: object) -> str:
    return f"{value!s:>16}|"


def render_queuing(interface: str, queues: dict[int, dict], nodrop: set[int], counters: Counters) -> list[str]:
    """`show queuing interface NAME` for one port (egress, ingress, PFC statistics).

    queues: {qos_group: {"bandwidth": int | None, "priority": int | None}} from the active queuing
    policy; nodrop: the qos-groups with `pause pfc-cos` in the active network-qos policy.
    """
    groups = sorted(queues, reverse=True)
    rule = "-" * 78
    out = [
        f"Egress Queuing for {interface} [System]",
        rule,
        "QoS-Group# Bandwidth% PrioLevel                Shape                   QLimit",
        "                                   Min          Max        Units   ",
        rule,
    ]
    for group in groups:
        bandwidth = queues[group].get("bandwidth")
        priority = queues[group].get("priority")
        out.append(
            f"{group:>7}{'-' if bandwidth is None else bandwidth:>14}{'-' if priority is None else priority:>10}"
            f"{'-':>12}{'-':>13}{'-':>6}{'9(D)':>16}"
        )
    box = "+" + "-" * 61 + "+"
    for group in sorted(queues):
        count = counters.get(interface, group)
        out += [
            box,
            f"|{'QOS GROUP ' + str(group):^61}|",
            box,
            f"|{'':>27}|  Unicast       |Multicast       |",
            box,
            f"|{'Tx Pkts':>26} |" + _cell(count["tx-pkts"]) + _cell(0),
            f"|{'Tx Byts':>26} |" + _cell(count["tx-bytes"]) + _cell(0),
            f"|{'WRED/AFD & Tail Drop Pkts':>26} |" + _cell(count["dropped"]) + _cell(0),
            f"|{'WRED/AFD & Tail Drop Byts':>26} |" + _cell(count["dropped-bytes"]) + _cell(0),
            f"|{'WRED & ECN Marked Pkts':>26} |" + _cell(count["ecn-marked"]) + _cell(0),
            f"|{'Q Depth Byts':>26} |" + _cell(0) + _cell(0),
            f"|{'WD & Tail Drop Pkts':>26} |" + _cell(0) + _cell(0),
        ]
    out += [
        box,
        "",
        f"Ingress Queuing for {interface}",
        "-" * 53,
        "QoS-Group#                 Pause                 ",
        "           Buff Size       Pause Th      Resume Th      ",
        "-" * 53,
    ]
    for group in groups:
        if group in nodrop:
            size, pause, resume = NODROP_BUFFER
            out.append(f"{group:>7}{size:>15}{pause:>13}{resume:>13}")
        else:
            out.append(f"{group:>7}{'-':>15}{'-':>13}{'-':>13}")
    per_cos = {cos: counters.get(interface, cos) for cos in range(8)}
    tx_total = sum(c["tx-pause"] for c in per_cos.values())
    rx_total = sum(c["rx-pause"] for c in per_cos.values())
    out += [
        "",
        "PFC Statistics",
        rule,
        f"TxPPP:{tx_total:>21}, RxPPP:{rx_total:>21}",
        rule,
        "PFC_COS QOS_Group   TxPause                 TxCount   RxPause                 RxCount",
    ]
    for cos in range(8):
        count = per_cos[cos]
        group = cos if cos in nodrop else 0
        out.append(
            f"{cos:>7}{group:>10}   {'Inactive':<10}{count['tx-pause']:>18}   {'Inactive':<10}{count['rx-pause']:>18}"
        )
    out.append(rule)
    return out
