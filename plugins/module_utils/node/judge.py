"""One evaluation of a node: its checks (name, status, detail, value, threshold, unit), notes, each rail's line rate
and the counter reading kept for the next run. The check families (node/fabric.py, gpu.py, counters.py, flaps.py,
stack.py) add to it."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import STATUSES


def check(name, status, detail, value=None, threshold=None, unit=None):
    if status not in STATUSES:
        raise ValueError(f"check {name}: status must be one of {STATUSES}, got {status!r}")
    return {"check": name, "status": status, "detail": detail, "value": value, "threshold": threshold, "unit": unit}


class Judge:
    """One evaluation: the checks, notes and each rail's line rate (Gb/s; None: unknown)."""

    def __init__(self, facts: dict, config: dict):
        self.facts, self.config, self.t = facts, config, config["thresholds"]
        self.checks: list[dict] = []
        self.notes: list[str] = []
        self.rates: dict = {}
        self.baseline = (config.get("baseline") or {}).get("rail_gbps") or {}
        self.reading: dict | None = None  # the counters read (counter_checks), kept for the next run
        self.deltas: dict = {}

    def add(self, *args, **kw):
        self.checks.append(check(*args, **kw))

    def rate(self, rail, rate):
        """Record a link's line rate: a rail keeps the lowest of its NIC and its RDMA port."""
        have = self.rates.get(rail)
        self.rates[rail] = rate if have is None else (have if rate is None else min(have, rate))

    def line_rate(self, what, rail, where, rate):
        """A link against the expected line rate (config line_rate_gbps), else the rate this rail passed the ladder
        at (baseline): below it the link trained down (a cable, a port, a PCIe slot)."""
        want, why = self.config["line_rate_gbps"], "expected"
        if not want and self.baseline.get(rail):
            want, why = float(self.baseline[rail]), "baseline"
        if not want:
            self.add(what, "pass", f"{where} {rate:g} Gb/s", value=rate, unit="Gb/s")
        elif rate < want:
            text = "the expected" if why == "expected" else "the rate it passed the ladder at,"
            self.add(what, "fail", f"{where} {rate:g} Gb/s, below {text} {want:g} Gb/s (trained down?)",
                     value=rate, threshold=want, unit="Gb/s")  # fmt: skip
        else:
            self.add(what, "pass", f"{where} {rate:g} Gb/s", value=rate, threshold=want, unit="Gb/s")
