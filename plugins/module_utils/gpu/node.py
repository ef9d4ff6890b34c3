"""What a node has of the GPU stack, read from its tree (`root` is `/`; tests point it at a fake one): dpkg's
status database (installed and held packages, parsed where rdma-node-check reads it too), the running kernel, the
loaded NVIDIA driver, nouveau, and the role's blacklist file."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.parsers import parse_dpkg_status as dpkg_status

DPKG_STATUS = "var/lib/dpkg/status"
BLACKLIST_FILE = "/etc/modprobe.d/rdma-llm-nouveau.conf"


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read(root: str | Path = "/", blacklist_file: str = BLACKLIST_FILE) -> dict:
    top = Path(root)
    installed, held = dpkg_status(_text(top / DPKG_STATUS) or "")
    return {
        "installed": installed,
        "held": held,
        "kernel": (_text(top / "proc/sys/kernel/osrelease") or "").strip(),
        "loaded_driver": (_text(top / "sys/module/nvidia/version") or "").strip(),
        "nouveau_loaded": (top / "sys/module/nouveau").is_dir(),
        "blacklist": _text(top / blacklist_file.lstrip("/")),
    }
