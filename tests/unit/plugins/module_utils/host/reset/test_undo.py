"""Undo operations (module_utils/host/reset/undo.py): run last first, once per key."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import ResetError

from tests.unit.plugins.module_utils.host.reset.fake import host


def test_undo_operations_run_last_first_once_per_key(root, system):
    (root / "sys").mkdir()
    (root / "sys/attr").write_text("1\n")
    h = host(root, system)
    ops = [
        {"key": "attr", "write": "/sys/attr", "value": "0"},
        {"key": "dcb app rdma0", "argv": ["nft", "delete", "table", "inet", "x"]},
        {"key": "cm dir", "rmdir": "/sys/cm"},
    ]
    record(h, "rdma_qos", Spec(undo=ops))
    record(h, "rdma_qos", Spec(undo=[{"key": "attr", "write": "/sys/attr", "value": "7"}]))
    (root / "sys/cm").mkdir()
    system.calls.clear()
    result = restore(h, "rdma_qos")
    assert result["changes"][:3] == ["rmdir /sys/cm", "nft delete table inet x", "echo 0 > /sys/attr"]
    assert (root / "sys/attr").read_text() == "0\n" and not (root / "sys/cm").exists()
    with pytest.raises(ResetError, match="needs a key"):
        record(h, "rdma_qos", Spec(undo=[{"argv": ["true"]}]))
