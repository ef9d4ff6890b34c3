"""Recording (module_utils/host/reset/record.py): each item kept the first time only, nothing written in check
mode, and the requests the store refuses."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import ResetError, load

from tests.unit.plugins.module_utils.host.reset.fake import host


def test_the_first_record_wins_and_a_second_reset_changes_nothing(root, system):
    h = host(root, system)
    record(h, "common", Spec(paths=["/etc/hosts"], values={"hostname": "before"}))
    (root / "etc" / "hosts").write_text("changed once\n")
    again = record(h, "common", Spec(paths=["/etc/hosts"], values={"hostname": "after"}))
    assert again == {"changed": False, "lines": []}
    (root / "etc" / "hosts").write_text("changed twice\n")
    result = restore(h, "common")
    assert result["values"] == {"hostname": "before"}
    assert (root / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    second = restore(h, "common")
    assert second["changed"] is False and second["recorded"] is False


def test_check_mode_records_nothing_and_restores_nothing(root, system):
    record(host(root, system, check=True), "common", Spec(paths=["/etc/hosts"]))
    assert not (root / "var").exists()
    h = host(root, system)
    record(h, "common", Spec(paths=["/etc/hosts", "/etc/new"]))
    (root / "etc" / "new").write_text("new\n")
    planned = restore(host(root, system, check=True), "common")
    assert planned["changed"] and "remove /etc/new (created by the project)" in planned["changes"]
    assert (root / "etc" / "new").exists() and load(h, "common") is not None, "check mode keeps everything"


@pytest.mark.parametrize(
    ("concern", "paths", "error"),
    [
        ("Common", [], "must match"),
        ("common", ["etc/hosts"], "absolute, normalised"),
        ("common", ["/etc/../etc/hosts"], "absolute, normalised"),
        ("common", ["/var/lib/rdma-llm"], "absolute, normalised"),
        ("common", ["/var/lib/rdma-llm/reset/x"], "inside the reset store"),
    ],
)
def test_bad_requests_are_refused(root, system, concern, paths, error):
    with pytest.raises(ResetError, match=error):
        record(host(root, system), concern, Spec(paths=paths))
