"""The switch's shared tables: the queue schemes (plugins/module_utils/switch/queues.py), read by the value rules and,
through the nxos_roce_qos_scheme filter, by the role; and the QoS ranges of host/qos_values.py, which the value rules
(switch/values.py) import instead of writing their own. Each is written once: these tests fail when a table says
something else than NX-OS, or when a second copy comes back."""

from __future__ import annotations

import ast
import re

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import qos_values
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import queues
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import values as rules

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.switch.test_values import GOOD

pytestmark = pytest.mark.switch

ROLE = ROOT / "roles" / "nxos_roce_qos"
VALUES_PY = ROOT / "plugins" / "module_utils" / "switch" / "values.py"


def problems(**changes):
    return rules.nxos_roce_qos_validate({**GOOD, **changes})


def test_the_two_schemes_are_the_nexus_layouts():
    """NX-OS's own names and qos-groups, spelled out: what the template renders and the post-check looks for."""
    assert queues.QUEUE_SCHEMES == {
        "8q": {"network_class": "c-8q-nq", "queuing_class": "c-out-8q-q", "queues": [1, 2, 3, 4, 5, 6, 7]},
        "4q": {"network_class": "c-nq", "queuing_class": "c-out-q", "queues": [1, 2, 3]},
    }


def test_every_queue_is_a_priority_of_its_own():
    low, high = qos_values.PRIORITY_RANGE
    for name, scheme in queues.QUEUE_SCHEMES.items():
        assert scheme["queues"] == sorted(set(scheme["queues"])), name
        assert all(low <= queue <= high for queue in scheme["queues"]), name


def test_queue_scheme_hands_out_a_copy_and_refuses_an_unknown_name():
    scheme = queues.queue_scheme("4q")
    assert scheme == queues.QUEUE_SCHEMES["4q"]
    scheme["queues"].append(7)
    scheme["queuing_class"] = "x"
    assert (
        queues.QUEUE_SCHEMES["4q"]["queues"] == [1, 2, 3] and queues.QUEUE_SCHEMES["4q"]["queuing_class"] == "c-out-q"
    )
    for bad in ("16q", "8Q", None, 8, ["8q"]):
        with pytest.raises(RuleError, match=r"must be one of \['4q', '8q'\]"):
            queues.queue_scheme(bad)


def test_the_filter_plugin_hands_the_table_to_the_role():
    """plugins/filter/nxos_roce_qos_validate.py adapts values.FILTERS: the role's vars read the scheme from it."""
    assert rules.FILTERS["nxos_roce_qos_scheme"] is queues.queue_scheme
    assert rules.FILTERS["nxos_roce_qos_validate"] is rules.nxos_roce_qos_validate
    vars_main = (ROLE / "vars" / "main.yml").read_text()
    assert re.search(
        r'^__nxos_roce_qos_scheme: "\{\{ nxos_roce_qos_queue_scheme \| rdma_llm\.cluster\.nxos_roce_qos_scheme \}\}"$',
        vars_main,
        re.M,
    ), "vars/main.yml must take the scheme from the filter"


@pytest.mark.parametrize("path", ["vars/main.yml", "templates/nxos_roce_qos.cfg.j2", "tasks"])
def test_the_role_keeps_no_copy_of_the_schemes(path):
    """No class-name prefix or queue list of a scheme in the role's vars, template or tasks (comments aside)."""
    files = sorted((ROLE / path).rglob("*")) if (ROLE / path).is_dir() else [ROLE / path]
    for file in files:
        if not file.is_file():
            continue
        code = [line for line in file.read_text().splitlines() if not line.lstrip().startswith(("#", "{#", "!"))]
        for line in code:
            assert not re.search(r"\bc-(out-|8q-|nq)|\[1, 2, 3", line), f"{file}: {line}"
            assert "__nxos_roce_qos_schemes" not in line, f"{file}: {line}"


def test_the_argument_spec_offers_exactly_the_schemes():
    """meta/argument_specs.yml cannot import Python: its choices are checked against the table instead."""
    spec = (ROLE / "meta" / "argument_specs.yml").read_text()
    block = re.search(r"^ +nxos_roce_qos_queue_scheme:\n((?: {8,}.*\n)+)", spec, re.M)
    assert block, "nxos_roce_qos_queue_scheme is not in the argument spec"
    choices = re.search(r"choices: \[([^\]]*)\]", block.group(1))
    assert choices and sorted(c.strip() for c in choices.group(1).split(",")) == sorted(queues.QUEUE_SCHEMES)


