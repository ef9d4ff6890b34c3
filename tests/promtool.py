"""Where the tests find promtool: the one `make setup` unpacks from Debian 12's prometheus package
(`.tools/bin/promtool`, lab/cli.py install_promtool), else one on PATH. Missing, the tests that need it fail with
the way to get it: they never skip, since CI runs `make setup` first."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".tools" / "bin" / "promtool"


def promtool() -> str:
    if LOCAL.is_file() and os.access(LOCAL, os.X_OK):
        return str(LOCAL)
    found = shutil.which("promtool")
    if found:
        return found
    raise FileNotFoundError(
        f"promtool not found ({LOCAL} nor on PATH): run `make setup` "
        "(or `python -m lab host-packages`), which unpacks it from Debian's prometheus package"
    )
