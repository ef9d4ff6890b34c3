"""apt-cache policy read: the CI VM's own output (a package apt knows with a newer candidate, one it does not know,
one with no candidate, one not installed), and each way a plan cannot be installed."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.gpu import apt

from .helpers import FIX

POLICY = (FIX / "apt_cache_policy_ci_vm.txt").read_text()


def test_policy_of_the_ci_vm():
    known = apt.policy(POLICY)
    assert known["dpkg"] == {"installed": "1.21.22", "candidate": "1.21.23", "versions": ["1.21.23", "1.21.22"]}
    assert known["nvidia-driver"] == {"installed": None, "candidate": None, "versions": []}
    assert known["linux-image-amd64"]["versions"] == ["6.1.192-3", "6.1.176-1"]
    assert "nvidia-utils-580-server" not in known  # apt printed nothing for it


def test_unavailable():
    known = apt.policy(POLICY)
    assert apt.unavailable(["dpkg", "dpkg=1.21.2*", "linux-image-amd64=6.1.176-*"], known) == []
    assert apt.unavailable(["nvidia-utils-580-server=580.95.05-*", "nvidia-driver", "dpkg=1.22.*"], known) == [
        "nvidia-utils-580-server: no installation candidate",
        "nvidia-driver: no installation candidate",
        "dpkg: no version 1.22.* (the sources have 1.21.23, 1.21.22)",
    ]
