"""The GPUs' readings as metrics (monitoring/gpu.py). Samples (tests/fixtures/node_check/README.md): real
`nvidia-smi -q -x` of an H200 (this project's recording, driver 580, v13 DTD), a T4 (driver 515, v11: power under
`power_readings`, no row remapping on Turing) and an A100 in MIG mode (utilisation and remapped rows N/A); a fault
is a recording with one value changed."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import gpu

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import fixture, names, parse, series, value

MIB = 2**20


def text_of(name: str, change: tuple[str, str] | None = None) -> str:
    xml = fixture(f"node_check/{name}")
    if change:
        assert change[0] in xml
        xml = xml.replace(change[0], change[1], 1)
    return gpu.textfile(gpu.readings(xml))


def test_an_h200s_readings() -> None:
    text = text_of("nvidia_smi_h200.xml")
    assert value(text, "rdma_llm_gpu_present") == 1
    assert value(text, "rdma_llm_gpu_info", gpu=0, name="NVIDIA H200", pci="00000000:00:06.0", driver="580.159.04") == 1
    assert value(text, "rdma_llm_gpu_memory_total_bytes", gpu=0) == 143771 * MIB
    assert value(text, "rdma_llm_gpu_memory_used_bytes", gpu=0) == 0
    assert value(text, "rdma_llm_gpu_temperature_celsius", gpu=0) == 35
    assert value(text, "rdma_llm_gpu_power_watts", gpu=0) == 80.99  # instant_power_draw, not the 80.53 average
    assert value(text, "rdma_llm_gpu_sm_clock_hertz", gpu=0) == 345e6
    assert value(text, "rdma_llm_gpu_utilization_ratio", gpu=0) == 0
    for scope in ("volatile", "aggregate"):
        assert value(text, "rdma_llm_gpu_ecc_corrected_errors_total", gpu=0, scope=scope) == 0
        assert value(text, "rdma_llm_gpu_ecc_uncorrected_errors_total", gpu=0, scope=scope) == 0
    assert value(text, "rdma_llm_gpu_remapped_rows", gpu=0, cause="uncorrectable") == 0
    assert value(text, "rdma_llm_gpu_remapped_rows_pending", gpu=0) == 0
    assert value(text, "rdma_llm_gpu_remapped_rows_failure", gpu=0) == 0


def test_a_pending_or_failed_remapping_and_remapped_rows() -> None:
    pending = text_of("nvidia_smi_h200.xml", ("<remapped_row_pending>No", "<remapped_row_pending>Yes"))
    assert value(pending, "rdma_llm_gpu_remapped_rows_pending", gpu=0) == 1
    assert value(pending, "rdma_llm_gpu_remapped_rows_failure", gpu=0) == 0
    failed = text_of("nvidia_smi_h200.xml", ("<remapped_row_failure>No", "<remapped_row_failure>Yes"))
    assert value(failed, "rdma_llm_gpu_remapped_rows_failure", gpu=0) == 1
    rows = text_of("nvidia_smi_h200.xml", ("<remapped_row_unc>0", "<remapped_row_unc>7"))
    assert value(rows, "rdma_llm_gpu_remapped_rows", gpu=0, cause="uncorrectable") == 7
    assert value(rows, "rdma_llm_gpu_remapped_rows", gpu=0, cause="correctable") == 0


def test_ecc_errors_sum_sram_and_dram_per_scope() -> None:
    # The T4's <volatile> block comes first: its sram_correctable 0 -> 10000.
    text = text_of("nvidia_smi_t4.xml", ("<sram_correctable>0", "<sram_correctable>10000"))
    assert value(text, "rdma_llm_gpu_ecc_corrected_errors_total", gpu=0, scope="volatile") == 10000
    assert value(text, "rdma_llm_gpu_ecc_corrected_errors_total", gpu=0, scope="aggregate") == 0
    dram = text_of("nvidia_smi_t4.xml", ("<dram_uncorrectable>0", "<dram_uncorrectable>2"))
    assert value(dram, "rdma_llm_gpu_ecc_uncorrected_errors_total", gpu=0, scope="volatile") == 2


def test_a_t4_reads_power_from_its_older_layout_and_has_no_remapping() -> None:
    text = text_of("nvidia_smi_t4.xml")
    assert value(text, "rdma_llm_gpu_power_watts", gpu=0) == 26.78  # power_readings/power_draw (v11)
    assert value(text, "rdma_llm_gpu_sm_clock_hertz", gpu=0) == 585e6
    assert not names(text) & {"rdma_llm_gpu_remapped_rows", "rdma_llm_gpu_remapped_rows_pending"}


def test_what_the_driver_reports_as_na_is_no_sample() -> None:
    text = text_of("nvidia_smi_a100_mig.xml")
    assert "rdma_llm_gpu_utilization_ratio" not in names(text)  # <gpu_util>N/A</gpu_util> in MIG mode
    assert "rdma_llm_gpu_remapped_rows_pending" not in names(text)  # <remapped_rows>N/A</remapped_rows>
    assert value(text, "rdma_llm_gpu_power_watts", gpu=0) == 67.03  # gpu_power_readings/power_draw (v12)
    # The GPU's own frame buffer, not a MIG instance's.
    assert value(text, "rdma_llm_gpu_memory_total_bytes", gpu=0) == 81920 * MIB


@pytest.mark.parametrize("gpus", [None, []])
def test_a_host_without_a_gpu_says_so_and_nothing_else(gpus) -> None:
    text = gpu.textfile(gpus)
    assert parse(text) == {("rdma_llm_gpu_present", ()): 0}


def test_output_that_is_no_xml_is_no_gpu_reading() -> None:
    assert gpu.readings("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") is None
    assert parse(gpu.textfile(gpu.readings(""))) == {("rdma_llm_gpu_present", ()): 0}


def test_nvml_readings_as_dicts_give_the_same_series() -> None:
    one = gpu.readings(fixture("node_check/nvidia_smi_h200.xml"))[0]
    two = {**one, "index": 1, "pci": "00000000:00:07.0", "temperature_celsius": 61}
    text = gpu.textfile([one, two])
    assert value(text, "rdma_llm_gpu_temperature_celsius", gpu=1) == 61
    assert len(series(text, "rdma_llm_gpu_info")) == 2


@pytest.mark.parametrize(
    ("text", "unit", "want"),
    [("143771 MiB", "MiB", 143771 * MIB), ("7 %", "%", 0.07), ("80.99 W", "W", 80.99), ("N/A", "W", None),
     ("[N/A]", "%", None), ("Not Supported", "W", None), ("35 C", "W", None), (None, "C", None)],
)  # fmt: skip
def test_quantities_in_base_units(text, unit, want) -> None:
    assert gpu.quantity(text, unit) == want


def test_ecc_not_reported_is_no_count_and_half_a_block_is_no_sum() -> None:
    # The RTX 4000 reports every ECC counter as N/A (ECC off on that board).
    text = text_of("nvidia_smi_rtx4000_v13.xml")
    assert not {n for n in names(text) if "_ecc_" in n}
    assert value(text, "rdma_llm_gpu_power_watts", gpu=0) == 8.44
    # The T4's volatile DRAM correctable counter N/A: the SRAM one alone would read as the block's count.
    half = text_of("nvidia_smi_t4.xml", ("<dram_correctable>0", "<dram_correctable>N/A"))
    scopes = {dict(k)["scope"] for k in series(half, "rdma_llm_gpu_ecc_corrected_errors_total")}
    assert scopes == {"aggregate"}
