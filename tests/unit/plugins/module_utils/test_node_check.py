"""rdma-node-check (plugins/module_utils/node_check.py) on recorded tool outputs (tests/fixtures/node_check/, see its
README; the ladder's ibv_devinfo and sminfo in tests/fixtures/validate/) and on fake sysfs trees whose counters
change between two runs. Each fault is a real recording with one fact changed."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils import node_check as nc

from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "node_check"
VALIDATE = ROOT / "tests" / "fixtures" / "validate"
NOW = 1763366800.0  # 2025-11-17T08:06:40Z, after every line of journal_links_xid.txt
BOOT = NOW - 30 * 86400


def fixture(name: str) -> str:
    return (FIX / name).read_text() if (FIX / name).exists() else (VALIDATE / name).read_text()


class FakeTools:
    """The node's tools as recordings: {"nvidia-smi -q": text | {"rc", "out", "err"}}, matched on the command's
    first two words, then its first; a tool not listed is not installed."""

    def __init__(self, outputs: dict):
        self.outputs, self.calls = outputs, []

    def run(self, argv, timeout=60):
        self.calls.append(argv)
        for key in (" ".join(argv[:2]), argv[0]):
            if key in self.outputs:
                out = self.outputs[key]
                return {"rc": 0, "out": out, "err": ""} if isinstance(out, str) else dict(out)
        return None


def config(**kw) -> dict:
    base = {
        "host": "n1",
        "link_layer": "ethernet",
        "interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}],
        "modules": ["ib_core"],
    }
    return nc.resolve(base | kw)


def nic(**kw) -> dict:
    base = {"exists": True, "operstate": "up", "carrier": 1, "mtu": 9000, "speed_mbps": None, "virtual": True}
    return base | kw


def judge(facts: dict, cfg: dict | None = None, previous=None) -> nc.Judge:
    facts = {"time": NOW, "boot_time": BOOT, "groups": ["fabric"]} | facts
    return nc.evaluate(facts, cfg or config(), previous)


def checks(j: nc.Judge, name: str) -> list[dict]:
    return [c for c in j.checks if c["check"] == name]


def one(j: nc.Judge, name: str) -> dict:
    (found,) = checks(j, name)
    return found


def status(j: nc.Judge) -> str:
    return nc.summary(j.checks)[0]


# ------------------------------------------------------------------------------------ fabric NICs and RDMA ports


def test_lab_node_without_rdma_or_gpu_passes_with_its_reasons() -> None:
    # veth reports a nominal 10000 Mb/s whatever the path does: not a line rate.
    j = judge({"nic": {"rdma0": nic(speed_mbps=10000)}, "rdma": [], "modules": None})
    assert status(j) == "pass", j.checks
    assert one(j, "rdma devices")["detail"] == "no RDMA device found"
    assert "kernel without loadable modules" in one(j, "kernel modules")["detail"]
    assert "nominal 10000 Mb/s ignored" in one(j, "nic speed")["detail"]
    assert j.rates == {"rdma0": None}


@pytest.mark.parametrize(
    ("seen", "detail"),
    [
        (nic(mtu=1500), "rdma0: MTU 1500 (configured 9000)"),
        (nic(operstate="down", carrier=0), "rdma0: link down (operstate down, carrier 0)"),
        ({"exists": False}, "rdma0: fabric interface rdma0 does not exist"),
    ],
)
def test_a_bad_fabric_nic_fails_saying_what(seen, detail) -> None:
    j = judge({"nic": {"rdma0": seen}, "rdma": [], "modules": ["ib_core"]})
    assert status(j) == "fail" and detail in nc.summary(j.checks)[1], j.checks


def roce_facts(gid_type="RoCE v2", state="4: ACTIVE", devinfo="ibv_devinfo_roce.txt", name="mlx5_0", rate="25"):
    gid = nc.roce_gid_of("10.77.250.11")
    port = {"port": 1, "state": state, "link_layer": "Ethernet", "rate": f"{rate} Gb/sec (1X EDR)",
            "gids": [{"index": 3, "gid": gid, "type": gid_type, "netdev": "rdma0"}]}  # fmt: skip
    return {
        "nic": {"rdma0": nic(speed_mbps=25000, virtual=False)},
        "rdma": [{"name": name, "ports": [port]}],
        "ibv_devinfo": {"rc": 0, "out": fixture(devinfo).replace("mlx5_0", name), "err": ""},
        "modules": ["ib_core", "mlx5_ib"],
    }


def test_roce_host_passes() -> None:
    j = judge(roce_facts())
    assert status(j) == "pass", j.checks
    passed = {c["check"] for c in j.checks if c["status"] == "pass"}
    assert {"rdma binding", "port state", "link layer", "active mtu", "roce v2 gid", "kernel modules"} <= passed
    assert j.rates == {"rdma0": 25.0}
    # The GID in another notation (IPv4-mapped) is the same address, as the launch's endpoint reads it.
    facts = roce_facts()
    facts["rdma"][0]["ports"][0]["gids"][0]["gid"] = "::ffff:10.77.250.11"
    assert status(judge(facts)) == "pass"


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"gid_type": "IB/RoCE v1"}, "mlx5_0 port 1 carries 10.77.250.11 only as IB/RoCE v1, not RoCE v2"),
        ({"state": "1: DOWN"}, "mlx5_0 port 1: state 1: DOWN"),
        ({"state": "2: INIT"}, "mlx5_0 port 1: state 2: INIT"),
        # VMware's paravirtual device: active_mtu 1024 under a 9000-byte netdev.
        ({"devinfo": "ibv_devinfo_pvrdma.txt", "name": "rocep11s0"}, "active_mtu 1024 (needs 4096"),
    ],
)
def test_roce_port_faults(change, detail) -> None:
    j = judge(roce_facts(**change))
    assert status(j) == "fail" and detail in nc.summary(j.checks)[1], j.checks


def test_pvrdma_and_sriov_are_noted() -> None:
    j = judge(roce_facts(devinfo="ibv_devinfo_pvrdma.txt", name="rocep11s0"))
    assert any("vmw_pvrdma" in n for n in j.notes)
    facts = roce_facts() | {"rdma_drivers": {"mlx5_0": {"driver": "mlx5_core", "sriov_vf": True}}}
    assert any("SR-IOV virtual function" in n for n in judge(facts).notes)


def two_rails(rail_rate="100", rail_mbps=100000) -> dict:
    """A RoCE node with rdma0 on mlx5_0 (25 Gb/s) and rdma1 on mlx5_1."""
    facts = roce_facts()
    gid = {"index": 3, "gid": nc.roce_gid_of("10.77.251.11"), "type": "RoCE v2", "netdev": "rdma1"}
    rail = {"port": 1, "state": "4: ACTIVE", "link_layer": "Ethernet", "rate": f"{rail_rate} Gb/sec (2X HDR)",
            "gids": [gid]}  # fmt: skip
    facts["rdma"].append({"name": "mlx5_1", "ports": [rail]})
    facts["ibv_devinfo"]["out"] += fixture("ibv_devinfo_roce.txt").replace("mlx5_0", "mlx5_1")
    facts["nic"]["rdma1"] = nic(speed_mbps=rail_mbps, virtual=False)
    return facts


TWO = [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}, {"name": "rdma1", "address": "10.77.251.11"}]


def test_every_rail_is_checked_as_the_first() -> None:
    facts = two_rails()
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}])
    j = judge(facts, cfg)
    assert status(j) == "pass", j.checks
    assert [c["detail"] for c in checks(j, "roce v2 gid")] == [
        "mlx5_0 port 1 GID index 3 is RoCE v2 for 10.77.250.11",
        "mlx5_1 port 1 GID index 3 is RoCE v2 for 10.77.251.11",
    ]
    # A rail whose port carries its address only as RoCE v1, or bound to no port, or gone, fails the node.
    facts["rdma"][1]["ports"][0]["gids"][0]["type"] = "IB/RoCE v1"
    assert "mlx5_1 port 1 carries 10.77.251.11 only as IB/RoCE v1" in nc.summary(judge(facts, cfg).checks)[1]
    facts["rdma"][1]["ports"][0]["gids"] = []
    assert "rdma1: no RDMA port is bound to rdma1" in nc.summary(judge(facts, cfg).checks)[1]
    del facts["nic"]["rdma1"]
    assert "fabric interface rdma1 does not exist" in nc.summary(judge(facts, cfg).checks)[1]


def test_line_rate_of_every_link_and_a_link_trained_down() -> None:
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}])
    # No rate expected: each rail's rate is kept for the pair tests, the difference noted, nothing failed.
    j = judge(two_rails(), cfg)
    assert status(j) == "pass" and j.rates == {"rdma0": 25.0, "rdma1": 100.0}
    assert any("fabric links at different line rates (rdma0 25 Gb/s, rdma1 100 Gb/s)" in n for n in j.notes)
    # 100 Gb/s expected: rdma0's 25 Gb/s NIC and port fail, named; rdma1 passes.
    slow = judge(two_rails(), cfg | {"line_rate_gbps": 100.0})
    assert sorted((c["check"], c["detail"]) for c in slow.checks if c["status"] == "fail") == [
        ("nic speed", "rdma0 25 Gb/s, below the expected 100 Gb/s (trained down?)"),
        ("port rate", "mlx5_0 port 1 25 Gb/s, below the expected 100 Gb/s (trained down?)"),
    ]
    assert not any("different line rates" in n for n in slow.notes)
    # A port that trained down under a NIC that says 100 Gb/s: the rail keeps the lower rate.
    assert judge(two_rails(rail_rate="50"), cfg).rates["rdma1"] == 50.0


def test_a_link_below_the_rate_it_passed_the_ladder_at_fails() -> None:
    """No line rate in the inventory: the baseline (the last passing verdict's rail speeds) holds each link."""
    cfg = config(interfaces=[TWO[0], TWO[1] | {"mtu": 9000}], baseline={"rail_gbps": {"rdma1": 100.0}})
    assert status(judge(two_rails(), cfg)) == "pass"
    down = judge(two_rails(rail_rate="50", rail_mbps=50000), cfg)
    assert [c["detail"] for c in down.checks if c["status"] == "fail"] == [
        "rdma1 50 Gb/s, below the rate it passed the ladder at, 100 Gb/s (trained down?)",
        "mlx5_1 port 1 50 Gb/s, below the rate it passed the ladder at, 100 Gb/s (trained down?)",
    ]


IB_PORT = {"port": 1, "state": "4: ACTIVE", "link_layer": "InfiniBand", "rate": "100 Gb/sec (4X EDR)", "lid": "0x7",
           "sm_lid": "0x1", "gids": []}  # fmt: skip


def ib_facts(port=None, sminfo=None) -> dict:
    return {
        "nic": {"rdma0": nic()},
        "rdma": [{"name": "mlx5_0", "ports": [IB_PORT | (port or {})]}],
        "ibv_devinfo": {"rc": 0, "out": fixture("ibv_devinfo_ib.txt"), "err": ""},
        "sminfo": {"rc": 0, "out": fixture("sminfo_master.txt") if sminfo is None else sminfo, "err": ""},
        "modules": ["ib_core"],
    }


STANDBY = fixture("sminfo_master.txt").replace("state 3 SMINFO_MASTER", "state 2 SMINFO_STANDBY")


@pytest.mark.parametrize(
    ("port", "sminfo", "check", "detail"),
    [
        # Each of these passed the whole suite as a one-line change of the rule before these cases existed.
        ({"lid": "0x0"}, None, "lid", "mlx5_0 port 1: LID 0x0"),
        ({"lid": None}, None, "lid", "mlx5_0 port 1: LID None"),
        ({"sm_lid": "0x0"}, None, "sm lid", "mlx5_0 port 1: SM LID 0x0"),
        ({}, STANDBY, "subnet manager", "SM at LID 1 (0x0c42a10300658e2a) is SMINFO_STANDBY"),
        ({}, fixture("sminfo_no_sm.txt"), "subnet manager", "sminfo found no subnet manager: ibwarn"),
        ({"link_layer": "Ethernet"}, None, "link layer", "mlx5_0 port 1: link layer Ethernet (configured InfiniBand)"),
    ],
)
def test_infiniband_port_needs_a_lid_a_master_sm_and_its_link_layer(port, sminfo, check, detail) -> None:
    cfg = config(link_layer="infiniband")
    assert status(judge(ib_facts(), cfg)) == "pass", judge(ib_facts(), cfg).checks
    j = judge(ib_facts(port, sminfo), cfg)
    failed = [c for c in j.checks if c["status"] == "fail"]
    assert [(c["check"], c["detail"][: len(detail)]) for c in failed] == [(check, detail)], j.checks
    assert j.rates["mlx5_0:1"] == 100.0


def test_roce_port_whose_link_layer_is_infiniband_fails() -> None:
    facts = roce_facts()
    facts["rdma"][0]["ports"][0]["link_layer"] = "InfiniBand"
    j = judge(facts)
    assert [c["detail"] for c in j.checks if c["status"] == "fail"] == [
        "mlx5_0 port 1: link layer InfiniBand (configured Ethernet)"
    ]


# ------------------------------------------------------------------------------------ GPUs


def gpu_facts(*xmls: str, log: str | None = None, **extra) -> dict:
    """nvidia-smi -q -x of a node with the GPUs of the given recordings (each file holds one GPU; several make one
    node, each GPU at its own PCI address), the kernel log, and any other tool output."""
    docs = [fixture(x) for x in xmls]
    body = "".join(d[d.index("<gpu ") : d.rindex("</gpu>") + 6] for d in docs)
    for n in range(len(docs)):
        body = body.replace('<gpu id="', f'<gpu n="{n}" id="', 1)
    for n in range(len(docs)):
        body = body.replace(f'<gpu n="{n}" id="', f'<gpu id="00000000:{0x18 + n * 0x20:02X}:00.0" x="', 1)
    xml = docs[0][: docs[0].index("<gpu ")] + body + "</nvidia_smi_log>\n"
    return {
        "groups": ["gpu"],
        "gpus_proc": {"count": 0, "driver": None},
        "peermem": {"module": None},
        "nvidia_smi": {"rc": 0, "out": xml, "err": ""},
        "log": {"source": "journalctl", "text": log or "", "kernel": log is not None},
    } | extra


def test_parse_nvidia_smi_across_driver_generations() -> None:
    a100 = nc.parse_nvidia_smi(fixture("nvidia_smi_a100_mig.xml"))
    assert a100["driver"] == "535.54.03" and len(a100["gpus"]) == 1
    gpu = a100["gpus"][0]
    assert (gpu["name"], gpu["pci"], gpu["idle"], gpu["persistence"]) == ("NVIDIA A100-SXM4-80GB", "00000000:01:00.0",
                                                                        False, "Disabled")  # fmt: skip
    assert gpu["pcie"] == {"gen": 4, "max_gen": 4, "width": 16, "max_width": 16}
    assert gpu["remap"] is None and gpu["ecc"]["volatile"]["sram_uncorrectable"] == 0  # MIG: remapped rows N/A
    t4 = nc.parse_nvidia_smi(fixture("nvidia_smi_t4.xml"))["gpus"][0]  # v11: clocks_throttle_reasons
    assert (
        t4["retired"] == {"single_bit": 0, "double_bit": 0, "pending": False} and t4["throttle"]["hw_slowdown"] is False
    )
    a10g = nc.parse_nvidia_smi(fixture("nvidia_smi_a10g_idle.xml"))["gpus"][0]
    assert a10g["idle"] is True and a10g["remap"] == {"correctable": 0, "uncorrectable": 0, "pending": False,
                                                      "failure": False}  # fmt: skip
    ada = nc.parse_nvidia_smi(fixture("nvidia_smi_rtx4000_v13.xml"))["gpus"][0]  # v13: SRAM parity/SECDED, all N/A
    assert ada["ecc"]["volatile"]["sram_uncorrectable"] is None and ada["ecc_mode"] == "Disabled"
    assert nc.parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver") is None


def test_healthy_gpu_passes_and_says_what_it_read() -> None:
    j = judge(gpu_facts("nvidia_smi_a100_mig.xml", log=""), config(gpus=1))
    by = {c["check"]: c for c in j.checks}
    assert by["gpus"]["status"] == "pass" and by["gpus"]["detail"] == "1 GPU(s) (expected 1), driver 535.54.03"
    assert by["gpu ecc"]["status"] == "pass" and by["gpu pcie"]["detail"] == "1 GPU(s): PCIe Gen4 x16 of Gen4 x16"
    assert by["gpu row remap"] == nc.check("gpu row remap", "skip", "row remapping not reported by nvidia-smi (N/A)")
    assert by["gpu persistence"]["status"] == "warn"  # the recording's GPU runs without persistence mode
    assert by["gpu xid"]["detail"] == "no XID in the kernel log in 2 h (this boot)"
    assert (
        by["nvlink"]["detail"] == "nvidia-smi nvlink -s failed" and by["dcgm diag"]["detail"] == "dcgmi not installed"
    )
    assert status(j) == "warn"


def test_a_real_h200_is_judged_here_as_the_command_judged_it_there() -> None:
    """The GPU checks on a real H200's `nvidia-smi -q -x` give what rdma-node-check printed on that machine."""
    import json

    recorded = json.loads(fixture("node_check_gpu_h200.json"))
    h200 = nc.parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))
    assert h200["driver"] == "580.159.04" and len(h200["gpus"]) == 1
    gpu = h200["gpus"][0]
    assert gpu["idle"] is True and gpu["remap"]["pending"] is False
    assert gpu["ecc"]["volatile"]["sram_uncorrectable"] == 0
    # nvidia-smi nvlink -s printed nothing there (one PCIe GPU) and dcgmi was not installed.
    facts = gpu_facts("nvidia_smi_h200.xml", log="", nvlink={"rc": 0, "out": "", "err": ""})
    facts["nvidia_smi"]["out"] = fixture("nvidia_smi_h200.xml")  # as recorded: its own PCI address
    j = judge(facts, config(gpus=1))
    later = [c for c in j.checks if c["check"] in ("gpu nic affinity", "pcie acs")]
    assert [c for c in j.checks if c not in later] == recorded["checks"] and status(j) == recorded["status"] == "pass"
    # The affinity and ACS checks came after the recording, whose sysfs was not kept: skipped here for want of it.
    assert [c["status"] for c in later] == ["skip", "skip"], later


