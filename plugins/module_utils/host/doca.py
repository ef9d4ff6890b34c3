"""NVIDIA DOCA-OFED instead of the distribution's RDMA stack, where the inventory asks for it (rdma_stack_doca).

DOCA-Host's online repository is one per version and OS (linux.mellanox.com/public/repo/doca/<version>/<os>/<arch>/,
a flat repository: suite `./`), signed with NVIDIA's key (GPG-KEY-Mellanox.pub); its profiles are meta-packages
(`doca-ofed`, `doca-roce`, `doca-all`, their `-userspace` variants without kernel modules). From DOCA 3.x the kernel
modules are built with DKMS on the node, which needs the headers of the running kernel (NVIDIA DOCA
Documentation, "DOCA-Host Installation and Upgrade"). So the version is pinned by the repository itself: the
contract refuses a version without a repository, and a repository whose path does not name the version.
"""

from __future__ import annotations

import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

VERSION = re.compile(r"^\d+\.\d+\.\d+$")
URL = re.compile(r"^https://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~%+-]+)*/$")
PROFILES = ("doca-ofed", "doca-roce", "doca-all", "doca-networking", "doca-ofed-userspace", "doca-roce-userspace",
            "doca-all-userspace", "doca-networking-userspace")  # fmt: skip
KEYS = ("version", "repository", "key_url", "profile")
REPOSITORY = "rdma-llm-doca"  # /etc/apt/sources.list.d/rdma-llm-doca.sources
KEYRING = "/etc/apt/keyrings/rdma-llm-doca.asc"


def problem(value: object) -> str | None:
    """What is wrong with rdma_stack_doca ({} for the distribution's stack), None when nothing."""
    if value in ({}, None):
        return None
    if not isinstance(value, dict):
        return f"must be a mapping of {', '.join(KEYS)} (got {value!r})"
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        return f"unknown keys {', '.join(map(str, unknown))} (known: {', '.join(KEYS)})"
    version, repository = str(value.get("version", "")), str(value.get("repository", ""))
    if not VERSION.match(version):
        return f"version must look like 3.2.1 (got {value.get('version')!r})"
    if not repository:
        return "DOCA needs its repository: repository is required with a version"
    if not URL.match(repository) or f"/{version}/" not in repository:
        return (
            f"repository must be an https URL ending in / whose path names the version {version} (got {repository!r})"
        )
    key = str(value.get("key_url", ""))
    if not URL.match(key + "/") or key.endswith("/"):
        return f"key_url must be the https URL of the repository's signing key (got {value.get('key_url')!r})"
    if value.get("profile", "doca-ofed") not in PROFILES:
        return f"profile must be one of {', '.join(PROFILES)} (got {value.get('profile')!r})"
    return None


def plan(value: dict, kernel: str) -> dict:
    """The repository, the packages (the profile and, for kernel modules, the running kernel's headers) and the holds.
    `kernel` is the running kernel's release (/proc/sys/kernel/osrelease)."""
    why = problem(value)
    if why:
        raise RuleError(f"rdma_stack_doca {why}")
    if not value:
        return {"enabled": False, "packages": [], "hold": [], "undo": []}
    profile = str(value.get("profile", "doca-ofed"))
    kernel = str(kernel).strip()
    packages = [profile]
    if not profile.endswith("-userspace"):
        if not re.match(r"^[a-z0-9][a-z0-9.+-]+$", kernel):
            raise RuleError(f"rdma_stack_doca: the running kernel's release is unknown or odd ({kernel!r})")
        packages.append(f"linux-headers-{kernel}")
    return {
        "enabled": True,
        "version": str(value["version"]),
        "repository": {"name": REPOSITORY, "uris": value["repository"], "suites": "./", "signed_by": KEYRING},
        "key_url": str(value["key_url"]),
        "keyring": KEYRING,
        "packages": packages,
        "hold": [profile],
        # for the reset record: reset unholds what the role held
        "undo": [{"key": f"hold {profile}", "argv": ["apt-mark", "unhold", profile]}],
    }


FILTERS = {"rdma_stack_doca_plan": plan}
