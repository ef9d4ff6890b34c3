"""The software stack (plugins/module_utils/node/stack.py): read on a fake node with recorded ethtool -i and
nvidia-smi, and judged against the fleet's."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.collect import collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_nvidia_smi
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import evaluate

from tests.unit.plugins.module_utils.node.helpers import NOW, FakeTools, config, fixture, one, status


def stack_root(tmp_path: Path, firmware="14.23.1020", torch="2.9.1+cu128") -> tuple[Path, FakeTools]:
    """A node with a ConnectX-4 Lx fabric NIC (ethtool -i recorded), an H200's nvidia-smi and a venv."""
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0-90-generic\n")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('PRETTY_NAME="Ubuntu 24.04.3 LTS"\n')
    (root / "sys/class/net/rdma0").mkdir(parents=True)
    site = root / "opt/venv/lib/python3.12/site-packages"
    for name in (f"torch-{torch}", "nvidia_nccl_cu12-2.27.3", "numpy-2.3.1"):
        (site / f"{name}.dist-info").mkdir(parents=True)
    (root / "opt/venv/.pins.sha256").write_text("0123456789abcdef0123\n")
    ethtool = fixture("ethtool_i_mlx5_cx4lx.txt").replace("14.23.1020", firmware)
    tools = FakeTools(
        {"ethtool -i": ethtool, "dpkg-query": "50.0-2ubuntu0.2", "nvidia-smi": fixture("nvidia_smi_h200.xml")}
    )
    return root, tools


def test_the_stack_a_node_runs(tmp_path: Path) -> None:
    root, tools = stack_root(tmp_path)
    cfg = config(venv="/opt/venv")
    facts = collect(cfg, root, tools, NOW, groups=("stack",))
    assert facts["stack"] == {
        "kernel": "6.8.0-90-generic",
        "os": "Ubuntu 24.04.3 LTS",
        "nic driver": "mlx5_core",
        "nic driver version": "3.0-1 (January 2015)",
        "nic firmware": "14.23.1020",
        "rdma-core": "50.0-2ubuntu0.2",
        "gpu driver": "580.159.04",
        "cuda": parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))["cuda"],
        "vbios": parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))["gpus"][0]["vbios"],
        "torch": "2.9.1+cu128",
        "nvidia-nccl-cu12": "2.27.3",
        "venv pins": "0123456789ab",
    }
    assert facts["stack"]["cuda"] and facts["stack"]["vbios"], "the H200 recording has both"
    j = evaluate(facts, cfg)
    assert one(j, "stack")["status"] == "pass" and "no passing ladder to compare with yet" in one(j, "stack")["detail"]


def test_a_node_whose_stack_moved_since_the_ladder_passed_warns(tmp_path: Path) -> None:
    root, tools = stack_root(tmp_path)
    fleet = collect(config(venv="/opt/venv"), root, tools, NOW, groups=("stack",))["stack"]
    root, tools = stack_root(tmp_path / "later", firmware="14.32.1010", torch="2.10.0+cu128")
    cfg = config(venv="/opt/venv", baseline={"stack": fleet})
    j = evaluate(collect(cfg, root, tools, NOW, groups=("stack",)), cfg)
    assert {c["check"]: (c["status"], c["detail"]) for c in j.checks} == {
        "stack nic firmware": ("warn", "nic firmware 14.32.1010, the fleet passed the ladder with 14.23.1020"),
        "stack torch": ("warn", "torch 2.10.0+cu128, the fleet passed the ladder with 2.9.1+cu128"),
    }
    strict = config(venv="/opt/venv", baseline={"stack": fleet}, thresholds={"stack_mismatch": "fail"})
    assert status(evaluate(collect(strict, root, tools, NOW, groups=("stack",)), strict)) == "fail"
    same = config(venv="/opt/venv", baseline={"stack": fleet})
    root, tools = stack_root(tmp_path / "same")
    assert [c["check"] for c in evaluate(collect(same, root, tools, NOW, groups=("stack",)), same).checks] == ["stack"]
