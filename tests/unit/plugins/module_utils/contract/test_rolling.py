"""The inventory contract's rolling rules (plugins/module_utils/contract/rolling.py): exact messages.

Each bad inventory is the valid field cluster (inventories.good()) with the rolling role's defaults on its nodes and
one change; the contract must return exactly the listed errors, each naming host and variable.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check

from tests.unit.plugins.module_utils.contract.inventories import Change, good, setv

pytestmark = pytest.mark.lint

DEFAULTS = {
    "rolling_change": "",
    "rolling_batch": "20%",
    "rolling_playbook": "/srv/rdma-llm-cluster/playbooks/site.yml",
    "rolling_args": [],
    "rolling_job_deadline": 3600,
    "rolling_poll_interval": 5,
    "rolling_proof": True,
    "rolling_proof_pair_seconds": 3,
    "rolling_resume_deadline": 120,
    "rolling_report_dir": "/srv/rdma-llm-cluster/artifacts/rolling",
    "rolling_repair_reboot": True,
    "rolling_repair_power_cycle": [],
    "rolling_repair_reboot_timeout": 600,
}


def everywhere(name: str, value) -> Change:
    def change(inv) -> None:
        for host in ("n1", "n2"):
            inv.hostvars[host][name] = value

    return change


def reports(change: Change) -> list[str]:
    inv = good()
    for host in ("n1", "n2"):
        inv.hostvars[host].update(DEFAULTS)
    change(inv)
    return [str(p) for p in check(inv)]


BAD: list[tuple[str, Change, list[str]]] = [
    ("batch-zero", everywhere("rolling_batch", 0),
     ["all: rolling_batch is 0: a count of nodes (2) or a percentage of them (25%)"]),
    ("batch-over-100-percent", everywhere("rolling_batch", "150%"),
     ["all: rolling_batch is '150%': a percentage is at most 100%"]),
    ("batch-a-word", setv("n2", "rolling_batch", "half"),
     ["n2: rolling_batch is 'half': a count of nodes (2) or a percentage of them (25%)"]),
    ("batch-a-boolean", everywhere("rolling_batch", True),
     ["all: rolling_batch is True: a count of nodes (2) or a percentage of them (25%)"]),
    ("change-with-a-quote", everywhere("rolling_change", "qos'; scontrol shutdown"),
     ["all: rolling_change is \"qos'; scontrol shutdown\": a short name of the change (1-64 characters: letters,"
      " digits, space and ._:=+/,-, no ': '), the drain reason names it"]),
    ("deadline-negative", everywhere("rolling_job_deadline", -1),
     ["all: rolling_job_deadline must be an integer >= 0 (got -1)"]),
    ("poll-zero", everywhere("rolling_poll_interval", 0),
     ["all: rolling_poll_interval must be an integer 1-3600 (got 0)"]),
    ("proof-a-string", everywhere("rolling_proof", "maybe"),
     ["all: rolling_proof must be true or false (got 'maybe')"]),
    ("args-not-a-list", everywhere("rolling_args", "--tags rdma_qos"),
     ["all: rolling_args must be a list (got '--tags rdma_qos')"]),
    ("playbook-relative", everywhere("rolling_playbook", "site.yml"),
     ["all: rolling_playbook must be an absolute path or a collection's playbook (ns.collection.name) (got"
      " 'site.yml')"]),
    ("report-dir-relative", everywhere("rolling_report_dir", "artifacts/rolling"),
     ["all: rolling_report_dir must be an absolute path (got 'artifacts/rolling')"]),
    ("power-cycle-a-string", setv("n1", "rolling_repair_power_cycle", "ipmitool chassis power cycle"),
     ["n1: rolling_repair_power_cycle must be a list (got 'ipmitool chassis power cycle')"]),
    ("reboot-timeout-zero", everywhere("rolling_repair_reboot_timeout", 0),
     ["all: rolling_repair_reboot_timeout must be an integer >= 1 (got 0)"]),
    ("reboot-a-word", everywhere("rolling_repair_reboot", "ture"),
     ["all: rolling_repair_reboot must be true or false (got 'ture')"]),
]  # fmt: skip


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in BAD])
def test_bad_rolling_inventory_names_host_and_variable(change, expected) -> None:
    assert reports(change) == expected


@pytest.mark.parametrize(
    "change",
    [
        everywhere("rolling_batch", 1),
        everywhere("rolling_batch", "100%"),
        everywhere("rolling_batch", "1%"),
        everywhere("rolling_change", "torch 2.13.1 pin"),
        everywhere("rolling_job_deadline", 0),
        everywhere("rolling_playbook", "rdma_llm.cluster.site"),
        everywhere("rolling_args", ["--tags", "rdma_qos", "-e", "rdma_qos_profile=strict"]),
    ],
)
def test_the_limits_themselves_are_allowed(change) -> None:
    assert reports(change) == []