def test_gpu_count_below_the_expected_fails() -> None:
    j = judge(gpu_facts("nvidia_smi_a100_mig.xml", "nvidia_smi_a100_mig.xml", log=""), config(gpus=8))
    assert one(j, "gpus")["status"] == "fail" and one(j, "gpus")["detail"].startswith("2 GPU(s) (expected 8)")
    # Without nvidia-smi the driver's own list counts them; nothing else is judged without it.
    facts = gpu_facts("nvidia_smi_a100_mig.xml", log="") | {"nvidia_smi": None, "gpus_proc": {"count": 8}}
    j = judge(facts, config(gpus=8))
    assert one(j, "gpus")["status"] == "pass" and one(j, "gpu ecc")["detail"] == "nvidia-smi not installed"
    # The baseline's count holds a node whose inventory expects none.
    assert (
        one(judge(gpu_facts("nvidia_smi_a100_mig.xml", log=""), config(baseline={"gpus": 2})), "gpus")["status"]
        == "fail"
    )


@pytest.mark.parametrize(
    ("xml", "old", "new", "check", "want", "detail"),
    [
        ("nvidia_smi_a10g_idle.xml", "<remapped_row_pending>No", "<remapped_row_pending>Yes", "gpu row remap", "fail",
         "GPU 0: row remapping pending"),
        ("nvidia_smi_a10g_idle.xml", "<remapped_row_failure>No", "<remapped_row_failure>Yes", "gpu row remap", "fail",
         "GPU 0: row remapping failed"),
        ("nvidia_smi_a10g_idle.xml", "<remapped_row_unc>0", "<remapped_row_unc>513", "gpu row remap", "fail",
         "GPU 0: 513 rows remapped for uncorrectable errors (> 512)"),
        ("nvidia_smi_a10g_idle.xml", "<remapped_row_unc>0", "<remapped_row_unc>512", "gpu row remap", "pass", "1 GPU"),
        ("nvidia_smi_t4.xml", "<dram_uncorrectable>0", "<dram_uncorrectable>1", "gpu ecc", "fail",
         "GPU 0: 1 uncorrectable ECC error(s) since the driver loaded"),
        ("nvidia_smi_t4.xml", "<sram_correctable>0", "<sram_correctable>10001", "gpu ecc", "fail",
         "GPU 0: 10001 correctable SRAM ECC errors (> 10000)"),
        ("nvidia_smi_t4.xml", "<sram_correctable>0", "<sram_correctable>10000", "gpu ecc", "pass", "1 GPU"),
        ("nvidia_smi_t4.xml", "<pending_retirement>No", "<pending_retirement>Yes", "gpu retired pages", "fail",
         "GPU 0: page retirement pending"),
        # Both retirement counts (single- and double-bit) change: 6 + 6 pages, then 5 + 5.
        ("nvidia_smi_t4.xml", "<retired_count>0", "<retired_count>6", "gpu retired pages", "fail",
         "GPU 0: 12 retired pages (> 10)"),
        ("nvidia_smi_t4.xml", "<retired_count>0", "<retired_count>5", "gpu retired pages", "pass",
         "1 GPU(s): 10 retired page(s)"),
        ("nvidia_smi_t4.xml", "hw_slowdown>Not Active", "hw_slowdown>Active", "gpu throttle", "fail",
         "GPU 0: HW slowdown active"),
        ("nvidia_smi_t4.xml", "hw_thermal_slowdown>Not Active", "hw_thermal_slowdown>Active", "gpu throttle", "fail",
         "GPU 0: HW thermal slowdown active"),
        ("nvidia_smi_a100_mig.xml", "power_brake_slowdown>Not Active", "power_brake_slowdown>Active", "gpu throttle",
         "fail", "GPU 0: HW power brake active"),
        # The power limit at work under load: reported, not judged (Azure exempts it like idle).
        ("nvidia_smi_a100_mig.xml", "sw_power_cap>Not Active", "sw_power_cap>Active", "gpu throttle", "pass",
         "1 GPU(s): SW power cap active"),
        ("nvidia_smi_t4.xml", "sw_thermal_slowdown>Not Active", "sw_thermal_slowdown>Active", "gpu throttle", "warn",
         "GPU 0: SW thermal slowdown active"),
        ("nvidia_smi_a100_mig.xml", "<persistence_mode>Disabled", "<persistence_mode>Enabled", "gpu persistence",
         "pass", "1 GPU(s): persistence mode enabled"),
    ],
)  # fmt: skip
def test_gpu_faults_from_one_changed_value(xml, old, new, check, want, detail) -> None:
    facts = gpu_facts(xml, log="")
    assert old in facts["nvidia_smi"]["out"]
    facts["nvidia_smi"]["out"] = facts["nvidia_smi"]["out"].replace(old, new)
    got = one(judge(facts, config(gpus=1)), check)
    assert got["status"] == want and got["detail"].startswith(detail), got


