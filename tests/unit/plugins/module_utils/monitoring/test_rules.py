"""The alert rules (monitoring/rules.py): their parameters checked, the fabric interfaces' regex, the metric names
they read, docs/monitoring.md's table, and promtool itself: `promtool check rules` on the rendered file and
`promtool test rules` on promtool/*.yml, which feed input series and say when each alert fires and when it must not.

promtool is Debian 12's (prometheus 2.42, `make setup` unpacks it; tests/promtool.py): missing, these tests fail
with how to get it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import catalogue, rules, slurm
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.rdma import HW_COUNTERS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import DEFAULTS as NODE_CHECK
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.gpu import GPU_CHECKS

from tests.conftest import ROOT
from tests.promtool import promtool

PROMTOOL_TESTS = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "monitoring" / "promtool"
DOC = ROOT / "docs" / "monitoring.md"
# The lab's fabric interfaces (lab/cluster.py rail_ifname: rdma0, rdma1 with --rails 2), other parameters default.
LAB = {"fabric_interfaces": ["rdma0", "rdma1"]}
# overrides.yml: other values for the parameters, the interfaces as the inventory's dicts (example inventory).
OVERRIDES = {
    "fabric_interfaces": [{"name": "ens192", "addresses": ["10.10.10.1/24"], "mtu": 9000}],
    "down_for": "1m",
    "link_down_for": "1m",
    "flap_max": 2,
    "disk_free_min": 0.1,
    "disk_full_for": "0s",
}
PARAMS = {"overrides.yml": OVERRIDES}
FILES = sorted(p.name for p in PROMTOOL_TESTS.glob("*.yml"))


def render(directory, params) -> str:
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump(rules.rules(params), sort_keys=False))
    return str(path)


def run_promtool(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


# --- promtool


def test_promtool_accepts_the_rule_files(tmp_path) -> None:
    (tmp_path / "default").mkdir()
    (tmp_path / "lab").mkdir()
    done = run_promtool("check", "rules", render(tmp_path / "default", {}), render(tmp_path / "lab", LAB), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = [int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", done.stdout)]
    assert counts == [len(rules.RULES) - 2, len(rules.RULES)], done.stdout  # without interfaces: no link rules


@pytest.mark.parametrize("name", FILES)
def test_promtool_unit_tests(tmp_path, name) -> None:
    """One promtool run per file: every alert of its tests, at each eval_time, with its labels and annotations."""
    shutil.copy(PROMTOOL_TESTS / name, tmp_path / name)
    render(tmp_path, PARAMS.get(name, LAB))
    done = run_promtool("test", "rules", name, cwd=tmp_path)
    assert done.returncode == 0, (
        f"promtool test rules {name} (params {PARAMS.get(name, LAB)}):\n{done.stdout}{done.stderr}"
    )


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    fired, quiet = set(), set()
    for name in FILES:
        for group in yaml.safe_load((PROMTOOL_TESTS / name).read_text())["tests"]:
            for case in group.get("alert_rule_test") or []:
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {r.alert for r in rules.RULES}
    assert alerts - fired == set(), "never shown firing"
    assert alerts - quiet == set(), "never shown not firing"
    assert (fired | quiet) - alerts == set(), "tests of alerts that do not exist"


def test_promtool_missing_fails_with_the_way_to_get_it(monkeypatch, tmp_path) -> None:
    import tests.promtool as finder

    monkeypatch.setattr(finder, "LOCAL", tmp_path / "promtool")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"run `make setup`"):
        finder.promtool()


# --- the document


def test_the_document_has_a_group_per_concern_and_only_known_rules() -> None:
    doc = rules.rules(LAB)
    assert [g["name"] for g in doc["groups"]] == list(rules.GROUPS)
    found = [r["alert"] for g in doc["groups"] for r in g["rules"]]
    assert found == [r.alert for r in rules.RULES]
    assert len(set(found)) == len(found)
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        assert rule["alert"].startswith("RdmaLlm"), rule["alert"]
        assert set(rule["labels"]) == {"severity"} and rule["labels"]["severity"] in ("critical", "warning", "info")
        assert set(rule["annotations"]) == {"summary", "description"}
        text = rule["annotations"]["summary"] + rule["annotations"]["description"]
        assert "%" not in rule["expr"] + text, rule["alert"]  # every parameter substituted
        assert "{{ $labels." in text, rule["alert"]


def test_the_link_rules_need_fabric_interfaces() -> None:
    names = [r["alert"] for g in rules.rules({})["groups"] for r in g["rules"]]
    assert "RdmaLlmFabricLinkDown" not in names and "RdmaLlmFabricLinkFlapping" not in names
    assert "RdmaLlmSwitchPortDown" in names


def test_for_is_left_out_when_zero_and_kept_otherwise() -> None:
    def disk(params):
        return next(
            r for g in rules.rules(params)["groups"] for r in g["rules"] if r["alert"] == "RdmaLlmDiskNearlyFull"
        )

    assert disk({})["for"] == "30m"
    assert "for" not in disk({"disk_full_for": "0s"})


def test_the_defaults_are_the_node_checks() -> None:
    """The alerts hold a node to the thresholds its node check (and Slurm's drain) holds it to."""
    d = rules.DEFAULTS
    assert rules.seconds(d["link_down_for"]) == NODE_CHECK["outage_max_s"]
    assert rules.seconds(d["flap_window"]) == NODE_CHECK["flap_window_s"]
    assert d["flap_max"] == NODE_CHECK["flap_max"]
    assert d["nodrop_qos_group"] == NODE_CHECK["nodrop_priority"]
    assert d["ecc_uncorrectable_volatile_max"] == NODE_CHECK["ecc_uncorrectable_volatile_max"]
    assert d["row_remap_uncorrectable_max"] == NODE_CHECK["row_remap_uncorrectable_max"]
    assert rules.resolve({}) == {**d, "transport_counters": sorted(d["transport_counters"])}


# --- names the rules read


def _names(expr: str) -> set:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values (a file name's pattern) are not metric names
    return set(re.findall(r"\b(?:rdma_llm|node)_[a-z0-9_]+\b", expr)) | (
        {"up"} if re.search(r"\bup\{", expr) else set()
    )


def test_every_metric_a_rule_reads_exists() -> None:
    """The project's metrics (the catalogue, docs/monitoring.md's table) and node_exporter 1.5's, nothing else."""
    ours = {m.name for m in catalogue.metrics()}
    used = set().union(*(_names(r["expr"]) for g in rules.rules(LAB)["groups"] for r in g["rules"]))
    assert used - ours - set(rules.NODE_EXPORTER) == set()
    assert set(rules.NODE_EXPORTER) - used == set(), "node_exporter names listed but read by no rule"


def test_the_port_error_rule_reads_every_error_counter_of_the_node_check() -> None:
    assert set(rules.PORT_ERRORS) == set(NODE_CHECK["error_counters"])
    expr = rules._port_errors_expr()
    for counter, metric in rules.PORT_ERRORS.items():
        assert f'label_replace(increase({metric}[%rate_window]) > %port_errors_max, "counter", "{counter}"' in expr


def test_the_labels_the_rules_match_are_the_collectors() -> None:
    exprs = {r.alert: r.expr for r in rules.RULES}
    states = re.findall(r'state=~"([^"]+)"', exprs["RdmaLlmSlurmNodeDrained"] + exprs["RdmaLlmSlurmNodeDown"])
    assert {s for group in states for s in group.split("|")} <= set(slurm.STATES)
    assert re.search(r'check="([^"]+)"', exprs["RdmaLlmGpuXid"]).group(1) in GPU_CHECKS
    assert set(rules.DEFAULTS["transport_counters"]) <= set(HW_COUNTERS)
    assert 'counter="np_ecn_marked_roce_packets"' in exprs["RdmaLlmNicEcnMarked"]
    assert "np_ecn_marked_roce_packets" in HW_COUNTERS


# --- parameters


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"link_down_for": 30}, r"link_down_for must be a duration like 30s, 5m or 1h \(got 30\)"),
        ({"link_down_for": "30"}, r"link_down_for must be a duration"),
        ({"down_for": "0s"}, r"down_for must be a duration above 0"),
        ({"rate_window": "5min"}, r"rate_window must be a duration above 0"),
        ({"flap_window": "1h1d"}, r"flap_window must be a duration above 0"),  # units out of order
        ({"flap_max": 0}, r"flap_max must be an integer at least 1 \(got 0\)"),
        ({"flap_max": True}, r"flap_max must be an integer"),
        ({"flap_max": 2.5}, r"flap_max must be an integer"),
        ({"port_errors_max": -1}, r"port_errors_max must be an integer at least 0"),
        ({"pfc_pause_ratio_max": 0}, r"pfc_pause_ratio_max must be a number over 0 and at most 1 \(got 0\)"),
        ({"pfc_pause_ratio_max": 1.5}, r"pfc_pause_ratio_max must be a number over 0 and at most 1"),
        ({"pfc_pause_ratio_max": "0.2"}, r"pfc_pause_ratio_max must be a number"),
        ({"pfc_pause_ratio_max": float("nan")}, r"pfc_pause_ratio_max must be a number"),
        ({"pfc_pause_ratio_max": True}, r"pfc_pause_ratio_max must be a number over 0 and at most 1 \(got True\)"),
        ({"switch_pfc_frames_per_second": float("inf")}, r"switch_pfc_frames_per_second must be a number over 0"),
        ({"switch_pfc_frames_per_second": 0}, r"switch_pfc_frames_per_second must be a number over 0"),
        ({"ecn_marks_per_second": -1}, r"ecn_marks_per_second must be a number at least 0"),
        ({"nodrop_qos_group": 8}, r"nodrop_qos_group must be an integer at least 0 and at most 7 \(got 8\)"),
        ({"disk_free_min": 0}, r"disk_free_min must be a number over 0 and at most 1"),
        ({"disk_free_min": 5}, r"disk_free_min must be a number over 0 and at most 1 \(got 5\)"),
        ({"train_throughput_min_ratio": 1.1}, r"train_throughput_min_ratio must be a number over 0 and at most 1"),
        ({"train_stall_after": ""}, r"train_stall_after must be a duration above 0"),
        ({"transport_counters": []}, r"transport_counters must be a non-empty list of"),
        ({"transport_counters": ["symbol_error"]}, r"transport_counters must be a non-empty list of"),
        ({"node_exporter_job": 'node"} or vector(1)'}, r"node_exporter_job must be a scrape job name"),
        ({"fabric_interfaces": "rdma0"}, r"fabric_interfaces must be a list of interface names \(got 'rdma0'\)"),
        (
            {"fabric_interfaces": ["rdma0", "a" * 16]},
            r"fabric_interfaces: every interface needs a Linux interface name",
        ),
        ({"fabric_interfaces": ["rdma0|eno1"]}, r"fabric_interfaces: .* got 'rdma0\|eno1'"),
        ({"fabric_interfaces": ["rdma.*"]}, r"fabric_interfaces: .* got 'rdma\.\*'"),
        ({"fabric_interfaces": [".."]}, r"fabric_interfaces: .* got '\.\.'"),
        ({"fabric_interfaces": [{"mtu": 9000}]}, r"fabric_interfaces: .* got None"),
        ({"link_down": "30s"}, r"unknown rules parameters link_down \(known: node_exporter_job, down_for"),
    ],
)
def test_a_bad_parameter_is_refused_by_name(params, error) -> None:
    with pytest.raises(RuleError, match=error):
        rules.rules(params)


