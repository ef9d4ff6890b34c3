"""pip's bootstrap for ansible-test's sanity virtualenvs, from the package index alone.

ansible-test creates each sanity test's virtualenv without pip and runs a `get-pip.py` it downloads from its own
CI file server (cached as `~/.ansible/test/cache/get_pip_<version>.py`); that server is not a package registry and
is not reachable here. tests/test_sanity.py places this file at that cache path under a HOME of its own: it gives
the new virtualenv the interpreter's bundled pip (ensurepip), then installs what ansible-test asked for (`pip==24.2`)
from the index pip is configured with. ansible-test runs it as get-pip.py is run: as `__main__`, with get-pip's
arguments (pip's install options and requirements, plus get-pip's own `--no-setuptools`/`--no-wheel`).
"""

from __future__ import annotations

import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")  # get-pip.py's own flags: pip install knows neither


def pip_install_args(argv: list[str]) -> list[str]:
    """pip install's arguments from get-pip.py's."""
    return [arg for arg in argv if arg not in GET_PIP_ONLY]


def main(argv: list[str]) -> int:
    subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True, stdout=subprocess.DEVNULL)
    return subprocess.run([sys.executable, "-m", "pip", "install", *pip_install_args(argv)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