def test_sw_power_cap_can_be_made_a_warning() -> None:
    facts = gpu_facts("nvidia_smi_a100_mig.xml", log="")
    facts["nvidia_smi"]["out"] = facts["nvidia_smi"]["out"].replace("sw_power_cap>Not Active", "sw_power_cap>Active")
    assert one(judge(facts, config(thresholds={"sw_power_cap": "warn"})), "gpu throttle")["status"] == "warn"


def test_pcie_link_below_its_slot() -> None:
    # A T4 at work (P0, not idle) on x8 of its x16 slot: a bad slot, riser or seating.
    busy = one(judge(gpu_facts("nvidia_smi_t4.xml", log="")), "gpu pcie")
    assert busy == nc.check("gpu pcie", "fail", "GPU 0: PCIe Gen3 x8 of Gen3 x16")
    # An idle A10G at Gen1 x8 of Gen4 x16: the link may be power saving (nvidia-smi(1)), so a warning, not a drain.
    idle = one(judge(gpu_facts("nvidia_smi_a10g_idle.xml", log="")), "gpu pcie")
    assert (
        idle["status"] == "warn" and idle["detail"] == "GPU 0: PCIe Gen1 x8 of Gen4 x16 (idle GPU: may be power saving)"
    )
    # An idle GPU at full width but Gen1: expected power saving, passes.
    ada = one(judge(gpu_facts("nvidia_smi_rtx4000_v13.xml", log="")), "gpu pcie")
    assert ada == nc.check("gpu pcie", "pass", "1 GPU(s): PCIe Gen1 x16 of Gen4 x16 (idle)")
    # The same GPU busy at Gen1: the link trained down.
    facts = gpu_facts("nvidia_smi_rtx4000_v13.xml", log="")
    facts["nvidia_smi"]["out"] = facts["nvidia_smi"]["out"].replace("gpu_idle>Active", "gpu_idle>Not Active")
    assert one(judge(facts), "gpu pcie")["status"] == "fail"


def test_every_gpu_is_named_in_a_multi_gpu_node() -> None:
    facts = gpu_facts("nvidia_smi_t4.xml", "nvidia_smi_a100_mig.xml", "nvidia_smi_t4.xml", log="")
    j = judge(facts, config(gpus=3))
    assert one(j, "gpu pcie")["detail"] == "GPU 0: PCIe Gen3 x8 of Gen3 x16; GPU 2: PCIe Gen3 x8 of Gen3 x16"
    assert one(j, "gpu retired pages")["detail"] == "2 GPU(s): 0 retired page(s)"