def test_the_parameters_must_be_a_mapping() -> None:
    with pytest.raises(RuleError, match=r"must be a mapping \(got list\)"):
        rules.rules([])
    assert rules.rules(None) == rules.rules({})


def test_integers_as_the_inventory_hands_them_over() -> None:
    """`-e` values arrive as strings: a string of digits is the integer it spells (numbers.as_int)."""
    assert rules.resolve({"flap_max": "3", "nodrop_qos_group": "4"})["flap_max"] == 3
    assert 'qos_group="4"' in str(rules.rules({"nodrop_qos_group": "4"}))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1d", 86400), ("2w", 1209600), ("1y", 31536000), ("250ms", 0.25),
     ("0s", 0), ("5", None), ("5 m", None), ("m", None), ("", None), ("1m1h", None), (300, None), (None, None)],
)  # fmt: skip
def test_durations(text, seconds) -> None:
    assert rules.seconds(text) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(30, "30s"), (86400, "1d"), (90, "1m30s"), (3600, "1h"), (0, "0s")])
def test_duration_text(seconds, text) -> None:
    assert rules.duration_text(seconds) == text
    assert rules.seconds(text) == seconds


# --- the fabric interfaces' regex


def test_the_interface_regex_is_anchored_escaped_and_sorted() -> None:
    names = ["rdma1", {"name": "rdma0", "mtu": 9000}, "eth0.100", "rdma1", "ib-0_a"]
    regex = rules.interface_regex(names)
    assert regex == "^(?:eth0[.]100|ib-0_a|rdma0|rdma1)$"
    for name in ("rdma0", "rdma1", "eth0.100", "ib-0_a"):
        assert re.fullmatch(regex, name), name
        assert re.search(regex, name)
    for other in ("rdma00", "xrdma0", "rdma", "eth0x100", "eth0.1000", "rdma0|rdma1", ""):
        assert not re.search(regex, other), other
    assert "\\" not in regex  # nothing to escape again in PromQL's string or in YAML


def test_the_link_rules_match_the_regex() -> None:
    exprs = [r["expr"] for g in rules.rules(LAB)["groups"] for r in g["rules"]]
    assert 'node_network_up{device=~"^(?:rdma0|rdma1)$"} == 0' in exprs


# --- docs/monitoring.md


def test_the_docs_table_is_the_rules() -> None:
    text = DOC.read_text()
    found = re.search(r"<!-- Generated by [^\n]*rules\.py[^\n]*-->\n(.*?)<!-- end of the alert rules -->", text, re.S)
    assert found, "docs/monitoring.md lost the alert rules' generated table or its markers"
    assert found.group(1) == rules.markdown(), "regenerate the table with rules.markdown()"


def test_the_filter_is_the_rules_function() -> None:
    assert {"monitoring_rules": rules.rules} == rules.FILTERS
    plugin = (ROOT / "plugins" / "filter" / "monitoring.py").read_text()
    assert re.search(r"adapt\(\{[^}]*\*\*rules\.FILTERS|monitoring\.rules import FILTERS", plugin), (
        "the filter file adapts rules.FILTERS"
    )
