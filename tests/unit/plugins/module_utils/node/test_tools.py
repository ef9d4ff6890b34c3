"""The node's tools (plugins/module_utils/node/tools.py): where they are found."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import SYSTEM_PATH, Tools


def test_tools_are_found_in_sbin_when_the_caller_gives_no_path(monkeypatch) -> None:
    """A scheduler may run the command with an empty environment: sminfo and ethtool live in /usr/sbin."""
    monkeypatch.delenv("PATH", raising=False)
    assert Tools().path == SYSTEM_PATH and "/usr/sbin" in SYSTEM_PATH.split(":")
    monkeypatch.setenv("PATH", "/opt/tools")
    assert Tools().path == "/opt/tools" and Tools("/x").path == "/x"
    assert Tools("/nonexistent").run(["nvidia-smi"]) is None
