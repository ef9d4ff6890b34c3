"""The text exposition renderer (monitoring/exposition.py): what it writes must parse as Prometheus parses it
(prometheus_client's parser, the tests' dependency only), escape label values and HELP text, refuse bad names,
bad samples and credentials, and write the same text for the same samples in any order."""

from __future__ import annotations

import math

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import (
    Metric,
    format_value,
    render,
    table,
    write_textfile,
)

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import families, parse, value

METRICS = table(
    Metric("t_temperature_celsius", "gauge", "celsius", ("gpu",), "A temperature", "a tool"),
    Metric("t_frames_total", "counter", "frames", ("interface", "direction"), "Frames", "ethtool -S"),
    Metric("t_up", "gauge", "", (), "Up", "a probe"),
)


def test_render_parses_as_prometheus_does() -> None:
    text = render(
        METRICS,
        [
            ("t_frames_total", {"interface": "rdma0", "direction": "received"}, 41927),
            ("t_temperature_celsius", {"gpu": "0"}, 35.5),
            ("t_up", {}, 1),
        ],
    )
    assert families(text) == {
        "t_frames": ("counter", "Frames (frames). Source: ethtool -S"),
        "t_temperature_celsius": ("gauge", "A temperature (celsius). Source: a tool"),
        "t_up": ("gauge", "Up. Source: a probe"),
    }
    assert value(text, "t_frames_total", interface="rdma0", direction="received") == 41927
    assert value(text, "t_temperature_celsius", gpu="0") == 35.5
    assert value(text, "t_up") == 1
    assert text.endswith("\n") and "\n\n" not in text


def test_label_values_are_escaped_exactly_and_read_back() -> None:
    nasty = 'a\\b"c\nd'
    text = render(METRICS, [("t_temperature_celsius", {"gpu": nasty}, 1)])
    assert 't_temperature_celsius{gpu="a\\\\b\\"c\\nd"} 1' in text.splitlines()
    assert value(text, "t_temperature_celsius", gpu=nasty) == 1


def test_help_text_is_one_line_with_backslash_and_newline_escaped() -> None:
    metrics = table(Metric("t_x", "gauge", "", (), 'two\nlines \\ and a "quote"', "src"))
    text = render(metrics, [("t_x", {}, 0)])
    assert text.splitlines()[0] == '# HELP t_x two\\nlines \\\\ and a "quote". Source: src'
    assert families(text)["t_x"][1] == 'two\nlines \\ and a "quote". Source: src'


@pytest.mark.parametrize(
    "metric",
    [
        Metric("1_starts_with_a_digit", "gauge", "", (), "", ""),
        Metric("has-dash", "gauge", "", (), "", ""),
        Metric("__reserved", "gauge", "", (), "", ""),
        Metric("", "gauge", "", (), "", ""),
        Metric("t_x", "histogram", "", (), "", ""),
        Metric("t_x", "counter", "", (), "", ""),  # a counter without _total
        Metric("t_x_total", "gauge", "", (), "", ""),  # _total on a gauge
        Metric("t_x", "gauge", "seconds", (), "", ""),  # a unit the name does not end with
        Metric("t_x_seconds", "gauge", "minutes", (), "", ""),  # not a base unit
        Metric("t_x", "gauge", "", ("1label",), "", ""),
        Metric("t_x", "gauge", "", ("bad-label",), "", ""),
        Metric("t_x", "gauge", "", ("__name__",), "", ""),
        Metric("t_x", "gauge", "", ("a", "a"), "", ""),
    ],
)
def test_bad_metric_rows_are_refused(metric: Metric) -> None:
    with pytest.raises(ValueError):
        table(metric)


def test_good_rows_pass_and_a_name_declared_twice_does_not() -> None:
    table(
        Metric("t_x_seconds_total", "counter", "seconds", ("a", "b_2"), "", ""), Metric("t:y", "gauge", "", (), "", "")
    )
    with pytest.raises(ValueError, match="declared twice"):
        table(Metric("t_x", "gauge", "", (), "", ""), Metric("t_x", "gauge", "", (), "", ""))


@pytest.mark.parametrize(
    ("sample", "why"),
    [
        (("t_nope", {}, 1), "undeclared"),
        (("t_temperature_celsius", {}, 1), "labels"),
        (("t_temperature_celsius", {"gpu": "0", "extra": "1"}, 1), "labels"),
        (("t_up", {}, True), "number"),
        (("t_up", {}, None), "number"),
        (("t_up", {}, "1"), "number"),
        (("t_frames_total", {"interface": "a", "direction": "sent"}, -1), "counter"),
        (("t_frames_total", {"interface": "a", "direction": "sent"}, math.nan), "counter"),
        (("t_temperature_celsius", {"gpu": "https://user:hunter2@example.com/x"}, 1), "credential"),
        (("t_temperature_celsius", {"gpu": "mysql password=hunter2"}, 1), "credential"),
        (("t_temperature_celsius", {"gpu": "token: abc"}, 1), "credential"),
    ],
)
def test_bad_samples_are_refused(sample: tuple, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        render(METRICS, [sample])


def test_a_plain_url_is_no_credential() -> None:
    text = render(METRICS, [("t_temperature_celsius", {"gpu": "http://example.com:9090/x"}, 1)])
    assert value(text, "t_temperature_celsius", gpu="http://example.com:9090/x") == 1


def test_two_samples_with_the_same_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="two samples"):
        render(METRICS, [("t_temperature_celsius", {"gpu": "0"}, 1), ("t_temperature_celsius", {"gpu": "0"}, 2)])


def test_order_is_the_same_whatever_the_samples_order() -> None:
    samples = [
        ("t_up", {}, 1),
        ("t_temperature_celsius", {"gpu": "1"}, 40),
        ("t_frames_total", {"interface": "b", "direction": "sent"}, 2),
        ("t_temperature_celsius", {"gpu": "0"}, 35),
        ("t_frames_total", {"interface": "a", "direction": "sent"}, 1),
    ]
    text = render(METRICS, samples)
    assert text == render(METRICS, list(reversed(samples)))
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == [
        't_frames_total{interface="a",direction="sent"} 1',
        't_frames_total{interface="b",direction="sent"} 2',
        't_temperature_celsius{gpu="0"} 35',
        't_temperature_celsius{gpu="1"} 40',
        "t_up 1",
    ]


def test_values_as_go_reads_them() -> None:
    assert [format_value(v) for v in (3, 0.5, 1e16, math.nan, math.inf, -math.inf)] == [
        "3", "0.5", "1e+16", "NaN", "+Inf", "-Inf",
    ]  # fmt: skip
    text = render(METRICS, [("t_temperature_celsius", {"gpu": "0"}, math.inf), ("t_up", {}, math.nan)])
    assert value(text, "t_temperature_celsius", gpu="0") == math.inf and math.isnan(value(text, "t_up"))


def test_a_family_without_samples_is_left_out() -> None:
    assert render(METRICS, []) == ""
    assert set(families(render(METRICS, [("t_up", {}, 0)]))) == {"t_up"}


def test_textfile_is_replaced_whole(tmp_path) -> None:
    path = tmp_path / "rdma_llm.prom"
    write_textfile(path, "old\n")
    text = render(METRICS, [("t_up", {}, 1)])
    write_textfile(path, text)
    assert path.read_text() == text and parse(path.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["rdma_llm.prom"]
