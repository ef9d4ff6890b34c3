"""The probe behind the apt_missing action: which of the wanted packages dpkg does not show installed.

Plain Python (no Ansible), tested by tests/unit/plugins/action/test_apt_missing.py. A `dpkg-query --show` costs
a fraction of an apt module run, which loads the whole apt cache even when there is nothing to do.
"""

from __future__ import annotations

import re

SHOWFORMAT = "${Package} ${db:Status-Status}\\n"
# apt's own spellings of a version or release pin: name=1.2, name>=1.2, name/bookworm-backports.
_PIN = re.compile(r"[=<>/]")


def probe_argv(names: list[str]) -> list[str]:
    """dpkg-query for the bare names (a pinned name is probed by its name; apt_missing sends it to apt anyway)."""
    return ["dpkg-query", "--show", f"--showformat={SHOWFORMAT}", *dict.fromkeys(_PIN.split(n, 1)[0] for n in names)]


def missing(names: list[str], rc: int, stdout: str) -> list[str]:
    """The names apt must see, in their order: not shown `installed` (rc 1: some name is unknown to dpkg), or
    pinned to a version or release (only apt can tell whether the installed one matches)."""
    if rc not in (0, 1):
        raise ValueError(f"dpkg-query exited {rc}")
    installed = set()
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == "installed":
            installed.add(fields[0].split(":", 1)[0])
    return [n for n in dict.fromkeys(names) if _PIN.search(n) or n not in installed]


# Every package dpkg knows, with its state: read before and after apt runs, the difference is what this run
# installed (dependencies included), which the action records for reset (module_utils/host/reset/packages.py).
ALL_ARGV = ["dpkg-query", "--show", f"--showformat={SHOWFORMAT}"]


def installed(stdout: str) -> set[str]:
    """The names `dpkg-query --show` (ALL_ARGV) shows installed."""
    return {f[0].split(":", 1)[0] for f in (line.split() for line in stdout.splitlines()) if f[1:] == ["installed"]}


GROUP_FILE_ARGV = ["cat", "/etc/group"]
PASSWD_FILE_ARGV = ["cat", "/etc/passwd"]


def new_names(before: str, after: str) -> list[str]:
    """Names in the second reading of /etc/group (GROUP_FILE_ARGV), or of /etc/passwd, and not in the first, sorted:
    what a package's maintainer script created (libibverbs1 adds the group `rdma`, mariadb-server the user `mysql`;
    purge leaves them)."""

    def names(text: str) -> set[str]:
        return {line.split(":", 1)[0] for line in text.splitlines() if ":" in line}

    return sorted(names(after) - names(before))


def newly_installed(before: str, after: str) -> list[str]:
    """What apt installed between two ALL_ARGV readings, sorted."""
    return sorted(installed(after) - installed(before))
