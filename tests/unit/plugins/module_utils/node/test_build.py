"""The command as the node gets it (plugins/module_utils/node/build.py): one zipapp file, built here from the package,
the same bytes each time, that runs with the stdlib alone (a Python with no site-packages and no collection on its
path) and prints, on every recorded case (helpers.CASES), the same bytes as the library's main() in this process."""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import build
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.cli import main

from tests.unit.plugins.module_utils.node.helpers import CASES, FROZEN, NOW, env, lab_root, write_config

NODE = Path(build.__file__).parent
SYSTEM_PYTHON = Path("/usr/bin/python3")  # the zipapp's shebang, as on a node


@pytest.fixture(scope="module")
def command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build.build(tmp_path_factory.mktemp("zipapp"))


def alone(*argv: str | Path, base: Path) -> subprocess.CompletedProcess:
    """This Python without its site-packages (-S) or the environment's PYTHON* and the current directory (-I): the
    stdlib and what is on argv. The environment is the case's only (no PYTHONPATH)."""
    cmd = [sys.executable, "-I", "-S", *map(str, argv)]
    return subprocess.run(cmd, env=env(base), cwd=base, capture_output=True, timeout=120, check=False)


def test_the_command_is_the_node_package_and_the_stdlib_only(command: Path) -> None:
    """Installed alone as /usr/local/sbin/rdma-node-check: the modules cli.py imports, at their full names, and
    nothing but the stdlib (the controller's side, health.py and build.py, stays out)."""
    names = set(build.modules())
    assert {n.rsplit(".", 1)[1] for n in names} == {p.stem for p in NODE.glob("*.py")} - {"__init__", "health", "build"}
    with zipfile.ZipFile(command) as z:
        inside = {n: z.read(n) for n in z.namelist()}
    carried = {n[: -len(".py")].replace("/", ".").removesuffix(".__init__") for n in inside}
    for name, source in inside.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom | ast.Import):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert module in carried or module.split(".")[0] in sys.stdlib_module_names, (name, module)
    packages = [n for n in inside if n.endswith("__init__.py")]
    assert len(packages) == 6 and not any(inside[n] for n in packages), packages


def test_a_module_the_node_cannot_import_fails_the_build(tmp_path: Path) -> None:
    fake = tmp_path / "node"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text(f"from {build.PACKAGE}.node import tools\nimport yaml\n")
    (fake / "tools.py").write_text("import os\n")
    with pytest.raises(build.BuildError, match=r"cli\.py imports yaml: the node runs rdma-node-check with the stdlib"):
        build.modules(root=tmp_path)
    (fake / "cli.py").write_text(f"from {build.PACKAGE}.node.gone import run\n")
    with pytest.raises(build.BuildError, match=r"node\.gone: no such module"):
        build.files(root=tmp_path)
    (fake / "cli.py").write_text("from . import tools\n")
    with pytest.raises(build.BuildError, match="relative import"):
        build.modules(root=tmp_path)


def test_the_same_files_give_the_same_bytes(command: Path, tmp_path: Path) -> None:
    """A second build (another directory, another process's turn) is byte for byte the first: the copy task of the
    role then reports no change."""
    data = command.read_bytes()
    assert data.startswith(b"#!/usr/bin/python3\n") and command.stat().st_mode & 0o777 == 0o755
    again = build.build(tmp_path)
    assert again.name == command.name and again.read_bytes() == data
    before = again.stat().st_mtime_ns
    time.sleep(0.01)
    assert build.build(tmp_path) == again and again.stat().st_mtime_ns == before  # not rewritten
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {(i.date_time, i.compress_type, i.external_attr >> 16) for i in infos} == {
        (build.EPOCH, zipfile.ZIP_STORED, 0o100644)
    }
    assert infos[0].filename == "__main__.py" and build.MAIN.encode() in data


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3 (the shebang) on this machine")
def test_the_built_file_runs_by_its_shebang_without_the_collection(command: Path, tmp_path: Path) -> None:
    """As a scheduler runs it: the file itself, no PYTHONPATH, in a directory with nothing else."""
    usage = subprocess.run([command, "--help"], env={"COLUMNS": "100"}, cwd=tmp_path, capture_output=True, text=True)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: rdma-node-check [-h] [--config CONFIG]"), usage
    (tmp_path / "tools").mkdir()
    cfg, root = write_config(tmp_path, host="n1"), lab_root(tmp_path)
    brief = subprocess.run([command, "--config", cfg, "--root", root, "--state-dir", "", "--brief"], env=env(tmp_path),
                           cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert (brief.returncode, brief.stdout, brief.stderr) == (0, "pass: 2 checks passed, 18 skipped\n", "")
    # Its modules are the zip's, not the checkout's.
    where = alone("-c", f"import sys; sys.path[:0] = [{str(command)!r}]; import {build.ENTRY} as m; print(m.__file__)",
                  base=tmp_path)  # fmt: skip
    assert where.stdout.decode().strip() == f"{command}/{build.ENTRY.replace('.', '/')}.py", where


def in_process(argv: list[str], base: Path, monkeypatch, capsys) -> tuple[bytes, bytes, int]:
    """main() in this process with the clock at NOW and the case's environment, as the subprocess has them."""
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: NOW)
        for key, value in env(base).items():
            m.setenv(key, value)
        m.chdir(base)
        time.tzset()
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse: --help, usage errors
            rc = exc.code
    time.tzset()
    out = capsys.readouterr()
    return out.out.encode(), out.err.encode(), rc


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_built_command_prints_what_the_library_prints(case, command: Path, tmp_path: Path, monkeypatch, capsys):
    """Every recorded case through the zipapp (subprocess, stdlib alone) and through main() here: byte for byte the
    same stdout, stderr and exit status at every step, on the same paths (the tree is laid out again between)."""
    base = tmp_path / case
    runs = {}
    for how in ("zipapp", "library"):
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir()
        got = []
        for step in CASES[case](base):
            if callable(step):
                step()
            elif how == "zipapp":
                proc = alone("-c", FROZEN, command, *step, base=base)
                got.append((proc.stdout, proc.stderr, proc.returncode))
            else:
                got.append(in_process(step, base, monkeypatch, capsys))
        runs[how] = got
    assert runs["zipapp"] == runs["library"]
    assert all(b"Traceback" not in err for _, err, _ in runs["zipapp"]), runs["zipapp"]
    if case == "errors":  # --help, then only exit 3 (0 as a Prolog: the job may start)
        assert [rc for *_, rc in runs["zipapp"]] == [0, 3, 0, 3, 3, 3, 3, 3]
    if case == "lab":
        assert runs["zipapp"][1] == (b"pass: 2 checks passed, 18 skipped\n", b"", 0)
    if case == "h100_roce":
        assert runs["zipapp"][1][0] == b"fail: lo: no RDMA port is bound to lo (devices: mlx5_0, mlx5_bond_0)\n"
        assert runs["zipapp"][2][0].startswith(b"fail: mlx5_0 port 1: link_downed +1 (since 2025-11-17T08:06:40Z)")