def test_the_role_default_is_a_scheme():
    defaults = (ROLE / "defaults" / "main.yml").read_text()
    default = re.search(r"^nxos_roce_qos_queue_scheme: (\S+)$", defaults, re.M)
    assert default and default.group(1) in queues.QUEUE_SCHEMES


def test_the_value_rules_read_the_shared_table(monkeypatch):
    """A change to the one table changes what the validator accepts: it holds no copy."""
    assert rules.QUEUE_SCHEMES is queues.QUEUE_SCHEMES
    four = {
        **GOOD,
        "nxos_roce_qos_queue_scheme": "4q",
        "nxos_roce_qos_cnp_qos_group": 2,
        "nxos_roce_qos_tcp_qos_group": 1,
    }
    assert rules.nxos_roce_qos_validate(four) == []
    monkeypatch.setitem(queues.QUEUE_SCHEMES, "4q", {**queues.QUEUE_SCHEMES["4q"], "queues": [1, 3]})
    assert rules.nxos_roce_qos_validate(four) == [
        {
            "var": "nxos_roce_qos_cnp_qos_group",
            "msg": "nxos_roce_qos_cnp_qos_group: must be a queue of the 4q scheme ([1, 3]), got 2",
        }
    ]
    monkeypatch.setitem(queues.QUEUE_SCHEMES, "2q", {**queues.QUEUE_SCHEMES["4q"], "queues": [1, 2]})
    assert [p["msg"] for p in problems(nxos_roce_qos_queue_scheme="16q")] == [
        "nxos_roce_qos_queue_scheme: must be one of ['2q', '4q', '8q'], got '16q'"
    ]


@pytest.mark.parametrize(
    ("scheme", "queue", "ok"),
    [
        ("8q", 7, True),
        ("8q", 0, False),
        ("8q", 8, False),
        ("4q", 2, True),
        ("4q", 1, True),
        ("4q", 4, False),
        ("4q", 7, False),
    ],
)
def test_qos_groups_follow_the_scheme(scheme, queue, ok):
    """The CNP queue: qos-group 7 on an 8-queue Nexus, one of 1-3 (2 in the example inventory) on a 4-queue one."""
    found = problems(
        nxos_roce_qos_queue_scheme=scheme, nxos_roce_qos_cnp_qos_group=queue, nxos_roce_qos_tcp_lossless=True
    )
    listed = queues.QUEUE_SCHEMES[scheme]["queues"]
    msg = f"nxos_roce_qos_cnp_qos_group: must be a queue of the {scheme} scheme ({listed}), got {queue}"
    assert found == ([] if ok else [{"var": "nxos_roce_qos_cnp_qos_group", "msg": msg}])


def test_the_shared_ranges_are_nxos_ranges():
    """DSCP 0-63, CoS/qos-group 0-7 (priorities of their own 1-7), shares 0-100, the two profiles."""
    assert qos_values.DSCP_RANGE == (0, 63)
    assert qos_values.COS_RANGE == (0, 7)
    assert qos_values.PRIORITY_RANGE == (1, 7)
    assert qos_values.PERCENT_RANGE == (0, 100)
    assert qos_values.PROFILES == ("dcqcn", "pfc_only")
    assert rules.CLASS_SHARE_RANGE == (1, 100)


def test_the_value_rules_import_the_ranges():
    """The same objects, not equal copies."""
    for name in ("DSCP_RANGE", "COS_RANGE", "PERCENT_RANGE", "PROFILES"):
        assert getattr(rules, name) is getattr(qos_values, name), name


