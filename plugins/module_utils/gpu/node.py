"""What a node has of the GPU stack, read from its tree (`root` is `/`; tests point it at a fake one): dpkg's
status database (installed and held packages), the running kernel, the loaded NVIDIA driver, nouveau, and the
role's blacklist file."""

from __future__ import annotations

from pathlib import Path

DPKG_STATUS = "var/lib/dpkg/status"
BLACKLIST_FILE = "/etc/modprobe.d/rdma-llm-nouveau.conf"


def dpkg_status(text: str) -> tuple[dict[str, str], list[str]]:
    """({package: version} installed, [packages held]) from dpkg's status file (stanzas of `Field: value`;
    Status is `<want> <flag> <state>`: `hold ok installed` is installed and held)."""
    installed, held = {}, []
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name, status = fields.get("Package"), fields.get("Status", "").split()
        if not name or len(status) != 3:
            continue
        arch = fields.get("Architecture", "")
        name = name if arch in ("", "all", "amd64", "arm64") else f"{name}:{arch}"
        if status[2] == "installed":
            installed[name] = fields.get("Version", "")
        if status[0] == "hold":
            held.append(name)
    return installed, sorted(set(held))


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
