"""One node's result (plugins/module_utils/node/run.py): its one-line reason."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import REASON_MAX
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.judge import check
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import summary


def test_summary_reason_is_one_line_a_scheduler_can_keep() -> None:
    many = [check("gpu xid", "fail", f"GPU {i}: XID 79 (GPU has fallen off the bus)") for i in range(8)]
    status_, reason = summary([*many, check("mtu", "warn", "x")])
    assert status_ == "fail" and len(reason) == REASON_MAX and reason.endswith("...") and "\n" not in reason
    assert summary([check("a", "warn", "rdma0: 1 short link flap(s)")]) == ("warn", "rdma0: 1 short link flap(s)")
