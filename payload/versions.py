"""The versions of the training stack, the one probe: the payload records them in result.json and the launch
reads them before a run (the manifest, the check that the venv has what the engine needs).

Standard library only, so the launch can ask any venv's Python without importing torch:

  <venv>/bin/python payload/versions.py      -> one JSON object on stdout
"""

from __future__ import annotations

import importlib.metadata as md
import json
import platform

# What a run depends on; a package that is not installed is null.
PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "accelerate", "deepspeed", "numpy")


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


if __name__ == "__main__":
    print(json.dumps(versions()))
