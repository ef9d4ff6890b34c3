"""A file changed since the project wrote it (module_utils/host/reset/edits.py): its checksum recorded after each
write, a copy kept and a warning at reset, then the reset as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.edits import KEPT, copy_name, warning
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record, written
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, ResetError, load

from tests.unit.plugins.module_utils.host.reset.fake import host

NOON = datetime(2026, 12, 1, 12, 0, 5, tzinfo=UTC)
NETPLAN = "/etc/netplan/60-rdma-llm-fabric.yaml"


def at(h: Host, check: bool = False) -> Host:
    return Host(root=h.root, run=h.run, check_mode=check, clock=lambda: NOON)


def converge(root, system) -> Host:
    """What a role does: record /etc/hosts (there) and the netplan file (absent), write both, then `written`."""
    h = at(host(root, system))
    record(h, "rdma_netplan", Spec(paths=["/etc/hosts", NETPLAN]))
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n10.0.0.1 node1-fabric\n")
    (root / "etc" / "netplan").mkdir()
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").write_text("network: {version: 2}\n")
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").chmod(0o600)
    done = written(h, "rdma_netplan", ["/etc/hosts", NETPLAN])
    assert done["changed"] and len(done["lines"]) == 2
    return h


def test_an_untouched_file_is_reset_without_a_copy_or_a_warning(root, system):
    h = converge(root, system)
    assert written(h, "rdma_netplan", ["/etc/hosts", NETPLAN]) == {"changed": False, "lines": []}, "no new write"
    result = restore(h, "rdma_netplan")
    assert result["errors"] == [] and result["kept"] == [] and result["warnings"] == []
    assert not (root / KEPT.lstrip("/")).exists()
    assert (root / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"


def test_a_hand_edited_file_is_kept_with_a_warning_then_reset_as_before(root, system):
    h = converge(root, system)
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").write_text("network: {version: 2}\n# mine\n")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n10.0.0.1 node1-fabric\n10.9.9.9 nas\n")
    dry = restore(at(h, check=True), "rdma_netplan")
    copy = f"{KEPT}{NETPLAN}.20261201T120005Z"
    assert {"path": NETPLAN, "copy": copy} in dry["kept"]
    assert f"reset would keep it as {copy}" in " ".join(dry["warnings"])
    assert not (root / KEPT.lstrip("/")).exists(), "check mode copies nothing"
    done = restore(h, "rdma_netplan")
    assert done["errors"] == [] and done["kept"] == dry["kept"] and len(done["warnings"]) == 2
    kept = root / copy.lstrip("/")
    assert kept.read_text() == "network: {version: 2}\n# mine\n" and kept.stat().st_mode & 0o777 == 0o600
    assert (root / KEPT.lstrip("/")).stat().st_mode & 0o777 == 0o700, "a kept MUNGE key stays secret"
    hosts_copy = root / f"{KEPT}/etc/hosts.20261201T120005Z".lstrip("/")
    assert hosts_copy.read_text().endswith("10.9.9.9 nas\n")
    # Then the reset as before: the file the project created goes, the one that was there comes back.
    assert not (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").exists()
    assert (root / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    assert done["forgotten"] and f"{NETPLAN} was changed since the project last wrote it: kept as {copy}" in (
        " ".join(done["warnings"])
    )


def test_a_later_write_replaces_the_checksum(root, system):
    h = converge(root, system)
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").write_text("network: {version: 2, renderer: networkd}\n")
    assert written(h, "rdma_netplan", [NETPLAN])["changed"], "the role wrote a new content"
    assert restore(h, "rdma_netplan")["kept"] == []


def test_a_record_without_a_checksum_and_check_mode_writes_are_not_compared(root, system):
    h = at(host(root, system))
    record(h, "common", Spec(paths=["/etc/hosts"]))
    assert written(at(h, check=True), "common", ["/etc/hosts"]) == {"changed": False, "lines": []}
    assert "written" not in load(h, "common")["paths"][0]
    (root / "etc" / "hosts").write_text("anything\n")
    assert restore(h, "common")["kept"] == [], "a record older than the checksums restores as before"


def test_a_path_the_record_never_saw_is_refused(root, system):
    h = at(host(root, system))
    with pytest.raises(ResetError, match="has no record"):
        written(h, "common", ["/etc/hosts"])
    record(h, "common", Spec(paths=["/etc/hosts"]))
    with pytest.raises(ResetError, match="record it before writing it"):
        written(h, "common", ["/etc/hostname"])


def test_a_file_the_role_removed_loses_its_checksum(root, system):
    h = converge(root, system)
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").unlink()
    assert written(h, "rdma_netplan", [NETPLAN])["lines"] == [f"{NETPLAN}: no longer written by the project"]
    assert "written" not in next(e for e in load(h, "rdma_netplan")["paths"] if e["path"] == NETPLAN)


def test_a_copy_that_cannot_be_made_leaves_the_file_and_the_record(root, system):
    h = converge(root, system)
    (root / "etc" / "hosts").write_text("mine\n")
    (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").write_text("mine too\n")
    (root / "var" / "lib" / "rdma-llm" / "kept").write_text("")  # a file where the copies' directory goes
    done = restore(h, "rdma_netplan")
    assert len(done["errors"]) == 2 and not done["forgotten"]
    assert (root / "etc" / "hosts").read_text() == "mine\n", "the edit of a file the host had is not lost"
    assert (root / "etc" / "netplan" / "60-rdma-llm-fabric.yaml").read_text() == "mine too\n", "nor of a new one"


def test_copy_names_and_warning_text():
    taken = {f"{KEPT}/etc/hosts.T", f"{KEPT}/etc/hosts.T-2"}
    assert copy_name("/etc/hosts", "T", taken.__contains__) == f"{KEPT}/etc/hosts.T-3"
    assert copy_name("/etc/hosts", "T", lambda _: False) == f"{KEPT}/etc/hosts.T"
    assert warning("/etc/a", "/k/a", existed=True, check_mode=False).endswith(
        "kept as /k/a; reset then puts back the one the host had before the first run"
    )
    assert warning("/etc/a", "/k/a", existed=False, check_mode=True).endswith(
        "reset would keep it as /k/a, then remove it (the project created it)"
    )