def test_nvlink_state() -> None:
    text = fixture("nvlink_status_a100.txt")
    assert len(nc.parse_nvlink_status(text)) == 8 and nc.parse_nvlink_status(text)[7][11] == "25 GB/s"
    ok = gpu_facts("nvidia_smi_a100_mig.xml", log="", nvlink={"rc": 0, "out": text, "err": ""})
    assert one(judge(ok), "nvlink") == nc.check("nvlink", "pass", "96 NVLinks active on 8 GPU(s)")
    lines = text.splitlines()
    lines[lines.index("GPU 3: " + lines[lines.index(next(x for x in lines if x.startswith("GPU 3:")))][7:]) + 5] = (
        "\t Link 4: <inactive>"
    )
    bad = gpu_facts("nvidia_smi_a100_mig.xml", log="", nvlink={"rc": 0, "out": "\n".join(lines), "err": ""})
    assert one(judge(bad), "nvlink") == nc.check("nvlink", "fail", "GPU 3: NVLink 4 inactive")
    # PCIe GPUs: nvidia-smi lists them without links.
    pcie = gpu_facts("nvidia_smi_t4.xml", log="", nvlink={"rc": 0, "out": "GPU 0: Tesla T4 (UUID: GPU-x)\n", "err": ""})
    assert one(judge(pcie), "nvlink") == nc.check("nvlink", "skip", "no NVLink on these GPUs")


def test_dcgmi_diag() -> None:
    real = fixture("dcgmi_diag_r1_dcgm31.txt")
    tests = nc.parse_dcgmi_diag(real)
    assert len(tests) == 17 and {t["status"] for t in tests} == {"pass"}  # 9 deployment tests + 8 software results
    ok = one(judge(gpu_facts("nvidia_smi_t4.xml", log="", dcgm={"rc": 0, "out": real, "err": ""})), "dcgm diag")
    assert ok == nc.check("dcgm diag", "pass", "dcgmi diag -r 1: 17 results, none failed")
    at = real.index('"Persistence Mode"')
    failing = real[:at] + real[at:].replace('"PASS"', '"FAIL"', 1)
    assert failing != real
    bad = one(judge(gpu_facts("nvidia_smi_t4.xml", log="", dcgm={"rc": 226, "out": failing, "err": ""})), "dcgm diag")
    assert bad == nc.check("dcgm diag", "fail", "dcgmi diag -r 1: Persistence Mode failed (GPU 0,1,2,3,4,5,6,7)")
    # The host engine is not running: no result is no pass.
    down = {"rc": 255, "out": "", "err": "Error: unable to establish a connection to the specified host: localhost"}
    got = one(judge(gpu_facts("nvidia_smi_t4.xml", log="", dcgm=down)), "dcgm diag")
    assert got["status"] == "warn" and "unable to establish a connection" in got["detail"]
    off = one(judge(gpu_facts("nvidia_smi_t4.xml", log=""), config(thresholds={"dcgm_level": 0})), "dcgm diag")
    assert off["status"] == "skip"


def test_xid_in_the_window_fails_naming_the_gpu() -> None:
    log = fixture("journal_links_xid.txt")
    facts = gpu_facts("nvidia_smi_t4.xml", log=log)
    # The recorded XID came from PCI 0000:9b:00; the node's GPU sits there.
    facts["nvidia_smi"]["out"] = facts["nvidia_smi"]["out"].replace('id="00000000:18:00.0"', 'id="00000000:9B:00.0"')
    got = one(judge(facts), "gpu xid")
    assert got["status"] == "fail" and got["detail"].startswith("GPU 0: XID 119 (pid=2024380, name=nvidia-smi, Timeout")
    # Older than the window (2 h), or from before this boot: not counted.
    assert one(judge(facts | {"time": NOW + 7300}), "gpu xid")["status"] == "pass"
    assert one(judge(facts | {"boot_time": NOW - 60}), "gpu xid")["status"] == "pass"
    # An XID not in the list is reported, not judged; unknown PCI addresses are named by address.
    other = gpu_facts("nvidia_smi_t4.xml", log=log.replace("): 119,", "): 13,"))
    assert one(judge(other), "gpu xid") == nc.check(
        "gpu xid", "pass", "XIDs not in the list (reported): GPU at PCI 0000:9b:00: XID 13 in 2 h"
    )
    # The XID list is the config's.
    assert one(judge(facts, config(thresholds={"xids": [79]})), "gpu xid")["status"] == "pass"


