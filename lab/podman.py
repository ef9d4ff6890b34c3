"""Thin wrapper around the podman CLI with the settings this machine kind needs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

from lab import STATE_ROOT


def containers_conf() -> Path:
    """Write the lab's containers.conf and return its path.

    podman reads it through CONTAINERS_CONF, so /etc/containers is left alone.
    - default_ulimits: root here lacks CAP_SYS_RESOURCE, so podman's default limits fail with
      `setrlimit RLIMIT_NOFILE: Operation not permitted`; podman caps its own NPROC at 32768.
    - runtime runc: crun fails with `cgroups in hybrid mode not supported`.
    """
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if hard == resource.RLIM_INFINITY else hard
    text = (
        "# Written by `python -m lab`: podman settings for systemd lab hosts on this machine.\n"
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=32768:32768"]\n'
        "\n[engine]\n"
        'runtime = "runc"\n'
    )
    path = STATE_ROOT / "containers.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["CONTAINERS_CONF"] = str(containers_conf())
    return out


def run(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], env=env(), text=True, capture_output=capture, check=False)
    if check and proc.returncode != 0:
        raise PodmanError(args, proc.returncode, (proc.stderr or "").strip())
    return proc


def out(*args: str) -> str:
    return run(*args).stdout.strip()


def jsonout(*args: str):
    text = out(*args)
    return json.loads(text) if text else []


class PodmanError(RuntimeError):
    def __init__(self, args, rc, stderr):
        super().__init__(f"podman {' '.join(args)} failed (rc {rc}): {stderr}")
        self.rc = rc
        self.stderr = stderr
