"""The gpu_stack role on the controller alone (local connection, no lab): on this machine's real PCI bus it plans
nothing and changes nothing; on a fake root with the Fabric Manager guide's HGX H100 bus it plans the full stack and,
this Debian controller's apt sources carrying none of Ubuntu's NVIDIA packages, stops at the candidate check naming
every package, before any change; the plan's --check --diff shows each package before and after.

The GPU half is the recorded bus, not a GPU (this machine has none): what runs on a real GPU node is the same module
on its own /sys, and the install tasks after it (apt, apt-mark, systemd)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, playbook, run, tail, tool_env
from tests.unit.plugins.module_utils.gpu.helpers import from_lspci, node_state, stanza

pytestmark = pytest.mark.lint

KERNEL = "6.8.0-87-generic"
PACKAGES = [
    "linux-modules-nvidia-580-server-open-6.8.0-87-generic",
    "linux-modules-nvidia-580-server-open-generic",
    "nvidia-headless-no-dkms-580-server-open",
    "nvidia-utils-580-server",
    "nvidia-fabricmanager-580",
    "libnvidia-nscq-580",
]


def inventory(tmp_path: Path, **host: object) -> Path:
    """The lab's group_vars (the role's contract is checked first, as in site.yml) and this machine as the node."""
    inv = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventory" / "lab" / "group_vars", inv / "group_vars")
    base = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "cluster_fabric_interfaces": [{"name": "lo", "addresses": ["10.99.0.2/24"], "mtu": 9000}],
            "gpu_stack_blacklist_file": str(tmp_path / "etc" / "modprobe.d" / "rdma-llm-nouveau.conf")}  # fmt: skip
    data = {"all": {"children": {"rdma_nodes": {"hosts": {"here": {**base, **host}}}, "switches": {"hosts": {}}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))
    return inv


def hgx_root(tmp_path: Path) -> Path:
    """The guide's HGX H100 bus, Ubuntu's kernel release, the kernel meta-package installed and nothing else."""
    root = from_lspci(tmp_path / "root", "lspci_hgx_h100.txt")
    return node_state(root, kernel=KERNEL, status=stanza("linux-generic", "6.8.0-87.88"))


def test_cpu_node_plans_nothing_and_changes_nothing(tmp_path: Path) -> None:
    proc = playbook("playbooks/gpu_stack.yml", inventory=inventory(tmp_path), timeout=300)
    assert proc.returncode == 0, tail(proc)
    assert "msg: 'here: no NVIDIA GPU on the PCI bus'" in proc.stdout, tail(proc)
    assert "changed=0" in proc.stdout and "failed=0" in proc.stdout, tail(proc)
    assert not (tmp_path / "etc").exists()


def test_bad_input_is_refused_by_the_contract_first(tmp_path: Path) -> None:
    inv = inventory(tmp_path, gpu_stack_driver_version="580.95.05 nvidia-driver-575", gpu_stack_fabric_manager="nvs")
    proc = playbook("playbooks/gpu_stack.yml", inventory=inv, timeout=300)
    assert proc.returncode == 2, tail(proc)
    assert "here: gpu_stack_driver_version must be a driver version like 580.95.05" in proc.stdout, tail(proc)
    assert "here: gpu_stack_fabric_manager must be true, false or auto (got 'nvs')" in proc.stdout, tail(proc)
    assert "Plan the GPU stack" not in proc.stdout, tail(proc)


def test_hgx_node_stops_at_the_candidate_check_before_any_change(tmp_path: Path) -> None:
    inv = inventory(tmp_path, gpu_stack_root=str(hgx_root(tmp_path)), gpu_stack_driver_version="580.95.05")
    for args in (["--check", "--diff"], []):
        proc = playbook("playbooks/gpu_stack.yml", *args, inventory=inv, timeout=300)
        assert proc.returncode == 2, tail(proc)
        assert "this node's apt sources cannot install the plan, nothing was changed: " in proc.stdout, tail(proc)
        for name in PACKAGES:
            assert f"{name}: no installation candidate" in proc.stdout, tail(proc)
        assert not (tmp_path / "etc").exists()


def test_hgx_plan_in_check_mode_with_a_diff(tmp_path: Path) -> None:
    """The module alone (candidates not asked: this controller has no Ubuntu archive): the plan and its diff."""
    root = hgx_root(tmp_path)
    args = {"root": str(root), "driver_version": "580.95.05", "check_candidates": False}
    cmd = ["ansible", "-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
    cmd += ["--check", "--diff", "-m", "rdma_llm.cluster.gpu_stack_plan", "-a", json.dumps(args), "localhost"]
    proc = run(cmd, timeout=120, env=tool_env(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json"))
    assert proc.returncode == 0, tail(proc)
    # the json callback's document, after the profiling callback's first line
    doc, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    result = doc["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["changed"] is False and result["needed"] is True
    assert [p["name"] for p in result["packages"]] == PACKAGES
    assert result["fabric_manager"] == {"needed": True, "why": "4 NVSwitches on the PCI bus"}
    assert result["hold"] == [*PACKAGES, "linux-generic"]
    assert result["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]
    assert result["diff"]["before"].splitlines() == [f"{name} absent" for name in PACKAGES]
    assert result["diff"]["after"].splitlines()[2] == "nvidia-headless-no-dkms-580-server-open 580.95.05-* held"
    assert result["summary"].startswith("8 x H100 SXM5 80GB, 4 NVSwitches: driver 580.95.05 (open modules)")