def test_xid_from_dmesg_with_its_local_times(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        events = nc.xid_events(nc.parse_log(fixture("dmesg_xid_119.log")))
        assert [e[2] for e in events] == [119] * 5 and events[0][:2] == (1740327858.0, "0000:9b:00")
        facts = gpu_facts("nvidia_smi_t4.xml", log=fixture("dmesg_xid_119.log")) | {
            "time": 1740328300.0,
            "boot_time": 0,
        }
        assert one(judge(facts), "gpu xid")["detail"].startswith("GPU at PCI 0000:9b:00: XID 119")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_gpu_checks_skip_honestly_without_gpus_or_logs() -> None:
    none = judge({"groups": ["gpu"], "gpus_proc": {"count": 0}, "nvidia_smi": None, "log": {"error": "x"}})
    assert {c["check"]: (c["status"], c["detail"]) for c in none.checks} == {
        name: ("skip", "no GPU") for name in ("gpus", *nc.GPU_CHECKS)
    }
    container = judge(gpu_facts("nvidia_smi_t4.xml") | {"log": {"source": "journalctl", "text": "", "kernel": False}})
    assert one(container, "gpu xid")["detail"] == "the journal holds no kernel message of this boot (a container?)"


# ------------------------------------------------------------------------------------ NIC counters, flaps


def fake_root(tmp_path: Path, boot: float = BOOT) -> Path:
    """The recorded H100 node's /sys/class/infiniband (mlx5_0 InfiniBand, mlx5_bond_0 RoCE) under a fake root."""
    root = tmp_path / "root"
    shutil.copytree(FIX / "sysfs_h100", root / "sys/class/infiniband")
    (root / "proc").mkdir(parents=True)
    (root / "proc/stat").write_text(f"cpu  1 2 3 4\nbtime {int(boot)}\n")
    return root


def bump(root: Path, dev: str, group: str, name: str, by: int) -> None:
    path = root / "sys/class/infiniband" / dev / "ports/1" / group / name
    path.write_text(f"{int(path.read_text()) + by}\n")


def counters_run(root: Path, state: Path, tools=None, now=NOW) -> dict:
    cfg = {"host": "n1", "interfaces": [{"name": "ib0", "address": "10.0.0.1", "mtu": 4092}]}
    return nc.run(cfg, root, state, ["counters"], tools or FakeTools({}), now)


def test_port_counters_that_grow_between_two_readings_fail(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    first = counters_run(root, state)
    port = next(c for c in first["checks"] if c["check"] == "port counters")
    assert port == nc.check("port counters", "skip", "first reading: 2 port(s) read, kept for the next run")
    assert first["counters"]["ports"]["mlx5_0:1"]["counters"]["port_rcv_errors"] == 14  # the recording's old errors
    assert (state / nc.STATE_FILE).is_file() and first["exit"] == 0
    # Nothing moved: old errors (14 receive errors, 15 buffer overruns) do not fail a node.
    same = counters_run(root, state, now=NOW + 60)
    assert next(c for c in same["checks"] if c["check"] == "port counters")["status"] == "pass", same["checks"]
    # A congestion counter grows (the recording's mlx5 has no CNP counters: out_of_buffer): reported, not judged.
    bump(root, "mlx5_bond_0", "hw_counters", "out_of_buffer", 3)
    busy = counters_run(root, state, now=NOW + 120)
    assert busy["status"] == "pass" and busy["counters"]["deltas"]["mlx5_bond_0:1"]["out_of_buffer"] == 3
    detail = next(c for c in busy["checks"] if c["check"] == "port counters")["detail"]
    assert detail.endswith("(reported: mlx5_bond_0:1 out_of_buffer +3)"), detail
    # An error counter grows: the run fails naming device, port, counter and growth.
    bump(root, "mlx5_0", "counters", "symbol_error", 3)
    bump(root, "mlx5_0", "counters", "link_downed", 1)
    bad = counters_run(root, state, now=NOW + 180)
    assert bad["status"] == "fail" and bad["exit"] == 2
    assert bad["reason"].startswith("mlx5_0 port 1: link_downed +1; mlx5_0 port 1: symbol_error +3 (since "), bad
    # The next run compares with that reading: no new growth, passes again.
    assert counters_run(root, state, now=NOW + 240)["status"] == "pass"


def test_counters_that_went_back_or_another_boot_start_over(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    counters_run(root, state)
    bump(root, "mlx5_0", "counters", "port_rcv_errors", -14)
    reset = next(c for c in counters_run(root, state, now=NOW + 60)["checks"] if c["check"] == "port counters")
    assert reset["status"] == "skip" and "counters went back" in reset["detail"]
    rebooted = fake_root(tmp_path / "again", boot=NOW)
    shutil.copy(state / nc.STATE_FILE, tmp_path / "s2")
    (tmp_path / "state2").mkdir()
    shutil.copy(tmp_path / "s2", tmp_path / "state2" / nc.STATE_FILE)
    bump(rebooted, "mlx5_0", "counters", "symbol_error", 5)
    other = next(c for c in counters_run(rebooted, tmp_path / "state2", now=NOW + 60)["checks"]
                 if c["check"] == "port counters")  # fmt: skip
    assert other["status"] == "skip" and "another boot" in other["detail"]


def test_pause_counters_of_the_nodrop_priority_are_reported(tmp_path: Path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    (root / "sys/class/net/ib0").mkdir(parents=True)
    off = counters_run(root, state, FakeTools({"ethtool": fixture("ethtool_mlx5_cx4.txt")}))
    pause = next(c for c in off["checks"] if c["check"] == "pause counters")
    assert pause == nc.check(
        "pause counters", "skip", "no per-priority pause counters for priority 3 (driver or PFC off)"
    )
    pfc = fixture("ethtool_mlx5_pfc_prio3.txt")
    counters_run(root, state, FakeTools({"ethtool": pfc}), now=NOW + 60)
    later = pfc.replace("rx_prio3_pause: 41927", "rx_prio3_pause: 42027")
    got = counters_run(root, state, FakeTools({"ethtool": later}), now=NOW + 120)
    detail = next(c for c in got["checks"] if c["check"] == "pause counters")["detail"]
    assert detail.startswith("reported: ib0 rx_prio3_pause 42027 (+100), rx_prio3_pause_duration 8134 (+0)"), detail
    assert got["counters"]["pause"]["ib0"]["tx_prio3_pause"] == 1290418 and got["status"] == "pass"
    missing = counters_run(root, state, FakeTools({}), now=NOW + 180)
    assert next(c for c in missing["checks"] if c["check"] == "pause counters")["detail"] == "ethtool not installed"


def flaps(text: str, cfg=None, **facts) -> dict:
    base = {"groups": ["flaps"], "rdma": [{"name": "mlx5_5", "ports": []}],
            "log": {"source": "journalctl", "text": text, "kernel": True}}  # fmt: skip
    cfg = cfg or config(interfaces=[{"name": "eth4"}, {"name": "enp1s0"}])
    return one(judge(base | facts, cfg), "link flaps")


def line(t: float, msg: str, ident: str = "kernel") -> str:
    return f"{t:.6f} gpu-node-1 {ident}: {msg}\n"


DOWN, UP = "mlx5_core 0000:42:00.1 eth4: Link down", "mlx5_core 0000:42:00.1 eth4: Link up"


def test_link_flaps_from_the_journal() -> None:
    real = fixture("journal_links_xid.txt")
    # The kernel's lines only: systemd-networkd's `Link DOWN` and `Lost carrier` also follow the changes it makes.
    assert nc.link_events(nc.parse_log(real), {"eth4", "mlx5_5", "enp1s0"}) == [
        (1763366400.0, "eth4", "down"), (1763366407.0, "eth4", "up"), (1763366501.0, "mlx5_5:1", "up"),
    ]  # fmt: skip
    # The recording: eth4 down 7 s, a short flap: a warning.
    assert flaps(real) == nc.check("link flaps", "warn", "eth4: 1 short link flap(s) in 24 h (longest 7 s)")
    # Down and not back up: an outage that is still going on.
    got = flaps(real + line(NOW - 100, DOWN))
    assert got["status"] == "fail" and got["detail"].startswith(
        "eth4: down 100 s from 2025-11-17T08:05:00Z (still down)"
    )
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 593, UP))["status"] == "warn"
    # One outage of 30 s or more fails (NVIDIA rdma_linkflap_fatal); 29 s does not.
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 570, UP))["detail"].startswith("eth4: down 30 s from")
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 571, UP))["status"] == "warn"
    # Five short flaps in the window fail (Azure check_ib_link_flapping); four warn.
    five = "".join(line(NOW - 1000 + 10 * i, DOWN) + line(NOW - 999 + 10 * i, UP) for i in range(5))
    assert flaps(five)["detail"] == "eth4: 5 link flaps in 24 h"
    assert flaps(five.split("\n", 2)[2])["status"] == "warn"
    # The RDMA core's port state on InfiniBand: DOWN ... ACTIVE.
    ib = line(NOW - 600, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN") + line(
        NOW - 500, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"
    )
    assert flaps(ib)["detail"].startswith("mlx5_5:1: down 100 s from")
    # Outside the window, before this boot, or on another interface: not counted.
    assert flaps(line(NOW - 90000, DOWN) + line(NOW - 80000, UP))["status"] == "pass"
    assert flaps(line(NOW - 600, DOWN) + line(NOW - 500, UP), boot_time=NOW - 300)["status"] == "pass"
    other = line(NOW - 600, "mlx5_core 0000:42:00.0 eth9: Link down")
    assert flaps(other) == nc.check("link flaps", "pass", "no link flap in 24 h on enp1s0, eth4, mlx5_5")


def test_link_flaps_skip_where_the_kernel_log_is_not_there() -> None:
    container = flaps("", log={"source": "journalctl", "text": "", "kernel": False})
    assert container["status"] == "skip" and "no kernel message" in container["detail"]
    unreadable = flaps("", log={"error": "journalctl not installed; dmesg: dmesg: read kernel buffer failed"})
    assert unreadable["status"] == "skip" and "journalctl not installed" in unreadable["detail"]


def test_kernel_log_reader_asks_the_journal_then_dmesg() -> None:
    tools = FakeTools({"journalctl -k": fixture("journal_links_xid.txt")})
    got = nc.read_kernel_log(tools, NOW - 3600)
    assert got["kernel"] and got["source"] == "journalctl"
    assert tools.calls[0][:2] == ["journalctl", "-k"] and f"--since=@{int(NOW - 3600)}" in tools.calls[0]
    # A quiet window on a host whose journal has kernel messages, and a container's journal that has none.
    quiet = FakeTools({"journalctl -k": {"rc": 0, "out": "", "err": ""}})
    assert nc.read_kernel_log(quiet, NOW)["kernel"] is False and len(quiet.calls) == 2
    booted = FakeTools({})
    booted.run = lambda argv, timeout=60: {"rc": 0, "err": "", "out": "" if "--since" in " ".join(argv) else
                                           line(BOOT, "Linux version 6.8.0-49-generic")}  # fmt: skip
    assert nc.read_kernel_log(booted, NOW)["kernel"] is True
    dmesg = nc.read_kernel_log(FakeTools({"dmesg": fixture("dmesg_xid_119.log")}), NOW)
    assert dmesg["source"] == "dmesg -T" and dmesg["kernel"]
    assert nc.read_kernel_log(FakeTools({}), NOW) == {"error": "journalctl not installed; dmesg not installed"}


# ------------------------------------------------------------------------------------ the command


def lab_root(tmp_path: Path) -> Path:
    """A lab node: a veth fabric interface, no RDMA, no GPU, no /proc/modules."""
    root = tmp_path / "lab"
    veth = root / "sys/class/net/rdma0"
    veth.mkdir(parents=True)
    for name, value in {"operstate": "up", "carrier": "1", "mtu": "9000", "uevent": "INTERFACE=rdma0"}.items():
        (veth / name).write_text(value + "\n")
    return root


def write_config(tmp_path: Path, **kw) -> Path:
    path = tmp_path / "node-check.json"
    path.write_text(json.dumps({"interfaces": [{"name": "rdma0", "address": "10.77.250.11", "mtu": 9000}]} | kw))
    return path


def test_command_on_a_lab_node_passes_with_every_skip_said(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    args = ["--config", str(write_config(tmp_path)), "--root", str(lab_root(tmp_path)), "--state-dir", str(tmp_path)]
    assert nc.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == nc.SCHEMA and out["status"] == "pass" and out["exit"] == 0
    assert {c["check"]: c["status"] for c in out["checks"]} == {
        "fabric nic": "pass", "mtu": "pass", "nic speed": "skip", "rdma devices": "skip", "gpus": "skip",
        **{name: "skip" for name in nc.GPU_CHECKS}, "port counters": "skip", "pause counters": "skip",
        "link flaps": "skip", "stack": "skip",
    }  # fmt: skip
    skips = {c["check"]: c["detail"] for c in out["checks"] if c["status"] == "skip"}
    assert skips["gpus"] == "no GPU" and skips["port counters"] == "no RDMA port counters (no RDMA device)"
    assert skips["link flaps"] == "kernel log not readable (journalctl not installed; dmesg not installed)"
    assert nc.main([*args, "--brief"]) == 0
    assert capsys.readouterr().out == "pass: 2 checks passed, 18 skipped\n"


def test_command_exit_codes(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    root = lab_root(tmp_path)
    warn = write_config(tmp_path, interfaces=[{"name": "rdma0", "mtu": 9000}], modules=["ib_core"])
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("ib_core 458752 8 - Live 0x0\n")
    assert nc.main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 0
    # A short link flap in the kernel's log (journalctl on PATH prints it): a warning, exit 1.
    tools = tmp_path / "tools"
    tools.mkdir()
    now = time.time()
    (tools / "journal.txt").write_text(
        line(now - 600, "mlx5_core 0000:42:00.1 rdma0: Link down")
        + line(now - 593, "mlx5_core 0000:42:00.1 rdma0: Link up")
    )
    (tools / "journalctl").write_text(f"#!/bin/sh\nexec /bin/cat '{tools / 'journal.txt'}'\n")
    (tools / "journalctl").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    assert nc.main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "warn: rdma0: 1 short link flap(s) in 24 h (longest 7 s)"
    # As Slurm's Prolog a warning lets the job start (exit 0); Slurm's node is read either way.
    prolog = ["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief", "--slurm-prolog"]
    assert nc.main([*prolog, "--slurm-node", "n1"]) == 0
    assert capsys.readouterr().err == "slurm: node n1 not read (scontrol not installed)\n"
    (root / "sys/class/net/rdma0/carrier").write_text("0\n")
    assert nc.main(["--config", str(warn), "--root", str(root), "--state-dir", "", "--brief"]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == "fail: rdma0: link down (operstate up, carrier 0)"
    # A failing node keeps the job off (non-zero: Slurm requeues the job and leaves the node as the check drained it).
    assert nc.main([*prolog, "--slurm-node", "n1"]) == 2
    assert capsys.readouterr().out == "fail: rdma0: link down (operstate up, carrier 0)\n"
    # A config or a command line it cannot use: 3, never 2 (a scheduler must not drain a node for that).
    bad = tmp_path / "bad.json"
    bad.write_text('{"interfaces": []}')
    assert nc.main(["--config", str(bad), "--brief"]) == nc.EXIT_ERROR
    assert capsys.readouterr().out == "error: config: interfaces must be a non-empty list of {name, address, mtu}\n"
    # As a Prolog, a check that cannot run says so in slurmd's log and lets the job start.
    assert nc.main(["--config", str(bad), "--brief", "--slurm-prolog"]) == 0
    assert capsys.readouterr().out.startswith("error: config: ")
    assert nc.main(["--config", str(tmp_path / "none.json")]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "error"
    with pytest.raises(SystemExit) as exc:
        nc.main(["--no-such-option"])
    assert exc.value.code == 3
    assert nc.main(["--config", str(warn), "--root", str(root), "--only", "gpu,bogus"]) == 3


def test_summary_reason_is_one_line_a_scheduler_can_keep() -> None:
    many = [nc.check("gpu xid", "fail", f"GPU {i}: XID 79 (GPU has fallen off the bus)") for i in range(8)]
    status_, reason = nc.summary([*many, nc.check("mtu", "warn", "x")])
    assert status_ == "fail" and len(reason) == nc.REASON_MAX and reason.endswith("...") and "\n" not in reason
    assert nc.summary([nc.check("a", "warn", "rdma0: 1 short link flap(s)")]) == ("warn", "rdma0: 1 short link flap(s)")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"link_layer": "roce"}, "link_layer must be ethernet or infiniband"),
        ({"thresholds": {"xid_window": 1}}, "unknown thresholds xid_window"),
        ({"thresholds": {"sw_power_cap": "fail"}}, "thresholds.sw_power_cap must be one of report, warn"),
        ({"thresholds": {"flap_max": -1}}, "thresholds.flap_max must be an integer >= 0"),
        ({"interfaces": [{"mtu": 9000}]}, "every interface needs a name"),
    ],
)
def test_config_it_cannot_check_against(change, message) -> None:
    with pytest.raises(nc.ConfigError, match=message):
        config(**change)


def test_the_command_is_one_stdlib_file() -> None:
    """Installed alone as /usr/local/sbin/rdma-node-check: it may import nothing of this collection."""
    source = (ROOT / "plugins/module_utils/node_check.py").read_text()
    assert "ansible_collections" not in source.split('DOCUMENTATION = """')[0].split("from pathlib import Path")[0]
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "argparse", "ipaddress", "json", "os", "re", "shutil", "socket", "subprocess",
                       "sys", "time", "xml", "pathlib"}, imports  # fmt: skip


# ------------------------------------------------------------------------------------ readers on fake trees


def test_node_readers_on_fake_trees(tmp_path: Path) -> None:
    # A physical SR-IOV VF on mlx5 with an RDMA device, modules and two GPUs.
    net = tmp_path / "sys/class/net/ens1f0v0"
    (net / "device").mkdir(parents=True)
    (tmp_path / "drivers/mlx5_core").mkdir(parents=True)
    (net / "device/driver").symlink_to(tmp_path / "drivers/mlx5_core")
    (net / "device/physfn").mkdir()
    for name, value in {"operstate": "up", "carrier": "1", "mtu": "9000", "speed": "100000"}.items():
        (net / name).write_text(value + "\n")
    ib = tmp_path / "sys/class/infiniband/mlx5_2/device"
    ib.mkdir(parents=True)
    (ib / "driver").symlink_to(tmp_path / "drivers/mlx5_core")
    (ib / "physfn").mkdir()
    (tmp_path / "proc/driver/nvidia/gpus/0000:17:00.0").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/gpus/0000:65:00.0").mkdir()
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    (tmp_path / "proc/modules").write_text("mlx5_ib 466944 0 - Live 0x0\nib_core 458752 8 mlx5_ib, Live 0x0\n")
    seen = nc.nic(tmp_path, "ens1f0v0")
    assert seen["speed_mbps"] == 100000 and seen["driver"] == "mlx5_core" and seen["sriov_vf"] and not seen["virtual"]
    assert nc.rdma_drivers(tmp_path) == {"mlx5_2": {"driver": "mlx5_core", "sriov_vf": True}}
    assert nc.modules(tmp_path) == ["ib_core", "mlx5_ib"]
    assert nc.gpus_proc(tmp_path)["count"] == 2 and "550.54.15" in nc.gpus_proc(tmp_path)["driver"]
    # A veth (the lab): no device link, no readable speed, no /proc/modules.
    lab = lab_root(tmp_path)
    veth = nc.nic(lab, "rdma0")
    assert veth["speed_mbps"] is None and veth["virtual"] and veth["kind"] == "virtual"
    assert nc.modules(lab) is None and nc.nic(lab, "ens192") == {"name": "ens192", "exists": False}
    # The recorded H100 node's ports, as the one sysfs reader returns them (rdma_stack records the same).
    h100 = nc.rdma_devices(FIX / "sysfs_h100")
    assert [(d["name"], d["fw_ver"], d["ports"][0]["state"], d["ports"][0]["rate"]) for d in h100] == [
        ("mlx5_0", "28.41.1000", "4: ACTIVE", "400 Gb/sec (4X NDR)"),
        ("mlx5_bond_0", "32.38.3056", "4: ACTIVE", "200 Gb/sec (2X NDR)"),
    ]


def test_gpu_peer_memory(tmp_path: Path) -> None:
    assert nc.peermem(tmp_path) == {"module": None, "version": None}
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia_peermem/version").write_text("550.54.15\n")
    assert nc.peermem(tmp_path) == {"module": "nvidia_peermem", "version": "550.54.15"}
    old = tmp_path / "old"
    (old / "sys/kernel/mm/memory_peers/nv_mem").mkdir(parents=True)
    (old / "sys/kernel/mm/memory_peers/nv_mem/version").write_text("1.3-0\n")
    assert nc.peermem(old) == {"module": "nv_peer_mem", "version": "1.3-0"}
    facts = roce_facts() | gpu_facts("nvidia_smi_t4.xml", log="") | {"groups": ["fabric", "gpu"]}
    facts["peermem"] = nc.peermem(tmp_path)
    j = judge(facts, config(devices=["mlx5_0"], gpus=1))
    assert one(j, "gpu peer memory") == nc.check("gpu peer memory", "pass", "nvidia_peermem 550.54.15")
    facts["peermem"] = {"module": None, "version": None}
    got = one(judge(facts, config(devices=["mlx5_0"], gpus=1)), "gpu peer memory")
    assert got["status"] == "skip" and "GPUDirect RDMA only through DMA-BUF" in got["detail"]
    # cluster_rdma_devices left empty (it is optional): the devices found count the same.
    assert one(judge(facts, config(gpus=1)), "gpu peer memory")["status"] == "skip"
    # No RDMA device: no GPUDirect RDMA to judge.
    assert checks(judge(facts | {"rdma": []}, config(gpus=1)), "gpu peer memory") == []


