"""The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector reads it from
`<dir>/*.prom`: for each metric family `# HELP`, `# TYPE` and its samples, label values escaped.

Every module of this package declares its metrics once, in a METRICS table of Metric rows (name, type, unit,
labels, help, source): render() refuses a sample of a metric not in the table, with other labels than the table
says, or a value that is not a number, so docs/monitoring.md's table and the files cannot drift apart. No sample
carries a timestamp (the textfile collector rejects them): a reading's time is its own `*_timestamp_seconds`
gauge. Stdlib only: this runs on the nodes (Python 3.9+), with no prometheus_client there.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import NamedTuple

TYPES = ("gauge", "counter")
# The data model's names (prometheus.io, "Data model"); `__` starts the names Prometheus keeps for itself.
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Base units, which end the name (prometheus.io, "Metric and label naming": base units, the unit as a suffix), and
# the things a count counts, which the table names for the reader and the name need not end with.
UNITS = ("seconds", "bytes", "ratio", "celsius", "watts", "hertz")
COUNTS = ("packets", "frames", "errors", "rows", "jobs", "nodes", "threads", "messages")
# A credential in a label value: a URL's user:password@, or a key=value the tools print with a secret in it.
CREDENTIAL = re.compile(r"://[^/\s:@]+:[^/\s@]*@|\b(password|passwd|passphrase|secret|token|api_?key)\s*[=:]", re.I)


class Metric(NamedTuple):
    """One metric family: its name, type (gauge or counter), base unit ("" for a count or a code), label names,
    what it says and where the value comes from (the command or file)."""

    name: str
    type: str
    unit: str
    labels: tuple
    help: str
    source: str


def check_metric(m: Metric) -> Metric:
    """The row itself: valid names, a known type, a counter's `_total`, the unit as the name's suffix."""
    if not METRIC_NAME.fullmatch(m.name) or m.name.startswith("__"):
        raise ValueError(f"invalid metric name {m.name!r}")
    if m.type not in TYPES:
        raise ValueError(f"{m.name}: type must be one of {TYPES}, got {m.type!r}")
    if (m.type == "counter") != m.name.endswith("_total"):
        raise ValueError(f"{m.name}: a counter's name ends in _total, and only a counter's")
    if m.unit in UNITS and not m.name.removesuffix("_total").endswith(f"_{m.unit}"):
        raise ValueError(f"{m.name}: a metric in {m.unit} ends in _{m.unit}")
    if m.unit and m.unit not in UNITS + COUNTS:
        raise ValueError(f"{m.name}: unit {m.unit!r} is not one of {UNITS + COUNTS}")
    for label in m.labels:
        if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
            raise ValueError(f"{m.name}: invalid label name {label!r}")
    if len(set(m.labels)) != len(m.labels):
        raise ValueError(f"{m.name}: a label named twice")
    return m


def table(*metrics: Metric) -> dict:
    """{name: Metric} of checked rows, in the order given (a module's METRICS)."""
    out = {}
    for m in metrics:
        if m.name in out:
            raise ValueError(f"{m.name}: declared twice")
        out[m.name] = check_metric(m)
    return out


def escape_label(value) -> str:
    """A label value as the format quotes it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: backslash and line feed escaped (a quote stays as it is)."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value) -> str:
    """A sample's value: an int as written, a float as Python's shortest repr, NaN and the infinities as Go
    spells them. bool, None and strings are refused: a missing reading is no sample, never a 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a sample's value must be a number, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def help_line(m: Metric) -> str:
    return m.help + (f" ({m.unit})" if m.unit else "") + f". Source: {m.source}"


def render(metrics: dict, samples) -> str:
    """The text of one .prom file: `samples` [(name, {label: value}, number), ...] of the `metrics` table, grouped
    by family in name order, each family's samples in label order; a family without samples is left out."""
    by_name: dict = {}
    for name, labels, value in samples:
        m = metrics.get(name)
        if m is None:
            raise ValueError(f"sample of undeclared metric {name!r}")
        labels = dict(labels or {})
        if set(labels) != set(m.labels):
            raise ValueError(f"{name}: labels {sorted(labels)}, declared {sorted(m.labels)}")
        for label, text in labels.items():
            if CREDENTIAL.search(str(text)):
                raise ValueError(f"{name}: label {label} looks like it carries a credential; refused")
        text = format_value(value)
        if m.type == "counter" and (value < 0 or math.isnan(value)):
            raise ValueError(f"{name}: a counter cannot be {value}")
        key = tuple(str(labels[k]) for k in m.labels)
        family = by_name.setdefault(name, {})
        if key in family:
            same = {k: key[i] for i, k in enumerate(m.labels)}
            raise ValueError(f"{name}: two samples with labels {same}")
        family[key] = text
    lines = []
    for name in sorted(by_name):
        m = metrics[name]
        lines += [f"# HELP {name} {escape_help(help_line(m))}", f"# TYPE {name} {m.type}"]
        for key in sorted(by_name[name]):
            pairs = ",".join(f'{k}="{escape_label(key[i])}"' for i, k in enumerate(m.labels))
            lines.append(f"{name}{{{pairs}}} {by_name[name][key]}" if pairs else f"{name} {by_name[name][key]}")
    return "\n".join(lines) + "\n" if lines else ""


def write_textfile(path, text: str) -> None:
    """Write a .prom file as node_exporter's docs ask: to a temporary name in the same directory, then renamed,
    so the collector never reads half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
