"""The node's tools (nvidia-smi, ibv_devinfo, ethtool, journalctl, scontrol ...): every one runs through Tools, so
tests pass recorded outputs instead."""

from __future__ import annotations

import os
import shutil
import subprocess

# Where the tools are when the caller gives no PATH (a scheduler may run the command with an empty environment):
# sminfo and ethtool live in sbin.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Tools:
    """Runs the node's tools (found on PATH, or on `path`; SYSTEM_PATH when PATH is unset); tests pass their own
    with recorded outputs. run() returns {"rc", "out", "err"}, or None when the tool is not installed."""

    def __init__(self, path: str | None = None):
        self.path = path or os.environ.get("PATH") or SYSTEM_PATH

    def run(self, argv: list[str], timeout: float = 60) -> dict | None:
        exe = shutil.which(argv[0], path=self.path)
        if exe is None:
            return None
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"rc": 124, "out": "", "err": f"{argv[0]} did not finish within {timeout:.0f} s"}
        except OSError as exc:
            return {"rc": 126, "out": "", "err": f"{argv[0]}: {exc}"}
        return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}


def last_line(res: dict | None) -> str:
    text = ((res or {}).get("err") or "").strip() or ((res or {}).get("out") or "").strip()
    return text.splitlines()[-1][:160] if text else f"rc {(res or {}).get('rc')}"
