"""DOCA-OFED's inputs and plan (plugins/module_utils/host/doca.py): the repository pins the version."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import doca

# The layout of NVIDIA's DOCA-Host online repository (DOCA Documentation, "DOCA-Host Installation and Upgrade").
GOOD = {
    "version": "3.2.1",
    "repository": "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64/",
    "key_url": "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
}


def test_distributions_stack_by_default():
    assert doca.problem({}) is None and doca.problem(None) is None
    assert doca.plan({}, "6.8.0-90-generic") == {"enabled": False, "packages": [], "hold": [], "undo": []}


def test_plan():
    result = doca.plan(GOOD, "6.8.0-90-generic\n")
    assert result["packages"] == ["doca-ofed", "linux-headers-6.8.0-90-generic"]
    assert result["hold"] == ["doca-ofed"]
    assert result["undo"] == [{"key": "hold doca-ofed", "argv": ["apt-mark", "unhold", "doca-ofed"]}]
    assert result["repository"] == {"name": "rdma-llm-doca", "uris": GOOD["repository"], "suites": "./",
                                    "signed_by": "/etc/apt/keyrings/rdma-llm-doca.asc"}  # fmt: skip
    # user space only: no kernel modules, no headers
    assert doca.plan({**GOOD, "profile": "doca-ofed-userspace"}, "")["packages"] == ["doca-ofed-userspace"]


@pytest.mark.parametrize(("change", "message"), [
    ({"repository": ""}, "DOCA needs its repository"),
    ({"version": "3.2"}, "version must look like 3.2.1"),
    ({"repository": "http://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64/"}, "an https URL"),
    ({"repository": "https://linux.mellanox.com/public/repo/doca/3.1.0/ubuntu24.04/x86_64/"}, "names the version"),
    ({"repository": "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64"}, "ending in /"),
    ({"repository": "https://x/3.2.1/ ./\ndeb https://evil/ ./"}, "an https URL"),
    ({"key_url": "https://linux.mellanox.com/public/repo/doca/"}, "key_url must be"),
    ({"key_url": "file:///etc/passwd"}, "key_url must be"),
    ({"profile": "doca-everything"}, "profile must be one of"),
    ({"pin": "3.2.1"}, "unknown keys pin"),
])  # fmt: skip
def test_bad_input(change, message):
    value = {**GOOD, **change}
    assert message in doca.problem(value)
    with pytest.raises(RuleError, match="rdma_stack_doca "):
        doca.plan(value, "6.8.0-90-generic")


def test_odd_kernel_is_refused_where_headers_are_needed():
    with pytest.raises(RuleError, match="running kernel's release is unknown"):
        doca.plan(GOOD, "")
    with pytest.raises(RuleError, match="running kernel's release is unknown"):
        doca.plan(GOOD, "6.8.0 extra")
