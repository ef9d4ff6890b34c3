"""The payload's flight-recorder dump (payload/flight.py): both of torch's recorders in one file, read by the launch's
hang verdict (plugins/module_utils/launch/hang.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import hang

from payload import flight

pytestmark = pytest.mark.payload

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hang"


def recorder(name: str):
    data = (FIXTURES / name).read_bytes()
    return lambda include_collectives, only_active: data


def test_the_dump_holds_the_nccl_recorder_and_the_generic_one(tmp_path: Path) -> None:
    """On a CUDA build NCCL's collectives are only in ProcessGroupNCCL's own recorder: the dump holds its entries
    beside the generic recorder's (gloo), and the verdict's summary reads both groups (the two recorders of one
    process on an H200)."""
    c10d = SimpleNamespace(
        _dump_nccl_trace_json=recorder("fr_nccl_rank0_pending.json"),
        _dump_fr_trace_json=recorder("fr_gloo_h200_setup_group.json"),
    )
    out = json.loads(flight.dump(tmp_path / "fr-rank0.json", "s1", c10d).read_text())
    nccl = json.loads((FIXTURES / "fr_nccl_rank0_pending.json").read_text())["entries"]
    gloo = json.loads((FIXTURES / "fr_gloo_h200_setup_group.json").read_text())["entries"]
    assert out["request"] == "s1" and out["recorders"] == {
        "_dump_nccl_trace_json": len(nccl),
        "_dump_fr_trace_json": len(gloo),
    }
    assert out["trace"]["entries"] == nccl + gloo
    groups = hang.flight_summary(out["trace"])
    assert any((g["op"] or "").startswith("nccl:") for g in groups.values()), groups
    assert any((g["op"] or "").startswith("gloo:") for g in groups.values()), groups


def test_a_cpu_build_has_the_generic_recorder_only_and_a_failing_one_is_said(tmp_path: Path) -> None:
    def broken(include_collectives, only_active):
        raise RuntimeError("no NCCL process group")

    cpu = SimpleNamespace(_dump_fr_trace_json=recorder("fr_gloo_rank0_waiting.json"))
    out = json.loads(flight.dump(tmp_path / "fr-rank0.json", "s2", cpu).read_text())
    assert list(out["recorders"]) == ["_dump_fr_trace_json"] and out["trace"]["entries"]
    c10d = SimpleNamespace(_dump_nccl_trace_json=broken, _dump_fr_trace_json=cpu._dump_fr_trace_json)
    out = json.loads(flight.dump(tmp_path / "fr-rank0.json", "s3", c10d).read_text())
    assert out["recorders"]["_dump_nccl_trace_json"] == "RuntimeError: no NCCL process group"
    assert out["recorders"]["_dump_fr_trace_json"] == len(out["trace"]["entries"]) > 0


def test_the_hang_verdict_reads_the_nccl_collective_pending_in_a_real_dump(tmp_path: Path) -> None:
    """The payload's dump recorded on an H200 (NCCL 2.28.9): read as the launch reads a rank's dump, it names the
    NCCL all-reduce still pending (#4 of default_pg), which the generic recorder alone never held."""
    (tmp_path / "fr-rank0.json").write_text((FIXTURES / "fr_payload_dump_h200.json").read_text())
    got = hang.read_flight(str(tmp_path), [0], "gpu-flight", wait=0, sleep=lambda s: None)
    assert got[0]["default_pg"] == {"last": 4, "op": "nccl:all_reduce", "pending": 4, "pending_op": "nccl:all_reduce"}
    generic = json.loads((FIXTURES / "fr_gloo_h200_setup_group.json").read_text())
    assert "default_pg" not in hang.flight_summary(generic)