def _code_constants(path):
    """Every constant of the module's code, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings], tree


def test_values_py_writes_no_shared_range_or_scheme():
    """No 63, 7 or 0-63/0-7/1-100 of its own, no list of qos-groups, no profile names, no class-name prefix."""
    constants, tree = _code_constants(VALUES_PY)
    for node in constants:
        if isinstance(node.value, bool):
            continue
        if isinstance(node.value, int):
            assert node.value not in (63, 7), f"values.py:{node.lineno}: {node.value}"
        if isinstance(node.value, str):
            text = node.value
            assert not re.search(r"\b(0-63|0-7|1-7|1-100)\b", text), f"values.py:{node.lineno}: {text!r}"
            assert text not in ("dcqcn", "pfc_only") and not text.startswith(("c-8q", "c-out", "c-nq")), (
                f"values.py:{node.lineno}: {text!r}"
            )
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 3:
            ints = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
            assert ints != list(range(1, len(node.elts) + 1)), f"values.py:{node.lineno}: a list of qos-groups"
    assert not hasattr(rules, "SCHEMES")


@pytest.mark.parametrize("var", ["nxos_roce_qos_cnp_dscp", "nxos_roce_qos_tcp_dscp"])
def test_dscp_bounds_are_the_shared_range(var):
    low, high = qos_values.DSCP_RANGE
    others = {"nxos_roce_qos_roce_dscp": [26], "nxos_roce_qos_cnp_dscp": 48, "nxos_roce_qos_tcp_dscp": 10}
    for value in (low, high):
        taken = {v for k, v in others.items() if k != var and not isinstance(v, list)}
        if value in taken:
            continue
        assert problems(**{var: value}) == [], value
    for value in (low - 1, high + 1):
        msgs = [p["msg"] for p in problems(**{var: value})]
        assert len(msgs) == 1 and f"must be a DSCP value {low}-{high} " in msgs[0], msgs
    assert problems(nxos_roce_qos_roce_dscp=[low, high]) == []
    assert [p["msg"] for p in problems(nxos_roce_qos_roce_dscp=[high + 1])] == [
        f"nxos_roce_qos_roce_dscp: must be a non-empty list of DSCP values {low}-{high}, got [{high + 1}]"
    ]


def test_qos_group_bounds_are_the_shared_range():
    low, high = qos_values.COS_RANGE
    for value in (low, high):
        assert problems(nxos_roce_qos_default_qos_group=value) == [], value
    for value in (low - 1, high + 1):
        assert [p["msg"] for p in problems(nxos_roce_qos_default_qos_group=value)] == [
            f"nxos_roce_qos_default_qos_group: must be a qos-group {low}-{high} or null, got {value}"
        ]


def test_share_bounds_are_the_shared_range():
    top = qos_values.PERCENT_RANGE[1]
    assert (
        problems(
            nxos_roce_qos_roce_bandwidth_percent=top - 2,
            nxos_roce_qos_tcp_bandwidth_percent=1,
            nxos_roce_qos_default_bandwidth_percent=1,
        )
        == []
    )
    assert (
        problems(
            nxos_roce_qos_roce_bandwidth_percent=top,
            nxos_roce_qos_tcp_lossless=True,
            nxos_roce_qos_default_bandwidth_percent=0,
        )
        == []
    )
    assert [p["msg"] for p in problems(nxos_roce_qos_roce_bandwidth_percent=0)] == [
        "nxos_roce_qos_roce_bandwidth_percent: (1-100) + nxos_roce_qos_tcp_bandwidth_percent (1-100) + "
        "nxos_roce_qos_default_bandwidth_percent (0-100) must be at most 100, got 0 + 25 + 25"
    ]
    assert [
        p["msg"]
        for p in problems(
            nxos_roce_qos_roce_bandwidth_percent=top,
            nxos_roce_qos_tcp_lossless=True,
            nxos_roce_qos_default_bandwidth_percent=1,
        )
    ] == [
        "nxos_roce_qos_roce_bandwidth_percent: (1-100) + nxos_roce_qos_default_bandwidth_percent (0-100) "
        "must be at most 100, got 100 + 1"
    ]


@pytest.mark.parametrize("profile", qos_values.PROFILES)
def test_the_profiles_are_the_shared_ones(profile):
    assert problems(nxos_roce_qos_profile=profile) == []
    assert [p["msg"] for p in problems(nxos_roce_qos_profile="lossless")] == [
        "nxos_roce_qos_profile: must be one of ['dcqcn', 'pfc_only'], got 'lossless'"
    ]
