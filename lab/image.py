"""Build the lab host image locally: mmdebstrap a Debian bookworm rootfs, then `podman import`.

No registry is reachable, so the image is made from Debian's apt mirror. The rootfs tarball is cached
under ~/.cache/rdma-llm-cluster, keyed by the recipe, and can always be rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import time
from pathlib import Path

from lab import podman

IMAGE = "localhost/rdma-llm-lab:bookworm"
RECIPE_LABEL = "io.rdma-llm-cluster.recipe"
HOOK = Path(__file__).parent / "files" / "customize.sh"
CACHE = Path.home() / ".cache" / "rdma-llm-cluster"
SUITE = "bookworm"
MIRRORS = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]
# A bare Debian server: what Ansible and SSH need, nothing the roles are meant to install.
PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "udev",
    "python3",
    "python3-apt",
    "sudo",
    "iproute2",
    "iputils-ping",
    "procps",
    "kmod",
    "netbase",
    "ca-certificates",
    "openssh-server",
]


def recipe_id() -> str:
    h = hashlib.sha256()
    h.update("\n".join([SUITE, *MIRRORS, *PACKAGES]).encode())
    h.update(HOOK.read_bytes())
    return h.hexdigest()[:12]


def image_recipe() -> str | None:
    proc = podman.run("image", "inspect", "--format", '{{ index .Labels "' + RECIPE_LABEL + '" }}', IMAGE, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_image(log=print) -> str:
    """Return the image name, building it only when missing or when its recipe changed. One build at a time:
    the test suite's Molecule runner and the lab may both ask for it at start."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_image(log)


def _ensure_image(log) -> str:
    rid = recipe_id()
    if image_recipe() == rid:
        return IMAGE
    tarball = CACHE / f"lab-{SUITE}-{rid}.tar"
    if not tarball.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = tarball.with_suffix(".tmp.tar")
        log(f"lab: building the {SUITE} rootfs with mmdebstrap (about a minute) -> {tarball}")
        t0 = time.monotonic()
        cmd = [
            "mmdebstrap",
            "--variant=minbase",
            "--include=" + ",".join(PACKAGES),
            # The hook empties apt lists itself and must keep their stale mtime (see customize.sh).
            "--skip=cleanup/apt",
            f'--customize-hook={HOOK} "$1"',
            SUITE,
            str(tmp),
            *MIRRORS,
        ]
        proc = subprocess.run(cmd, text=True, capture_output=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"lab: mmdebstrap failed (rc {proc.returncode})")
        tmp.rename(tarball)
        log(f"lab: rootfs built in {time.monotonic() - t0:.0f} s")
        for old in CACHE.glob(f"lab-{SUITE}-*.tar"):
            if old != tarball:
                old.unlink()
    log(f"lab: importing {IMAGE}")
    podman.run(
        "import",
        "--change",
        'CMD ["/sbin/init"]',
        "--change",
        "ENV container=podman",
        # systemd's clean shutdown signal, so `podman stop` does not wait for the timeout.
        "--change",
        "STOPSIGNAL SIGRTMIN+3",
        "--change",
        f"LABEL {RECIPE_LABEL}={rid}",
        str(tarball),
        IMAGE,
    )
    return IMAGE
