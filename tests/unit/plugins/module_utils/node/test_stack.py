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


def dpkg(root: Path, **versions: str) -> None:
    """dpkg's status file with these packages installed (name=version), in this VM's status format."""
    from tests.unit.plugins.module_utils.gpu.helpers import stanza

    (root / "var/lib/dpkg").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/dpkg/status").write_text("".join(stanza(n.replace("_", "-"), v) for n, v in versions.items()))


def test_the_gpu_stacks_packages_are_in_the_stack_and_must_match_the_driver(tmp_path: Path) -> None:
    root, tools = stack_root(tmp_path)
    # the H200 recording's driver is 580.159.04
    dpkg(root, nvidia_fabricmanager_580="580.159.04-0ubuntu0.24.04.1", libnvidia_nscq_580="580.159.04-0ubuntu0.24.04.1",
         datacenter_gpu_manager_4_core="1:4.4.1-1", linux_generic="6.8.0-90.91")  # fmt: skip
    cfg = config(venv="/opt/venv")
    facts = collect(cfg, root, tools, NOW, groups=("stack",))
    assert facts["stack"]["fabric manager"] == facts["stack"]["nscq"] == "580.159.04-0ubuntu0.24.04.1"
    assert facts["stack"]["dcgm"] == "1:4.4.1-1"
    j = evaluate(facts, cfg)
    assert [c["check"] for c in j.checks] == ["stack"] and one(j, "stack")["status"] == "pass"
    # the fabric manager of another driver: a fail, whatever the baseline
    dpkg(root, nvidia_fabricmanager_580="580.95.05-0ubuntu0.24.04.2", libnvidia_nscq_580="1:580.159.04-1")
    facts = collect(cfg, root, tools, NOW, groups=("stack",))
    checks = {c["check"]: (c["status"], c["detail"]) for c in evaluate(facts, cfg).checks}
    assert checks["stack fabric manager"] == (
        "fail",
        "fabric manager 580.95.05-0ubuntu0.24.04.2 with driver 580.159.04: they must be one version",
    )
    assert "stack nscq" not in checks  # an epoch and NVIDIA's own revision are the same upstream version


def test_no_dpkg_no_gpu_packages(tmp_path: Path) -> None:
    root, tools = stack_root(tmp_path)
    assert not {"fabric manager", "nscq", "dcgm"} & set(collect(config(), root, tools, NOW, groups=("stack",))["stack"])


def test_firmware_below_its_models_minimum_fails(tmp_path: Path) -> None:
    """The recorded H100 node: mlx5_0 a ConnectX-7 (hca_type MT4129) at 28.41.1000, mlx5_bond_0 a BlueField-3
    (MT41692) at 32.38.3056."""
    from tests.unit.plugins.module_utils.node.helpers import fake_root

    root = fake_root(tmp_path)
    cfg = config(thresholds={"firmware_minimum": {"MT4129": "28.41.1000", "MT41692": "32.38.3057"}})
    j = evaluate(collect(cfg, root, FakeTools({}), NOW, groups=("stack",)), cfg)
    checks = {c["check"]: (c["status"], c["detail"]) for c in j.checks}
    assert checks["firmware mlx5_0"] == ("pass", "mlx5_0 (MT4129) firmware 28.41.1000, minimum 28.41.1000")
    assert checks["firmware mlx5_bond_0"] == ("fail", "mlx5_bond_0 (MT41692) firmware 32.38.3056, minimum 32.38.3057")
    # numbers, not strings: 28.100.1000 is above 28.41.1000; a model not listed is not judged
    (root / "sys/class/infiniband/mlx5_0/fw_ver").write_text("28.100.1000\n")
    cfg = config(thresholds={"firmware_minimum": {"MT4129": "28.41.1000"}})
    j = evaluate(collect(cfg, root, FakeTools({}), NOW, groups=("stack",)), cfg)
    assert [(c["check"], c["status"]) for c in j.checks if c["check"].startswith("firmware")] == [
        ("firmware mlx5_0", "pass")
    ]
    cfg = config()
    j = evaluate(collect(cfg, root, FakeTools({}), NOW, groups=("stack",)), cfg)
    assert not [c for c in j.checks if c["check"].startswith("firmware")]


def test_a_driver_installed_but_not_loaded_is_a_reboot_pending(tmp_path: Path) -> None:
    """`modinfo -F version nvidia` prints the version of the module the next boot loads (one line, kmod's own
    format: the field's value); the H200 recording's loaded driver is 580.159.04."""
    root, tools = stack_root(tmp_path)
    cfg = config()
    for on_disk, expected in (("580.159.04\n", None), ("580.95.05\n", "fail")):
        tools.outputs["modinfo -F"] = on_disk
        facts = collect(cfg, root, tools, NOW, groups=("stack",))
        assert facts["stack"]["gpu driver on disk"] == on_disk.strip()
        checks = {c["check"]: (c["status"], c["detail"]) for c in evaluate(facts, cfg).checks}
        if expected is None:
            assert "gpu driver reboot" not in checks
        else:
            assert checks["gpu driver reboot"] == (
                "fail",
                "gpu driver 580.159.04 loaded, 580.95.05 installed: a reboot is pending",
            )
    assert ["modinfo", "-F", "version", "nvidia"] in tools.calls
    # no module for this kernel (modinfo exits 1): nothing to compare, no key
    tools.outputs["modinfo -F"] = {"rc": 1, "out": "", "err": "modinfo: ERROR: Module nvidia not found.\n"}
    assert "gpu driver on disk" not in collect(cfg, root, tools, NOW, groups=("stack",))["stack"]
