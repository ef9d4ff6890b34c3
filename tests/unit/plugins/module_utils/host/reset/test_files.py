"""Files and directories (module_utils/host/reset/files.py): copies put back exactly, new ones removed with the
directories they needed, a directory other concerns' files fill handed over to them."""

from __future__ import annotations

import errno
import os

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import STORE, load

from tests.unit.plugins.module_utils.host.reset.fake import host, tree


def test_files_come_back_exactly_and_new_ones_go_with_their_directories(root, system):
    before = tree(root)
    h = host(root, system)
    done = record(h, "common", Spec(paths=["/etc/hosts", "/etc/rdma-llm/sub/new.conf"], trees=["/opt/rdma-llm/venv"]))
    assert done["changed"]
    assert "/etc/rdma-llm: absent" in done["lines"] and "/etc/hosts: file (kept)" in done["lines"]
    # What the concern then does.
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n10.0.0.1 node1-fabric node1\n")
    (root / "etc" / "hosts").chmod(0o600)
    (root / "etc" / "rdma-llm" / "sub").mkdir(parents=True)
    (root / "etc" / "rdma-llm" / "sub" / "new.conf").write_text("x\n")
    (root / "opt" / "rdma-llm" / "venv" / "bin").mkdir(parents=True)
    (root / "opt" / "rdma-llm" / "venv" / "bin" / "python").write_text("#!")
    result = restore(h, "common")
    assert result["errors"] == [] and result["forgotten"]
    assert tree(root) == before
    assert not (root / "var").exists(), "the store and the directories it made are gone with the last record"
    # The diff of --check --diff: the file as it is, then the kept copy.
    hosts = next(d for d in result["diff"] if d["before_header"] == "/etc/hosts")
    assert (
        hosts["before"].endswith("node1-fabric node1\n") and hosts["after"] == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    )


def test_another_concern_keeps_the_store_and_shared_directories(root, system):
    h = host(root, system)
    record(h, "rdma_modules", Spec(paths=["/etc/ansible/facts.d/rdma_modules.fact"]))
    (root / "etc/ansible/facts.d").mkdir(parents=True)
    (root / "etc/ansible/facts.d/rdma_modules.fact").write_text("{}")
    record(h, "rdma_stack", Spec(paths=["/etc/ansible/facts.d/rdma.fact"]))
    (root / "etc/ansible/facts.d/rdma.fact").write_text("{}")
    first = restore(h, "rdma_modules")
    assert first["notes"] == ["/etc/ansible/facts.d kept for rdma_stack: their reset removes it"], (
        "another concern's file keeps the directory, and that concern takes it over"
    )
    assert (root / STORE.lstrip("/") / "rdma_stack").is_dir()
    second = restore(h, "rdma_stack")
    # The concern that created facts.d was reset first (a half site.yml made it for a later role, then the whole
    # site.yml ran): the directories go with the last file they held.
    assert not (root / "etc/ansible").exists() and not (root / "var").exists(), second
    assert "remove the empty directory /etc/ansible (created by the project)" in second["changes"]


def test_a_shared_directory_with_a_file_no_record_names_stays_and_says_why(root, system):
    h = host(root, system)
    record(h, "rdma_qos", Spec(paths=["/etc/ansible/facts.d/rdma_qos.fact"]))
    (root / "etc/ansible/facts.d").mkdir(parents=True)
    record(h, "rdma_stack", Spec(paths=["/etc/ansible/facts.d/rdma.fact"]))
    for name in ("rdma_qos.fact", "mine.fact", "rdma.fact"):
        (root / "etc/ansible/facts.d" / name).write_text("{}")
    planned = restore(host(root, system, check=True), "rdma_qos")
    assert load(h, "rdma_stack")["paths"][0]["path"] == "/etc/ansible/facts.d/rdma.fact", "check mode hands nothing"
    first = restore(h, "rdma_qos")
    assert (
        first["notes"]
        == planned["notes"]
        == [
            "/etc/ansible/facts.d kept: it holds files the project did not record (mine.fact)",
            "/etc/ansible/facts.d kept for rdma_stack: their reset removes it",
        ]
    )
    restore(h, "rdma_stack")
    assert sorted(p.name for p in (root / "etc/ansible/facts.d").iterdir()) == ["mine.fact"]


def test_a_bind_mounted_file_is_written_in_place(root, system, monkeypatch):
    h = host(root, system)
    record(h, "common", Spec(paths=["/etc/hosts"]))
    (root / "etc/hosts").write_text("changed\n")
    inode = (root / "etc/hosts").stat().st_ino

    def busy(src, dst):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(os, "replace", busy)
    result = restore(h, "common", keep=True)
    assert result["errors"] == []
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    assert (root / "etc/hosts").stat().st_ino == inode, "written in place, not replaced"
