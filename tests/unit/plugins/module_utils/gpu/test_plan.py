"""The node's plan from its bus and the inventory's pins: each decision (GPU or not, fabric manager, branch, open
modules, what is installed or held already, reboot) both ways, on the recorded buses."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import node, pci, plan

from .helpers import from_lspci, from_nvidia_smi, from_sysfs_listing, node_state, stanza

KERNEL = "6.8.0-87-generic"
SETTINGS = {"driver_version": "580.95.05", "open": True, "kernel_flavour": "generic", "fabric_manager": "auto",
            "dcgm_packages": ["datacenter-gpu-manager-4-cuda12"], "gpus": {}}  # fmt: skip
DRIVER = ["linux-modules-nvidia-580-server-open-6.8.0-87-generic", "linux-modules-nvidia-580-server-open-generic",
          "nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"]  # fmt: skip
FM = ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
DCGM = ["datacenter-gpu-manager-4-cuda12"]


def bare(**state):
    return {"installed": {}, "held": [], "kernel": KERNEL, "loaded_driver": "", "nouveau_loaded": False,
            "blacklist": None, **state}  # fmt: skip


def planned(tmp_path, recording, state=None, **settings):
    devices = pci.read(from_lspci(tmp_path, recording))
    return plan.plan(devices, {**SETTINGS, **settings}, state or bare())


def test_hgx_h100_plans_driver_fabric_manager_nscq_and_dcgm(tmp_path):
    result = planned(tmp_path, "lspci_hgx_h100.txt")
    assert result["needed"] is True
    assert [p["name"] for p in result["packages"]] == DRIVER + FM + DCGM
    assert result["install"] == [
        "linux-modules-nvidia-580-server-open-6.8.0-87-generic",
        "linux-modules-nvidia-580-server-open-generic",
        "nvidia-headless-no-dkms-580-server-open=580.95.05-*",
        "nvidia-utils-580-server=580.95.05-*",
        "nvidia-fabricmanager-580=580.95.05-*",
        "libnvidia-nscq-580=580.95.05-*",
        "datacenter-gpu-manager-4-cuda12",
    ]
    assert result["hold"] == DRIVER + FM + DCGM  # no kernel meta installed in a bare state: none to hold
    assert result["services"] == ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"]
    assert result["fabric_manager"] == {"needed": True, "why": "4 NVSwitches on the PCI bus"}
    assert result["blacklist"] == plan.BLACKLIST
    assert {g["architecture"] for g in result["gpus"]} == {"hopper"} and len(result["gpus"]) == 8
    assert result["summary"] == ("8 x H100 SXM5 80GB, 4 NVSwitches: driver 580.95.05 (open modules), fabric manager "
                                 "yes (4 NVSwitches on the PCI bus), DCGM yes")  # fmt: skip
    assert result["reboot"] == ""


def test_hgx_a100_proprietary_modules(tmp_path):
    result = planned(tmp_path, "lspci_hgx_a100.txt", open=False, dcgm_packages=[])
    assert [p["name"] for p in result["packages"]] == [
        "linux-modules-nvidia-580-server-6.8.0-87-generic", "linux-modules-nvidia-580-server-generic",
        "nvidia-headless-no-dkms-580-server", "nvidia-utils-580-server", *FM]  # fmt: skip
    assert result["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]
    assert result["fabric_manager"]["why"] == "6 NVSwitches on the PCI bus"


def test_b200_needs_open_modules_and_says_where_its_nvswitches_are(tmp_path):
    with pytest.raises(plan.PlanError, match=r"^0000:1b:00.0 and 7 more: HGX B200 GPU: blackwell runs only NVIDIA's"):
        planned(tmp_path, "lspci_hgx_b200.txt", open=False)
    result = planned(tmp_path, "lspci_hgx_b200.txt")
    assert result["fabric_manager"]["needed"] is False
    assert "set gpu_stack_fabric_manager: true there" in result["fabric_manager"]["why"]
    assert result["nics"] == 4
    forced = planned(tmp_path, "lspci_hgx_b200.txt", fabric_manager="true")
    assert forced["fabric_manager"] == {"needed": True, "why": "gpu_stack_fabric_manager: true"}
    assert FM[0] in [p["name"] for p in forced["packages"]]


def test_fabric_manager_off_is_obeyed_and_named(tmp_path):
    result = planned(tmp_path, "lspci_hgx_h100.txt", fabric_manager="false")
    assert result["fabric_manager"] == {
        "needed": False,
        "why": "gpu_stack_fabric_manager: false (but 4 NVSwitches are on the bus)",
    }
    assert not set(FM) & {p["name"] for p in result["packages"]}
    with pytest.raises(plan.PlanError, match="must be auto, true or false"):
        planned(tmp_path, "lspci_hgx_h100.txt", fabric_manager="yes please")


def test_one_h200_vm_has_no_fabric_manager(tmp_path):
    devices = pci.read(from_nvidia_smi(tmp_path))
    result = plan.plan(devices, SETTINGS, bare(loaded_driver="580.159.04"))
    assert result["fabric_manager"] == {"needed": False, "why": "no NVSwitch on the PCI bus"}
    assert [g["name"] for g in result["gpus"]] == ["H200"]
    # the recording's driver is 580.159.04, the pin 580.95.05: the pin loads at the next boot
    assert result["reboot"] == "the loaded driver is 580.159.04, the planned 580.95.05: it loads at the next boot"
    same = plan.plan(devices, {**SETTINGS, "driver_version": "580.159.04"}, bare(loaded_driver="580.159.04"))
    assert same["reboot"] == ""


def test_cpu_node_plans_nothing(tmp_path):
    result = plan.plan(pci.read(from_sysfs_listing(tmp_path)), SETTINGS, bare())
    assert result["needed"] is False and result["summary"] == plan.NO_GPU == "no NVIDIA GPU on the PCI bus"
    assert result["packages"] == result["install"] == result["hold"] == result["services"] == []
    assert result["blacklist"] is None
    # nothing about the node is needed to say so: not even a kernel release
    assert plan.plan([], {"driver_version": "junk"}, {})["needed"] is False


def test_unknown_gpu_is_refused_until_the_inventory_names_it(tmp_path):
    from .helpers import function

    function(tmp_path, "0000:c1:00.0", "0x10de", "0x2901", "0x030200")
    devices = pci.read(tmp_path)
    with pytest.raises(plan.PlanError, match=r"^0000:c1:00\.0: NVIDIA device 2901 is not in the catalog: add it to "
                                             "gpu_stack_gpus"):  # fmt: skip
        plan.plan(devices, SETTINGS, bare())
    gpus = {"2901": {"name": "B200", "architecture": "blackwell"}}
    assert plan.plan(devices, {**SETTINGS, "gpus": gpus}, bare())["gpus"][0]["name"] == "B200"


@pytest.mark.parametrize(("version", "message"), [
    ("550", "must look like 580.95.05"), ("580.95.05.1", "must look like"), ("580.95.05; rm -rf /", "must look like"),
    ("515.105.01", r"^0000:1b:00.0 and 7 more: H100 SXM5 80GB: hopper needs driver branch 520 or later \(got 515\)$"),
])  # fmt: skip
def test_bad_versions_are_refused(tmp_path, version, message):
    with pytest.raises(plan.PlanError, match=message):
        planned(tmp_path, "lspci_hgx_h100.txt", driver_version=version)


def test_two_part_version_and_branch_of():
    assert plan.branch_of("580.95") == 580
    assert plan.branch_of("570.195.03") == 570


def test_unknown_kernel_is_refused(tmp_path):
    with pytest.raises(plan.PlanError, match="running kernel's release is unknown"):
        planned(tmp_path, "lspci_hgx_h100.txt", bare(kernel=""))


def test_installed_at_the_pin_and_held_is_nothing_to_do(tmp_path):
    installed = {name: "580.95.05-0ubuntu0.24.04.2" for name in DRIVER + FM}
    installed |= {DCGM[0]: "1:4.4.1-1", "linux-generic": "6.8.0-87.88", "linux-image-generic": "6.8.0-87.88"}
    held = DRIVER + FM + DCGM + ["linux-generic", "linux-image-generic"]
    result = planned(tmp_path, "lspci_hgx_h100.txt", bare(installed=installed, held=held, blacklist=plan.BLACKLIST,
                                                          loaded_driver="580.95.05"))  # fmt: skip
    assert (result["install"], result["hold"], result["blacklist"], result["reboot"]) == ([], [], None, "")
    assert result["held"] == sorted(held)


def test_another_version_installed_is_reinstalled_and_the_kernel_metas_are_held(tmp_path):
    installed = {name: "580.82.07-0ubuntu1" for name in DRIVER + FM} | {"linux-generic": "6.8.0-87.88"}
    result = planned(tmp_path, "lspci_hgx_h100.txt", bare(installed=installed, held=["nvidia-utils-580-server"]))
    # the modules' packages carry no pin (their version is the kernel's): installed means done
    assert result["install"] == ["nvidia-headless-no-dkms-580-server-open=580.95.05-*",
                                 "nvidia-utils-580-server=580.95.05-*", "nvidia-fabricmanager-580=580.95.05-*",
                                 "libnvidia-nscq-580=580.95.05-*", DCGM[0]]  # fmt: skip
    assert "linux-generic" in result["hold"] and "linux-image-generic" not in result["hold"]
    assert "nvidia-utils-580-server" not in result["hold"] and result["held"] == ["nvidia-utils-580-server"]
    assert result["undo"][0] == {
        "key": "hold linux-modules-nvidia-580-server-open-6.8.0-87-generic",
        "argv": ["apt-mark", "unhold", "linux-modules-nvidia-580-server-open-6.8.0-87-generic"],
    }
    assert [op["argv"][2] for op in result["undo"]] == result["hold"]
    # an epoch is the same upstream version (the fabric manager check reads versions the same way)
    epoch = {name: "1:580.95.05-1" for name in DRIVER + FM} | {DCGM[0]: "1:4.4.1-1"}
    assert planned(tmp_path, "lspci_hgx_h100.txt", bare(installed=epoch))["install"] == []
    # a version that only starts like the pin is another version
    almost = {name: "580.95.051-1" for name in DRIVER}
    assert "nvidia-utils-580-server=580.95.05-*" in planned(tmp_path, "lspci_hgx_h100.txt",
                                                            bare(installed=almost))["install"]  # fmt: skip


def test_nouveau_loaded_asks_for_a_reboot(tmp_path):
    result = planned(tmp_path, "lspci_hgx_h100.txt", bare(nouveau_loaded=True))
    assert result["reboot"].startswith("nouveau is loaded")
    assert planned(tmp_path, "lspci_hgx_h100.txt", bare(blacklist="blacklist nouveau\n"))["blacklist"] == plan.BLACKLIST


def test_plan_from_a_read_node(tmp_path):
    status = stanza("nvidia-utils-580-server", "580.95.05-0ubuntu1", want="hold")
    status += stanza("linux-generic", "6.8.0-87.88")
    root = node_state(from_lspci(tmp_path, "lspci_hgx_h100.txt"), status=status)
    state = node.read(root)
    result = plan.plan(pci.read(root), SETTINGS, state)
    assert "nvidia-utils-580-server=580.95.05-*" not in result["install"]
    assert result["held"] == ["nvidia-utils-580-server"]
    assert "linux-generic" in result["hold"]


def test_diff_lines(tmp_path):
    state = bare(installed={"nvidia-utils-580-server": "580.95.05-0ubuntu1"}, held=["nvidia-utils-580-server"])
    result = planned(tmp_path, "lspci_hgx_h100.txt", state, fabric_manager="false", dcgm_packages=[])
    d = plan.diff(result, state)
    assert d["before"].splitlines() == [
        "linux-modules-nvidia-580-server-open-6.8.0-87-generic absent",
        "linux-modules-nvidia-580-server-open-generic absent",
        "nvidia-headless-no-dkms-580-server-open absent",
        "nvidia-utils-580-server 580.95.05-0ubuntu1 held",
    ]
    assert d["after"].splitlines() == [
        "linux-modules-nvidia-580-server-open-6.8.0-87-generic candidate held",
        "linux-modules-nvidia-580-server-open-generic candidate held",
        "nvidia-headless-no-dkms-580-server-open 580.95.05-* held",
        "nvidia-utils-580-server 580.95.05-* held",
    ]
    assert plan.diff(plan.plan([], SETTINGS, {}), {}) == {"before": "", "after": ""}


@pytest.mark.parametrize(("setting", "value"), [("kernel_flavour", "generic;reboot"), ("kernel_flavour", "g"),
                                                ("dcgm_packages", ["ok-name", "--allow-unauthenticated"])])  # fmt: skip
def test_names_rendered_into_apt_are_package_names(tmp_path, setting, value):
    with pytest.raises(plan.PlanError, match="cannot be part of a Debian package name"):
        planned(tmp_path, "lspci_hgx_h100.txt", **{setting: value})
