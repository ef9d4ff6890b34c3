"""The monitoring tests' reading of a .prom text: parsed by prometheus_client (the tests' dependency only; the
package itself is stdlib), as Prometheus' own parser reads the textfile collector's files."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures"


def fixture(path: str) -> str:
    return (FIX / path).read_text()


def parse(text: str) -> dict:
    """{(sample name, ((label, value), ...) in name order): value} of every sample; a duplicate fails."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"duplicate sample {key}"
            out[key] = s.value
    return out


def families(text: str) -> dict:
    """{family name as the parser names it (a counter without _total): (type, help)}."""
    return {f.name: (f.type, f.documentation) for f in text_string_to_metric_families(text)}


def value(text: str, metric: str, /, **labels):
    """The value of one sample; KeyError when it is not there."""
    return parse(text)[(metric, tuple(sorted((k, str(v)) for k, v in labels.items())))]


def series(text: str, name: str) -> dict:
    """{((label, value), ...): value} of one metric's samples."""
    return {labels: v for (n, labels), v in parse(text).items() if n == name}


def names(text: str) -> set:
    return {n for n, _ in parse(text)}
