"""rdma-node-check as one file: a Python zipapp (PEP 441: a shebang line, then a zip whose __main__.py runs the
command) of this package's modules, built on the controller (lookup rdma_llm.cluster.node_check_zipapp) and copied
to each node by the role node_health. Another command of module_utils is built the same way from its own entry
module and name (`entry`, `name`: rdma-llm-metrics from monitoring/cli.py, lookup rdma_llm.cluster.metrics_zipapp).

The node has no ansible_collections tree, so the zip carries the modules at their full names
(ansible_collections/rdma_llm/cluster/plugins/module_utils/node/<module>.py, with an empty __init__.py for each
package above them): Python puts the zip first on sys.path, and the imports by full name that every module of the
collection uses work there as they do in the collection. The modules are those the entry (node/cli.py) imports,
transitively (read from their source, not imported): only the stdlib and this collection's module_utils may be
imported, so a module that would need anything else fails the build, not the node.

The same files give the same bytes: entries sorted, every timestamp and mode fixed, stored uncompressed (no zlib
version in the bytes), so a second install of unchanged files changes nothing on the node.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "ansible_collections.rdma_llm.cluster.plugins.module_utils"
MODULE_UTILS = Path(__file__).resolve().parent.parent
ENTRY = f"{PACKAGE}.node.cli"
NAME = "rdma-node-check"
SHEBANG = b"#!/usr/bin/python3\n"


def main_source(entry: str = ENTRY, name: str = NAME) -> str:
    """The zipapp's __main__.py: the entry module's main(), its return value the exit status."""
    return f'''"""{name}: this zipapp's entry point (module_utils/node/build.py of the collection rdma_llm.cluster)."""

from {entry} import main

raise SystemExit(main())
'''


MAIN = main_source()
# The earliest time a zip entry can carry (MS-DOS dates start in 1980).
EPOCH = (1980, 1, 1, 0, 0, 0)


class BuildError(RuntimeError):
    """The command cannot be built from these files (a module missing, or an import the node cannot satisfy)."""


def module_file(name: str, root: Path = MODULE_UTILS) -> Path | None:
    """The file of a module_utils module or package by its full name; None when there is none."""
    if name == PACKAGE:
        return None
    if not name.startswith(PACKAGE + "."):
        raise BuildError(f"{name} is not a module of {PACKAGE}")
    base = root.joinpath(*name[len(PACKAGE) + 1 :].split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in a file, wherever it is (a function's import counts too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise BuildError(f"{path.name}: relative import (line {node.lineno}): import by full name")
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


def modules(entry: str = ENTRY, root: Path = MODULE_UTILS, name: str = NAME) -> dict[str, Path]:
    """{full name: file} of the entry and every module_utils module it imports, transitively."""
    seen: dict[str, Path] = {}
    todo = [entry]
    while todo:
        module_name = todo.pop()
        if module_name in seen:
            continue
        path = module_file(module_name, root)
        if path is None:
            raise BuildError(f"{module_name}: no such module in {root}")
        seen[module_name] = path
        for module, names in _imports(path):
            if module == PACKAGE or module.startswith(PACKAGE + "."):
                if module != PACKAGE:
                    todo.append(module)
                # `from <package> import <module>`: each name that is a module is one more to carry.
                todo += [f"{module}.{n}" for n in names if module_file(f"{module}.{n}", root) is not None]
            elif module.split(".")[0] not in sys.stdlib_module_names:
                raise BuildError(f"{path.name} imports {module}: the node runs {name} with the stdlib only")
    return seen


def files(entry: str = ENTRY, root: Path = MODULE_UTILS, name: str = NAME) -> dict[str, bytes]:
    """{name in the zip: bytes}: the modules at their full names, an __init__.py for every package above them
    (the package's own where it has one, else empty) and __main__.py."""
    out = {"__main__.py": main_source(entry, name).encode()}
    for module_name, path in modules(entry, root, name).items():
        parts = module_name.split(".")
        if path.name == "__init__.py":
            parts.append("__init__")
        out["/".join(parts) + ".py"] = path.read_bytes()
        for depth in range(1, len(parts)):
            package = "/".join(parts[:depth]) + "/__init__.py"
            if package not in out:
                own = module_file(".".join(parts[:depth]), root) if depth > PACKAGE.count(".") + 1 else None
                out[package] = own.read_bytes() if own is not None and own.name == "__init__.py" else b""
    return out


def archive(content: dict[str, bytes]) -> bytes:
    """The zipapp's bytes: the shebang, then a zip of `content` (sorted, fixed times and modes, stored)."""
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in sorted(content):
            info = zipfile.ZipInfo(name, EPOCH)
            info.create_system = 3  # Unix, so the mode below is read as one
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_STORED
            z.writestr(info, content[name])
    return buf.getvalue()


def build(dest_dir: str | Path, entry: str = ENTRY, root: Path = MODULE_UTILS, name: str = NAME) -> Path:
    """Write the zipapp of `entry` into `dest_dir` as <name>-<sha256 of its bytes>.pyz (mode 0755) unless it is
    there already with those bytes; its path. The write is a rename, so concurrent builds (one per host) never
    leave a partial file."""
    data = archive(files(entry, root, name))
    dest = Path(dest_dir) / f"{name}-{hashlib.sha256(data).hexdigest()[:16]}.pyz"
    if dest.is_file() and dest.read_bytes() == data:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{name}-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest
