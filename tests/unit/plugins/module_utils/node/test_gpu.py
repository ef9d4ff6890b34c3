"""The GPU checks (plugins/module_utils/node/gpu.py) on recorded `nvidia-smi -q -x` of several driver generations,
NVLink and dcgmi diag outputs and kernel logs with XIDs; GPU peer memory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.gpu import GPU_CHECKS
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import parse_log, xid_events
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import (
    parse_dcgmi_diag,
    parse_nvidia_smi,
    parse_nvlink_status,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.sysfs import peermem

from tests.unit.plugins.module_utils.node.helpers import (
    NOW,
    checks,
    config,
    fixture,
    judge,
    one,
    roce_facts,
    status,
)

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


def test_healthy_gpu_passes_and_says_what_it_read() -> None:
    j = judge(gpu_facts("nvidia_smi_a100_mig.xml", log=""), config(gpus=1))
    by = {c["check"]: c for c in j.checks}
    assert by["gpus"]["status"] == "pass" and by["gpus"]["detail"] == "1 GPU(s) (expected 1), driver 535.54.03"
    assert by["gpu ecc"]["status"] == "pass" and by["gpu pcie"]["detail"] == "1 GPU(s): PCIe Gen4 x16 of Gen4 x16"
    assert by["gpu row remap"] == check("gpu row remap", "skip", "row remapping not reported by nvidia-smi (N/A)")
    assert by["gpu persistence"]["status"] == "warn"  # the recording's GPU runs without persistence mode
    assert by["gpu xid"]["detail"] == "no XID in the kernel log in 2 h (this boot)"
    assert (
        by["nvlink"]["detail"] == "nvidia-smi nvlink -s failed" and by["dcgm diag"]["detail"] == "dcgmi not installed"
    )
    assert status(j) == "warn"


def test_a_real_h200_is_judged_here_as_the_command_judged_it_there() -> None:
    """The GPU checks on a real H200's `nvidia-smi -q -x` give what rdma-node-check printed on that machine."""

    recorded = json.loads(fixture("node_check_gpu_h200.json"))
    h200 = parse_nvidia_smi(fixture("nvidia_smi_h200.xml"))
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
    # One short fails; as many, or more than expected (roles/node_health/README.md: fewer fails), passes.
    two = gpu_facts("nvidia_smi_a100_mig.xml", "nvidia_smi_a100_mig.xml", log="")
    assert [one(judge(two, config(gpus=n)), "gpus")["status"] for n in (3, 2, 1)] == ["fail", "pass", "pass"]
    assert one(judge(two, config(gpus=1)), "gpus")["detail"] == "2 GPU(s) (expected 1), driver 535.54.03"
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


def _ecc_block_changed(xml: str, block: str, old: str, new: str) -> dict:
    """The recording's facts with one ECC counter changed in one block (`volatile` or `aggregate`) only."""
    facts = gpu_facts(xml, log="")
    out = facts["nvidia_smi"]["out"]
    start = out.index(f"<{block}>", out.index("<ecc_errors>"))
    end = out.index(f"</{block}>", start)
    assert out[start:end].count(old) == 1, (xml, block, old)
    facts["nvidia_smi"]["out"] = out[:start] + out[start:end].replace(old, new) + out[end:]
    return facts


@pytest.mark.parametrize(
    ("xml", "block", "old", "new", "want", "detail"),
    [
        # One uncorrectable SRAM error in the GPU's lifetime (none since the driver loaded) fails: a v11 counter and
        # driver 570+'s split one (parity + SECDED, summed).
        ("nvidia_smi_t4.xml", "aggregate", "<sram_uncorrectable>0", "<sram_uncorrectable>1", "fail",
         "GPU 0: 1 uncorrectable SRAM ECC error(s) in its lifetime"),
        ("nvidia_smi_h200.xml", "aggregate", "<sram_uncorrectable_secded>0", "<sram_uncorrectable_secded>1", "fail",
         "GPU 0: 1 uncorrectable SRAM ECC error(s) in its lifetime"),
        ("nvidia_smi_h200.xml", "aggregate", "<sram_uncorrectable_parity>0", "<sram_uncorrectable_parity>1", "fail",
         "GPU 0: 1 uncorrectable SRAM ECC error(s) in its lifetime"),
        # Since the driver loaded, it is the volatile rule that names it.
        ("nvidia_smi_h200.xml", "volatile", "<sram_uncorrectable_parity>0", "<sram_uncorrectable_parity>1", "fail",
         "GPU 0: 1 uncorrectable ECC error(s) since the driver loaded"),
        # Correctable SRAM errors: the threshold (10000) holds for either block alone, the boundary passes.
        ("nvidia_smi_t4.xml", "aggregate", "<sram_correctable>0", "<sram_correctable>10001", "fail",
         "GPU 0: 10001 correctable SRAM ECC errors (> 10000)"),
        ("nvidia_smi_t4.xml", "aggregate", "<sram_correctable>0", "<sram_correctable>10000", "pass",
         "1 GPU(s): no uncorrectable ECC error"),
        ("nvidia_smi_t4.xml", "volatile", "<sram_correctable>0", "<sram_correctable>10001", "fail",
         "GPU 0: 10001 correctable SRAM ECC errors (> 10000)"),
        ("nvidia_smi_t4.xml", "volatile", "<sram_correctable>0", "<sram_correctable>10000", "pass",
         "1 GPU(s): no uncorrectable ECC error"),
    ],
)  # fmt: skip
def test_ecc_counter_changed_in_one_block(xml, block, old, new, want, detail) -> None:
    got = one(judge(_ecc_block_changed(xml, block, old, new), config(gpus=1)), "gpu ecc")
    assert (got["status"], got["detail"]) == (want, detail), got


def test_sw_power_cap_can_be_made_a_warning() -> None:
    facts = gpu_facts("nvidia_smi_a100_mig.xml", log="")
    facts["nvidia_smi"]["out"] = facts["nvidia_smi"]["out"].replace("sw_power_cap>Not Active", "sw_power_cap>Active")
    assert one(judge(facts, config(thresholds={"sw_power_cap": "warn"})), "gpu throttle")["status"] == "warn"


def test_pcie_link_below_its_slot() -> None:
    # A T4 at work (P0, not idle) on x8 of its x16 slot: a bad slot, riser or seating.
    busy = one(judge(gpu_facts("nvidia_smi_t4.xml", log="")), "gpu pcie")
    assert busy == check("gpu pcie", "fail", "GPU 0: PCIe Gen3 x8 of Gen3 x16")
    # An idle A10G at Gen1 x8 of Gen4 x16: the link may be power saving (nvidia-smi(1)), so a warning, not a drain.
    idle = one(judge(gpu_facts("nvidia_smi_a10g_idle.xml", log="")), "gpu pcie")
    assert (
        idle["status"] == "warn" and idle["detail"] == "GPU 0: PCIe Gen1 x8 of Gen4 x16 (idle GPU: may be power saving)"
    )
    # An idle GPU at full width but Gen1: expected power saving, passes.
    ada = one(judge(gpu_facts("nvidia_smi_rtx4000_v13.xml", log="")), "gpu pcie")
    assert ada == check("gpu pcie", "pass", "1 GPU(s): PCIe Gen1 x16 of Gen4 x16 (idle)")
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
    assert len(parse_nvlink_status(text)) == 8 and parse_nvlink_status(text)[7][11] == "25 GB/s"
    ok = gpu_facts("nvidia_smi_a100_mig.xml", log="", nvlink={"rc": 0, "out": text, "err": ""})
    assert one(judge(ok), "nvlink") == check("nvlink", "pass", "96 NVLinks active on 8 GPU(s)")
    lines = text.splitlines()
    lines[lines.index("GPU 3: " + lines[lines.index(next(x for x in lines if x.startswith("GPU 3:")))][7:]) + 5] = (
        "\t Link 4: <inactive>"
    )
    bad = gpu_facts("nvidia_smi_a100_mig.xml", log="", nvlink={"rc": 0, "out": "\n".join(lines), "err": ""})
    assert one(judge(bad), "nvlink") == check("nvlink", "fail", "GPU 3: NVLink 4 inactive")
    # PCIe GPUs: nvidia-smi lists them without links.
    pcie = gpu_facts("nvidia_smi_t4.xml", log="", nvlink={"rc": 0, "out": "GPU 0: Tesla T4 (UUID: GPU-x)\n", "err": ""})
    assert one(judge(pcie), "nvlink") == check("nvlink", "skip", "no NVLink on these GPUs")


def test_dcgmi_diag() -> None:
    real = fixture("dcgmi_diag_r1_dcgm31.txt")
    tests = parse_dcgmi_diag(real)
    assert len(tests) == 17 and {t["status"] for t in tests} == {"pass"}  # 9 deployment tests + 8 software results
    ok = one(judge(gpu_facts("nvidia_smi_t4.xml", log="", dcgm={"rc": 0, "out": real, "err": ""})), "dcgm diag")
    assert ok == check("dcgm diag", "pass", "dcgmi diag -r 1: 17 results, none failed")
    at = real.index('"Persistence Mode"')
    failing = real[:at] + real[at:].replace('"PASS"', '"FAIL"', 1)
    assert failing != real
    bad = one(judge(gpu_facts("nvidia_smi_t4.xml", log="", dcgm={"rc": 226, "out": failing, "err": ""})), "dcgm diag")
    assert bad == check("dcgm diag", "fail", "dcgmi diag -r 1: Persistence Mode failed (GPU 0,1,2,3,4,5,6,7)")
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
    assert one(judge(other), "gpu xid") == check(
        "gpu xid", "pass", "XIDs not in the list (reported): GPU at PCI 0000:9b:00: XID 13 in 2 h"
    )
    # The XID list is the config's.
    assert one(judge(facts, config(thresholds={"xids": [79]})), "gpu xid")["status"] == "pass"


def test_xid_from_dmesg_with_its_local_times(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        events = xid_events(parse_log(fixture("dmesg_xid_119.log")))
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
        name: ("skip", "no GPU") for name in ("gpus", *GPU_CHECKS)
    }
    container = judge(gpu_facts("nvidia_smi_t4.xml") | {"log": {"source": "journalctl", "text": "", "kernel": False}})
    assert one(container, "gpu xid")["detail"] == "the journal holds no kernel message of this boot (a container?)"


def test_gpu_peer_memory(tmp_path: Path) -> None:
    assert peermem(tmp_path) == {"module": None, "version": None}
    (tmp_path / "sys/module/nvidia_peermem").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia_peermem/version").write_text("550.54.15\n")
    assert peermem(tmp_path) == {"module": "nvidia_peermem", "version": "550.54.15"}
    old = tmp_path / "old"
    (old / "sys/kernel/mm/memory_peers/nv_mem").mkdir(parents=True)
    (old / "sys/kernel/mm/memory_peers/nv_mem/version").write_text("1.3-0\n")
    assert peermem(old) == {"module": "nv_peer_mem", "version": "1.3-0"}
    facts = roce_facts() | gpu_facts("nvidia_smi_t4.xml", log="") | {"groups": ["fabric", "gpu"]}
    facts["peermem"] = peermem(tmp_path)
    j = judge(facts, config(devices=["mlx5_0"], gpus=1))
    assert one(j, "gpu peer memory") == check("gpu peer memory", "pass", "nvidia_peermem 550.54.15")
    facts["peermem"] = {"module": None, "version": None}
    got = one(judge(facts, config(devices=["mlx5_0"], gpus=1)), "gpu peer memory")
    assert got["status"] == "skip" and "GPUDirect RDMA only through DMA-BUF" in got["detail"]
    # cluster_rdma_devices left empty (it is optional): the devices found count the same.
    assert one(judge(facts, config(gpus=1)), "gpu peer memory")["status"] == "skip"
    # No RDMA device: no GPUDirect RDMA to judge.
    assert checks(judge(facts | {"rdma": []}, config(gpus=1)), "gpu peer memory") == []