def test_tools_are_found_in_sbin_when_the_caller_gives_no_path(monkeypatch) -> None:
    """A scheduler may run the command with an empty environment: sminfo and ethtool live in /usr/sbin."""
    monkeypatch.delenv("PATH", raising=False)
    assert nc.Tools().path == nc.SYSTEM_PATH and "/usr/sbin" in nc.SYSTEM_PATH.split(":")
    monkeypatch.setenv("PATH", "/opt/tools")
    assert nc.Tools().path == "/opt/tools" and nc.Tools("/x").path == "/x"
    assert nc.Tools("/nonexistent").run(["nvidia-smi"]) is None


# ------------------------------------------------------------------------------------ the software stack


def test_ethtool_info_and_os_release_parse_real_outputs() -> None:
    mlx5 = nc.parse_ethtool_info(fixture("ethtool_i_mlx5_cx4lx.txt"))
    assert mlx5 == {"driver": "mlx5_core", "version": "3.0-1 (January 2015)", "firmware": "14.23.1020"}
    assert nc.parse_ethtool_info(fixture("ethtool_i_i40e.txt"))["firmware"] == "6.00 0x800036cb 1.1747.0"
    assert nc.parse_ethtool_info("driver: veth\nversion: 1.0\nfirmware-version: \n")["firmware"] is None
    # Debian 12's /etc/os-release (this machine's), and one with NAME and VERSION_ID only.
    debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
    assert nc.parse_os_release(debian) == "Debian GNU/Linux 12 (bookworm)"
    assert nc.parse_os_release('NAME="Ubuntu"\nVERSION_ID="24.04"\n') == "Ubuntu 24.04"


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
    facts = nc.collect(cfg, root, tools, NOW, groups=("stack",))
    assert facts["stack"] == {
        "kernel": "6.8.0-90-generic",
        "os": "Ubuntu 24.04.3 LTS",
        "nic driver": "mlx5_core",
        "nic driver version": "3.0-1 (January 2015)",
        "nic firmware": "14.23.1020",
        "rdma-core": "50.0-2ubuntu0.2",
        "gpu driver": "580.159.04",
        "cuda": nc.parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))["cuda"],
        "vbios": nc.parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))["gpus"][0]["vbios"],
        "torch": "2.9.1+cu128",
        "nvidia-nccl-cu12": "2.27.3",
        "venv pins": "0123456789ab",
    }
    assert facts["stack"]["cuda"] and facts["stack"]["vbios"], "the H200 recording has both"
    j = nc.evaluate(facts, cfg)
    assert one(j, "stack")["status"] == "pass" and "no passing ladder to compare with yet" in one(j, "stack")["detail"]


def test_a_node_whose_stack_moved_since_the_ladder_passed_warns(tmp_path: Path) -> None:
    root, tools = stack_root(tmp_path)
    fleet = nc.collect(config(venv="/opt/venv"), root, tools, NOW, groups=("stack",))["stack"]
    root, tools = stack_root(tmp_path / "later", firmware="14.32.1010", torch="2.10.0+cu128")
    cfg = config(venv="/opt/venv", baseline={"stack": fleet})
    j = nc.evaluate(nc.collect(cfg, root, tools, NOW, groups=("stack",)), cfg)
    assert {c["check"]: (c["status"], c["detail"]) for c in j.checks} == {
        "stack nic firmware": ("warn", "nic firmware 14.32.1010, the fleet passed the ladder with 14.23.1020"),
        "stack torch": ("warn", "torch 2.10.0+cu128, the fleet passed the ladder with 2.9.1+cu128"),
    }
    strict = config(venv="/opt/venv", baseline={"stack": fleet}, thresholds={"stack_mismatch": "fail"})
    assert status(nc.evaluate(nc.collect(strict, root, tools, NOW, groups=("stack",)), strict)) == "fail"
    same = config(venv="/opt/venv", baseline={"stack": fleet})
    root, tools = stack_root(tmp_path / "same")
    assert [c["check"] for c in nc.evaluate(nc.collect(same, root, tools, NOW, groups=("stack",)), same).checks] == [
        "stack"
    ]


# ------------------------------------------------------------------------------------ GPU <-> NIC affinity


def pci_tree(tmp_path: Path, gpus: dict[str, tuple[str, int]], nic: tuple[str, int]) -> Path:
    """A fake sysfs: each device a directory under sys/devices at its path (host bridge first) with its numa_node,
    linked from sys/bus/pci/devices/<bdf> as the kernel links it (relative); the NIC also from
    sys/class/net/rdma0/device; the GPUs registered with the driver (/proc/driver/nvidia/gpus/<bdf>)."""
    root = tmp_path / "root"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/class/net/rdma0").mkdir(parents=True)
    for path, numa in [*gpus.values(), nic]:
        device = root / "sys/devices" / path
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{numa}\n")
        (root / "sys/bus/pci/devices" / device.name).symlink_to(Path("../../../devices") / path)
    (root / "sys/class/net/rdma0/device").symlink_to(Path("../../../devices") / nic[0])
    for bdf in gpus:
        (root / "proc/driver/nvidia/gpus" / bdf).mkdir(parents=True)
    return root


def test_each_gpu_against_its_nearest_fabric_nic(tmp_path: Path) -> None:
    switch = "pci0000:17/0000:17:01.0/0000:18:00.0"  # a root port and a PCIe switch's upstream port
    gpus = {
        "0000:1a:00.0": (f"{switch}/0000:19:00.0/0000:1a:00.0", 0),  # the NIC's switch, another downstream port
        "0000:1e:00.0": (f"{switch}/0000:19:02.0/0000:1c:00.0/0000:1d:00.0/0000:1e:00.0", 0),  # a switch below it
        "0000:2a:00.0": ("pci0000:17/0000:17:02.0/0000:2a:00.0", 0),  # another root port of the host bridge
        "0000:81:00.0": ("pci0000:80/0000:80:01.0/0000:81:00.0", 0),  # another host bridge, same NUMA node
        "0000:c1:00.0": ("pci0000:c0/0000:c0:01.0/0000:c1:00.0", 1),  # the other socket
    }
    root = pci_tree(tmp_path, gpus, (f"{switch}/0000:19:01.0/0000:1b:00.0", 0))
    facts = nc.collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    j = nc.evaluate(facts, config())
    got = [(c["status"], c["value"]) for c in checks(j, "gpu nic affinity")]
    assert got == [("pass", "PIX"), ("pass", "PXB"), ("warn", "PHB"), ("warn", "NODE"), ("fail", "SYS")], got
    assert checks(j, "gpu nic affinity")[4]["detail"] == (
        "GPU 4 (0000:c1:00.0): nearest fabric NIC rdma0 at SYS, beyond NODE: give each GPU a NIC on its side"
    )
    phb = checks(j, "gpu nic affinity")[2]["detail"]
    assert "NCCL's default NCCL_NET_GDR_LEVEL (PXB) leaves GPUDirect RDMA off" in phb, phb
    # Thresholds move the lines: PHB accepted, anything beyond PIX failed.
    loose = config(thresholds={"gpu_nic_warn_above": "PHB"})
    assert [c["status"] for c in checks(nc.evaluate(facts, loose), "gpu nic affinity")][2] == "pass"
    strict = config(thresholds={"gpu_nic_fail_above": "PIX"})
    assert [c["status"] for c in checks(nc.evaluate(facts, strict), "gpu nic affinity")][:2] == ["pass", "fail"]


def test_affinity_levels_are_nvidia_smis_own() -> None:
    """The levels the affinity check names are those `nvidia-smi topo -m` prints in its legend (the H200 recording),
    in its order from farthest to nearest, so a warning reads as the tool an operator checks it with."""
    legend = re.findall(r"^  (\S+) += Connection", (FIX / "nvidia_smi_topo_h200_1gpu.txt").read_text(), re.M)
    assert [level for level in legend if level != "NV#"] == list(reversed(nc.PCI_LEVELS)), legend


def test_affinity_skips_without_pci_places(tmp_path: Path) -> None:
    # The lab: a veth is no PCI device; nvidia-smi's address in its own form is found in sysfs's.
    assert nc.pci_bdf("00000000:18:00.0") == "0000:18:00.0" and nc.pci_bdf("0000:C1:00.0") == "0000:c1:00.0"
    root = pci_tree(tmp_path, {"0000:1a:00.0": ("pci0000:17/0000:17:01.0/0000:1a:00.0", 0)}, ("virtual/net", -1))
    j = nc.evaluate(nc.collect(config(), root, FakeTools({}), NOW, groups=("gpu",)), config())
    assert one(j, "gpu nic affinity")["status"] == "skip"
    assert one(j, "gpu nic affinity")["detail"] == "no fabric NIC on PCI (a virtual interface has no PCI place)"


