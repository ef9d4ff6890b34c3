"""What a node has: dpkg's status database in its real format (this Debian 12 VM's), kernel, driver, nouveau."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import node

from .helpers import node_state, stanza


def test_dpkg_status_installed_and_held():
    text = (stanza("nvidia-utils-580-server", "580.95.05-0ubuntu1", want="hold")
            + stanza("libc6", "2.36-9+deb12u10", arch="i386") + stanza("tzdata", "2025b-0+deb12u1", arch="all")
            + "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n\n"
            + "Package: pinned-absent\nStatus: hold ok not-installed\n\n")  # fmt: skip
    installed, held = node.dpkg_status(text)
    assert installed == {"nvidia-utils-580-server": "580.95.05-0ubuntu1", "libc6:i386": "2.36-9+deb12u10",
                         "tzdata": "2025b-0+deb12u1"}  # fmt: skip
    assert held == ["nvidia-utils-580-server", "pinned-absent"]


def test_this_machines_status_file_parses():
    status = Path("/var/lib/dpkg/status")
    installed, _ = node.dpkg_status(status.read_text())
    assert "dpkg" in installed and installed["dpkg"][0].isdigit()


def test_read_a_node(tmp_path):
    root = node_state(
        tmp_path, status=stanza("linux-generic", "6.8.0-87.88"), sys__module__nvidia__version="580.95.05\n"
    )
    (root / "sys" / "module" / "nouveau").mkdir(parents=True)
    (root / "etc" / "modprobe.d").mkdir(parents=True)
    (root / "etc" / "modprobe.d" / "rdma-llm-nouveau.conf").write_text("blacklist nouveau\n")
    state = node.read(root)
    assert state == {"installed": {"linux-generic": "6.8.0-87.88"}, "held": [], "kernel": "6.8.0-87-generic",
                     "loaded_driver": "580.95.05", "nouveau_loaded": True,
                     "blacklist": "blacklist nouveau\n"}  # fmt: skip


def test_read_an_empty_root(tmp_path):
    assert node.read(tmp_path) == {"installed": {}, "held": [], "kernel": "", "loaded_driver": "",
                                   "nouveau_loaded": False, "blacklist": None}  # fmt: skip
