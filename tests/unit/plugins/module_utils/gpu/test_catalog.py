"""The GPU table and the driver branch rules: every row resolves to an architecture, each bound both ways."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import catalog


def test_every_row_has_an_architecture():
    for device in catalog.GPUS:
        assert catalog.describe(device)["architecture"] in catalog.ARCHITECTURES, device


@pytest.mark.parametrize(("device", "name", "arch"), [("2330", "H100 SXM5 80GB", "hopper"),
                                                       ("2335", "H200", "hopper"), ("20b0", "A100 SXM4 40GB", "ampere"),
                                                       ("1eb8", "Tesla T4", "turing"), ("27b8", "L4", "ada"),
                                                       ("1db5", "Tesla V100 SXM2 32GB", "volta"),
                                                       ("29bc", "HGX B200 GPU", "blackwell")])  # fmt: skip
def test_describe(device, name, arch):
    assert catalog.describe(device) == {"name": name, "chip": catalog.GPUS[device][1], "architecture": arch}


def test_unknown_device_and_the_inventorys_own():
    assert catalog.describe("ffff") is None
    extra = {"ffff": {"name": "GB300", "architecture": "blackwell"}, "2330": {"architecture": "hopper"}}
    assert catalog.describe("ffff", extra) == {"name": "GB300", "chip": "", "architecture": "blackwell"}
    assert catalog.describe("2330", extra)["name"] == "2330"  # the inventory's row wins over the table


@pytest.mark.parametrize(("arch", "branch", "open_modules", "problem"), [
    ("hopper", 520, False, ""),
    ("hopper", 515, True, "hopper needs driver branch 520 or later (got 515)"),
    ("volta", 580, False, ""),
    ("volta", 580, True, "volta has no open kernel modules (gpu_stack_driver_open: false)"),
    ("turing", 580, True, ""),
    ("turing", 510, True, "open kernel modules start with branch 515 (got 510)"),
    ("turing", 515, True, ""),
    ("turing", 510, False, ""),
    ("volta", 590, False, "volta's last driver branch is 580 (got 590)"),
    ("volta", 384, False, ""),
    ("volta", 375, False, "volta needs driver branch 384 or later (got 375)"),
    ("blackwell", 570, True, ""),
    ("blackwell", 565, True, "blackwell needs driver branch 570 or later (got 565)"),
    ("blackwell", 580, False, "blackwell runs only NVIDIA's open kernel modules (gpu_stack_driver_open: true)"),
    ("ampere", 999, False, ""),
    ("kepler", 470, False, "architecture 'kepler' unknown (one of volta, turing, ampere, ada, hopper, blackwell)"),
])  # fmt: skip
def test_branch_problem(arch, branch, open_modules, problem):
    assert catalog.branch_problem(arch, branch, open_modules) == problem


def test_entries_problem():
    assert catalog.entries_problem({}) is None
    assert catalog.entries_problem({"2901": {"name": "B200", "architecture": "blackwell"}}) is None
    assert catalog.entries_problem([]).startswith("must be a mapping")
    assert catalog.entries_problem({"2901": {"architecture": "rubin"}}).startswith("2901: needs an architecture")
    assert catalog.entries_problem({"29BC": {"architecture": "blackwell"}}).startswith("'29BC': a device id is 4")