# ------------------------------------------------------------------------------------ PCIe ACS


def acs_config(control: int | None, before: int = 0x0001) -> bytes:
    """4096 bytes of PCIe config space (what root reads from sysfs `config`): at 0x100 an extended capability of
    ID `before` (AER, 0x0001) pointing to 0x148, there the ACS capability (0x000D, version 1, last) with the
    control register `control` at +6; no ACS capability at all where control is None."""
    space = bytearray(4096)
    if control is None:
        space[0x100:0x104] = (before | 1 << 16).to_bytes(4, "little")
        return bytes(space)
    space[0x100:0x104] = (before | 1 << 16 | 0x148 << 20).to_bytes(4, "little")
    space[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")
    space[0x14C:0x14E] = (0x007F).to_bytes(2, "little")  # ACS capability: every feature there
    space[0x14E:0x150] = control.to_bytes(2, "little")
    return bytes(space)


def test_acs_control_read_from_config_space() -> None:
    # lspci's `ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmplRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-` is 0x001D.
    got = nc.acs_control(acs_config(0x001D))
    assert got == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmplRedir": True, "UpstreamFwd": True,
                   "EgressCtrl": False, "DirectTrans": False}  # fmt: skip
    assert nc.acs_control(acs_config(0)) == dict.fromkeys(nc.ACS_BITS, False)
    assert nc.acs_control(acs_config(None)) is None  # no ACS capability
    assert nc.acs_control(acs_config(0x1D)[:64]) is None  # read as non-root: the header only
    loop = bytearray(acs_config(None))
    loop[0x100:0x104] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # a capability pointing to itself
    assert nc.acs_control(bytes(loop)) is None


def test_acs_redirect_on_a_switch_port_above_a_gpu_warns(tmp_path: Path) -> None:
    switch = "pci0000:17/0000:17:01.0/0000:18:00.0"  # a root port and a PCIe switch's upstream port
    gpus = {"0000:1a:00.0": (f"{switch}/0000:19:00.0/0000:1a:00.0", 0)}
    root = pci_tree(tmp_path, gpus, (f"{switch}/0000:19:01.0/0000:1b:00.0", 0))
    ports = {"0000:18:00.0": 0, "0000:19:00.0": 0x001D, "0000:19:01.0": 0x0001}
    for bdf, control in ports.items():
        (root / "sys/bus/pci/devices" / bdf).resolve().mkdir(parents=True, exist_ok=True)
        if not (root / "sys/bus/pci/devices" / bdf).exists():
            path = next(p for p in (root / "sys/devices").rglob(bdf))
            (root / "sys/bus/pci/devices" / bdf).symlink_to(path)
        (root / "sys/bus/pci/devices" / bdf / "config").write_bytes(acs_config(control))
    facts = nc.collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert sorted(facts["pci_acs"]) == sorted(ports)  # the switch's ports; not the root port 0000:17:01.0
    acs = checks(nc.evaluate(facts, config()), "pcie acs")
    assert [(c["status"], c["detail"].split(":")[0:4]) for c in acs] == [
        ("warn", ["0000", "19", "00.0", " ACS ReqRedir+ CmplRedir+"])
    ]
    assert "setpci -s 0000:19:00.0 ECAP_ACS+0x6.w=0000" in acs[0]["detail"]
    assert [c["status"] for c in checks(nc.evaluate(facts, config(thresholds={"pcie_acs": "fail"})), "pcie acs")] == [
        "fail"
    ]
    assert [c["status"] for c in checks(nc.evaluate(facts, config(thresholds={"pcie_acs": "report"})), "pcie acs")] == [
        "pass"
    ]
    # Redirect off everywhere: one pass line; config space unreadable (not root): skipped, said why.
    (root / "sys/bus/pci/devices/0000:19:00.0/config").write_bytes(acs_config(0x0011))
    facts = nc.collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert [(c["status"], c["detail"]) for c in checks(nc.evaluate(facts, config()), "pcie acs")] == [
        ("pass", "no ACS redirect on the 3 PCIe switch port(s) above the GPUs and NICs")
    ]
    for bdf in ports:
        (root / "sys/bus/pci/devices" / bdf / "config").write_bytes(acs_config(0x001D)[:64])
    facts = nc.collect(config(), root, FakeTools({}), NOW, groups=("gpu",))
    assert [(c["status"], c["detail"]) for c in checks(nc.evaluate(facts, config()), "pcie acs")] == [
        ("skip", "the PCIe extended config space is unreadable (not root?)")
    ]


# ------------------------------------------------------------------------------------ Slurm's health check

SLURM_FIX = ROOT / "tests" / "fixtures" / "slurm"


def scontrol(name: str, reason: str | None = None) -> str:
    """A recorded `scontrol show node -o` line (tests/fixtures/slurm/README.md), its reason changed where given."""
    line = (SLURM_FIX / name).read_text()
    return line if reason is None else line.replace("Reason=maintenance by hand", f"Reason={reason}")


def test_scontrol_node_lines_as_slurm_prints_them() -> None:
    assert nc.parse_scontrol_node(scontrol("scontrol_show_node_idle.txt")) == {
        "state": "IDLE", "reason": "", "reason_set": None}  # fmt: skip
    drained = nc.parse_scontrol_node(scontrol("scontrol_show_node_drain.txt"))
    assert drained == {"state": "IDLE+DRAIN+NOT_RESPONDING", "reason": "maintenance by hand",
                       "reason_set": "root@2026-11-26T11:48:04"}  # fmt: skip
    ours = nc.parse_scontrol_node(scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: MTU 1500 (x)"))
    assert ours["reason"] == "rdma-node-check: rdma0: MTU 1500 (x)"


FAIL = {"status": "fail", "reason": "rdma0: MTU 1500 (configured 9000)"}
PASS = {"status": "pass", "reason": "12 checks passed"}
DRAIN = ("drain", "rdma-node-check: rdma0: MTU 1500 (configured 9000)")


@pytest.mark.parametrize(
    ("result", "line", "want"),
    [
        (FAIL, scontrol("scontrol_show_node_idle.txt"), DRAIN),
        (PASS, scontrol("scontrol_show_node_idle.txt"), None),
        # Drained by the check: the same reason stays, a new one replaces it, a pass (or a warning) resumes.
        (FAIL, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: MTU 1500 (configured 9000)"), None),
        (FAIL, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: link down"), DRAIN),
        (PASS, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: rdma0: link down"),
         ("resume", "passes again (pass: 12 checks passed)")),
        ({"status": "warn", "reason": "x"}, scontrol("scontrol_show_node_drain.txt", "rdma-node-check: y"),
         ("resume", "passes again (warn: x)")),
        # An operator's drain, or a node slurmctld holds down: theirs, whatever the check says.
        (FAIL, scontrol("scontrol_show_node_drain.txt"), None),
        (PASS, scontrol("scontrol_show_node_drain.txt"), None),
        (FAIL, scontrol("scontrol_show_node_down.txt"), None),
        # The check could not run (exit 3): nothing.
        ({"status": "error", "reason": "config: ..."}, scontrol("scontrol_show_node_idle.txt"), None),
    ],
)  # fmt: skip
def test_slurm_drains_on_fail_and_resumes_only_its_own_drain(result, line, want) -> None:
    assert nc.slurm_action(result, nc.parse_scontrol_node(line)) == want


def test_slurm_apply_runs_scontrol() -> None:
    tools = FakeTools({"scontrol show": scontrol("scontrol_show_node_idle.txt"), "scontrol update": ""})
    assert nc.slurm_apply(tools, "mol-slurm-1", FAIL) == (
        "slurm: drained mol-slurm-1: rdma-node-check: rdma0: MTU 1500 (configured 9000)"
    )
    assert tools.calls[-1] == ["scontrol", "update", "NodeName=mol-slurm-1", "State=DRAIN",
                               "Reason=rdma-node-check: rdma0: MTU 1500 (configured 9000)"]  # fmt: skip
    gone = FakeTools({"scontrol show": {"rc": 1, "out": "", "err": "Node mol-slurm-9 not found"}})
    assert nc.slurm_apply(gone, "mol-slurm-9", FAIL) == "slurm: node mol-slurm-9 not read (Node mol-slurm-9 not found)"
    assert nc.slurm_apply(FakeTools({}), "n1", FAIL) == "slurm: node n1 not read (scontrol not installed)"
