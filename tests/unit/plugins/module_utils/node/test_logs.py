"""The kernel log's reader (plugins/module_utils/node/logs.py): the journal first, else dmesg -T."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.logs import read_kernel_log

from tests.unit.plugins.module_utils.node.helpers import BOOT, NOW, FakeTools, fixture, line


def test_kernel_log_reader_asks_the_journal_then_dmesg() -> None:
    tools = FakeTools({"journalctl -k": fixture("journal_links_xid.txt")})
    got = read_kernel_log(tools, NOW - 3600)
    assert got["kernel"] and got["source"] == "journalctl"
    assert tools.calls[0][:2] == ["journalctl", "-k"] and f"--since=@{int(NOW - 3600)}" in tools.calls[0]
    # A quiet window on a host whose journal has kernel messages, and a container's journal that has none.
    quiet = FakeTools({"journalctl -k": {"rc": 0, "out": "", "err": ""}})
    assert read_kernel_log(quiet, NOW)["kernel"] is False and len(quiet.calls) == 2
    booted = FakeTools({})
    booted.run = lambda argv, timeout=60: {"rc": 0, "err": "", "out": "" if "--since" in " ".join(argv) else
                                           line(BOOT, "Linux version 6.8.0-49-generic")}  # fmt: skip
    assert read_kernel_log(booted, NOW)["kernel"] is True
    dmesg = read_kernel_log(FakeTools({"dmesg": fixture("dmesg_xid_119.log")}), NOW)
    assert dmesg["source"] == "dmesg -T" and dmesg["kernel"]
    assert read_kernel_log(FakeTools({}), NOW) == {"error": "journalctl not installed; dmesg not installed"}
