"""The command rdma-llm-metrics (monitoring/cli.py): its config and the one-line refusal of a bad one (exit 2), one
file per collector written by rename so a failing collector leaves the others' files alone (exit 1, the failure on
stderr), the collectors' own status file, the loop without --once; and the command as a node gets it, the zipapp
(node/build.py), run alone on a fake tree with tools that print the recordings (tests/fixtures/monitoring/README.md)."""

from __future__ import annotations

import ast
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import cli, collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import build
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import RESULT_FILE

from tests.unit.plugins.module_utils.monitoring.monitoring_helpers import FIX, fixture, names, parse, series, value
from tests.unit.plugins.module_utils.monitoring.test_collect import BOOT, NODES, NOW, SMI, SQUEUE, UNREACHABLE, records
from tests.unit.plugins.module_utils.monitoring.test_slurm import SDIAG
from tests.unit.plugins.module_utils.monitoring.test_training import start, train
from tests.unit.plugins.module_utils.node.helpers import FakeTools, fake_root, net, prints, tool, write

CONFIG = json.loads(fixture("monitoring/metrics.json"))
TEXTFILES = "var/lib/prometheus/node-exporter"
ETHTOOL = fixture("node_check/ethtool_mlx5_pfc_prio3.txt")
OUTPUTS = {"nvidia-smi -q": SMI, "ethtool -S": ETHTOOL, "scontrol show": NODES, "squeue --noheader": SQUEUE,
           "sdiag": SDIAG}  # fmt: skip
FILES = {f"rdma_llm_{n}.prom" for n in collect.COLLECTORS} | {cli.STATUS_FILE}


def tree(base: Path, now: float = NOW) -> Path:
    """A node with every collector's input: the H100's RDMA ports, ib0, the node check's kept result (the H200
    recording), one training run of this host that wrote 10 s before `now`, node_exporter's textfile directory."""
    root = fake_root(base, boot=BOOT)
    net(root, "ib0", mtu="4092")
    result = json.loads(fixture("node_check/node_check_gpu_h200.json"))
    write(root / "var/lib/rdma-llm" / RESULT_FILE, json.dumps(result) + "\n")
    run = root / "var/lib/rdma-llm/runs/run1/out/metrics.jsonl"
    write(run, records(start(now - 100, 0, "lab-node1"), train(now - 10, 0, 10, 9.5)))
    os.utime(run, (now - 10, now - 10))
    (root / TEXTFILES).mkdir(parents=True)
    return root


def config_file(base: Path, **changes) -> str:
    path = base / "metrics.json"
    path.write_text(json.dumps({**CONFIG, **changes}))
    return str(path)


def ticks():
    """The command's clock: NOW, then a quarter second more at each reading."""
    count = itertools.count()
    return lambda: NOW + 0.25 * next(count)


def files(root: Path) -> dict:
    return {p.name: p.read_text() for p in (root / TEXTFILES).iterdir()}


def once(base: Path, root: Path, outputs: dict, capsys, **changes) -> tuple[int, str]:
    argv = ["--config", config_file(base, **changes), "--root", str(root), "--once"]
    rc = cli.main(argv, run=FakeTools(outputs).run, clock=ticks())
    return rc, capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- config
def test_the_config_with_its_defaults() -> None:
    assert cli.resolve(CONFIG) == {
        "textfile_dir": "/var/lib/prometheus/node-exporter",
        "timeout_s": 5,
        "interval_s": 60,
        "collectors": {
            "node_health": {"state_dir": "/var/lib/rdma-llm"},
            "rdma": {"interfaces": ["ib0"]},
            "gpu": {},
            "slurm": {},
            "training": {"runs_dir": "/var/lib/rdma-llm/runs", "recent_s": 3600, "hostname": "lab-node1"},
        },
    }
    least = cli.resolve({"textfile_dir": "/t", "collectors": {"rdma": {}, "training": {"runs_dir": "/r"}}})
    assert (least["timeout_s"], least["interval_s"]) == (30, 60)  # the launch's SCONTROL_TIMEOUT; 1m
    assert least["collectors"] == {"rdma": {"interfaces": []},
                                   "training": {"runs_dir": "/r", "recent_s": 3600, "hostname": ""}}  # fmt: skip
    assert tuple(cli.OPTIONS) == tuple(collect.COLLECTORS) == tuple(collect.FALLBACK)


def collectors(**changes) -> dict:
    return {"collectors": {**CONFIG["collectors"], **changes}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"textfile": "/t"}, "unknown key textfile (known: textfile_dir, timeout_s, interval_s, collectors)"),
        ({"textfile_dir": None}, "textfile_dir is required"),
        ({"textfile_dir": "var/lib"}, 'textfile_dir must be an absolute path, got "var/lib"'),
        ({"timeout_s": 0}, "timeout_s must be a number > 0, got 0"),
        ({"timeout_s": True}, "timeout_s must be a number > 0, got true"),
        ({"interval_s": "60"}, 'interval_s must be a number > 0, got "60"'),
        ({"collectors": ["gpu"]}, 'collectors must be a JSON object of collector: options, got ["gpu"]'),
        (collectors(switch={}), "unknown collector switch (known: node_health, rdma, gpu, slurm, training)"),
        (collectors(gpu=True), "collectors.gpu must be a JSON object, got true"),
        (collectors(gpu={"_note": 1}), "unknown key collectors.gpu._note (known: none)"),
        (collectors(node_health={}), "collectors.node_health.state_dir is required"),
        (collectors(rdma={"interfaces": "ib0"}),
         'collectors.rdma.interfaces must be a list of network interface names, got "ib0"'),
        (collectors(rdma={"interfaces": ["ib/0"]}),
         'collectors.rdma.interfaces must be a list of network interface names, got ["ib/0"]'),
        (collectors(rdma={"interfaces": ["a" * 16]}),
         f'collectors.rdma.interfaces must be a list of network interface names, got ["{"a" * 16}"]'),
        (collectors(training={"runs_dir": "/r", "recent_s": -1}),
         "collectors.training.recent_s must be a number >= 0, got -1"),
        (collectors(training={"runs_dir": "/r", "hostname": 7}),
         "collectors.training.hostname must be a string, got 7"),
    ],
)  # fmt: skip
def test_a_config_it_cannot_use_is_refused_in_one_line(change: dict, message: str, tmp_path: Path, capsys) -> None:
    config = {k: v for k, v in {**CONFIG, **change}.items() if v is not None}
    with pytest.raises(cli.ConfigError) as exc:
        cli.resolve(config)
    assert str(exc.value) == message
    root = tree(tmp_path)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    assert cli.main(["--config", str(path), "--root", str(root), "--once"], run=FakeTools(OUTPUTS).run) == 2
    assert capsys.readouterr().err == f"rdma-llm-metrics: config {path}: {message}\n"
    assert files(root) == {}  # nothing written


def test_the_edges_of_the_config(tmp_path: Path, capsys) -> None:
    """`_` keys are comments at the top only; 0 s is a valid recent_s (running runs only); a file that is no
    JSON or not there, and a command line it cannot use, are exit 2 with one line."""
    assert cli.resolve({"_managed": "x", "textfile_dir": "/t", "collectors": {}})["collectors"] == {}
    assert cli.resolve(collectors(training={"runs_dir": "/r", "recent_s": 0}) | {"textfile_dir": "/t"})
    for text, said in (("{", "is not JSON: Expecting property name"), (None, "cannot read the config")):
        path = tmp_path / "m.json"
        if text is None:
            path.unlink()
        else:
            path.write_text(text)
        assert cli.main(["--config", str(path), "--once"]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1 and err.startswith("rdma-llm-metrics: "), err
    with pytest.raises(SystemExit) as exc:
        cli.main(["--onc"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


# ----------------------------------------------------------------------------------------------- the files
def test_every_collector_writes_its_file_and_its_status(tmp_path: Path, capsys) -> None:
    root = tree(tmp_path)
    rc, err = once(tmp_path, root, OUTPUTS, capsys)
    assert (rc, err) == (0, "")
    out = files(root)
    assert set(out) == FILES
    assert value(out["rdma_llm_node_health.prom"], "rdma_llm_node_check_verdict") == 0
    assert value(out["rdma_llm_rdma.prom"], "rdma_llm_nic_pfc_pause_frames_total", interface="ib0", priority=3,
                 direction="received") == 41927  # fmt: skip
    assert value(out["rdma_llm_gpu.prom"], "rdma_llm_gpu_present") == 1
    assert value(out["rdma_llm_slurm.prom"], "rdma_llm_slurm_nodes", state="idle") == 2
    assert value(out["rdma_llm_training.prom"], "rdma_llm_train_step", run_id="run1", job_id="", host="lab-node1",
                 rank=0) == 10  # fmt: skip
    status = out[cli.STATUS_FILE]
    order = list(collect.COLLECTORS)
    assert series(status, "rdma_llm_collector_success") == {(("collector", n),): 1 for n in order}
    # One clock reading before the pass, then two per collector (its start, its end): a quarter second each.
    assert series(status, "rdma_llm_collector_last_run_timestamp_seconds") == {
        (("collector", n),): NOW + 0.25 + 0.5 * i for i, n in enumerate(order)
    }
    assert set(series(status, "rdma_llm_collector_duration_seconds").values()) == {0.25}


def test_a_failing_collector_says_so_and_leaves_the_others_alone(tmp_path: Path, capsys) -> None:
    root = tree(tmp_path)
    once(tmp_path, root, OUTPUTS, capsys)
    good = files(root)
    rc, err = once(tmp_path, root, {**OUTPUTS, "scontrol show": {"rc": 1, "out": "", "err": UNREACHABLE}}, capsys)
    assert rc == 1
    assert err == f"rdma-llm-metrics: slurm: scontrol show nodes --oneliner: controller unreachable ({UNREACHABLE})\n"
    now = files(root)
    assert parse(now["rdma_llm_slurm.prom"]) == {("rdma_llm_slurm_up", ()): 0}
    assert {n: t for n, t in now.items() if n not in ("rdma_llm_slurm.prom", cli.STATUS_FILE)} == {
        n: t for n, t in good.items() if n not in ("rdma_llm_slurm.prom", cli.STATUS_FILE)
    }
    success = series(now[cli.STATUS_FILE], "rdma_llm_collector_success")
    assert {k[0][1]: v for k, v in success.items()} == {n: int(n != "slurm") for n in collect.COLLECTORS}


def test_a_collector_that_breaks_writes_its_absent_metric(tmp_path: Path, capsys, monkeypatch) -> None:
    """A fault of the collector itself (a reading no parser foresaw) is the collector's failure only: its file says
    what a failed read says (gpu: present 0), the others are written."""

    def broken(options, host):
        raise RuntimeError("an answer nobody foresaw")

    monkeypatch.setitem(collect.COLLECTORS, "gpu", broken)
    root = tree(tmp_path)
    rc, err = once(tmp_path, root, OUTPUTS, capsys)
    assert (rc, err) == (1, "rdma-llm-metrics: gpu: RuntimeError: an answer nobody foresaw\n")
    out = files(root)
    assert parse(out["rdma_llm_gpu.prom"]) == {("rdma_llm_gpu_present", ()): 0}
    assert value(out["rdma_llm_slurm.prom"], "rdma_llm_slurm_up") == 1 and set(out) == FILES
    for name, fallback in collect.FALLBACK.items():  # each one renders: a failed read never has made-up samples
        assert set(parse(fallback())) <= {("rdma_llm_gpu_present", ()), ("rdma_llm_slurm_up", ()),
                                          ("rdma_llm_node_check_verdict", ())}, name  # fmt: skip


def test_a_collector_no_longer_configured_has_its_file_removed(tmp_path: Path, capsys) -> None:
    root = tree(tmp_path)
    once(tmp_path, root, OUTPUTS, capsys)
    (root / TEXTFILES / "site.prom").write_text("# someone else's\n")
    rc, _ = once(tmp_path, root, OUTPUTS, capsys, collectors={"gpu": {}})
    assert rc == 0
    assert set(files(root)) == {"rdma_llm_gpu.prom", cli.STATUS_FILE, "site.prom"}
    assert names(files(root)[cli.STATUS_FILE]) == {
        "rdma_llm_collector_success", "rdma_llm_collector_last_run_timestamp_seconds",
        "rdma_llm_collector_duration_seconds",
    }  # fmt: skip
    assert series(files(root)[cli.STATUS_FILE], "rdma_llm_collector_success") == {(("collector", "gpu"),): 1}


def test_a_textfile_directory_that_is_not_there_fails_every_collector(tmp_path: Path, capsys) -> None:
    root = tree(tmp_path)
    shutil.rmtree(root / TEXTFILES)
    rc, err = once(tmp_path, root, OUTPUTS, capsys)
    where = root / TEXTFILES
    assert rc == 1
    assert err.splitlines() == [
        *(f"rdma-llm-metrics: {n}: cannot write {where}/rdma_llm_{n}.prom: No such file or directory"
          for n in collect.COLLECTORS),
        f"rdma-llm-metrics: metrics: cannot write {where}/{cli.STATUS_FILE}: No such file or directory",
    ]  # fmt: skip
    assert not where.exists()  # node_exporter's directory: its package makes it, not this command


def test_without_once_the_collectors_run_every_interval(tmp_path: Path, capsys) -> None:
    root = tree(tmp_path)
    slept = []

    class Stop(Exception):
        pass

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == 2:
            raise Stop

    argv = ["--config", config_file(tmp_path, interval_s=10), "--root", str(root)]
    with pytest.raises(Stop):
        cli.main(argv, run=FakeTools(OUTPUTS).run, clock=ticks(), sleep=sleep)
    # Each pass reads the clock 12 times (3 s on this clock): the rest of the interval is slept.
    assert slept == [10 - 0.25 * 11, 10 - 0.25 * 11]
    assert capsys.readouterr().err == "" and set(files(root)) == FILES


# ------------------------------------------------------------------------------------------- the zipapp
@pytest.fixture(scope="module")
def command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build.build(tmp_path_factory.mktemp("zipapp"), entry=cli.ENTRY, name=cli.NAME)


def test_the_command_is_one_file_of_the_stdlib_and_the_same_bytes_each_build(command: Path, tmp_path: Path) -> None:
    data = command.read_bytes()
    assert cli.__name__ == cli.ENTRY and command.name.startswith("rdma-llm-metrics-") and data.startswith(build.SHEBANG)
    again = build.build(tmp_path, entry=cli.ENTRY, name=cli.NAME)
    assert again.name == command.name and again.read_bytes() == data
    with zipfile.ZipFile(command) as z:
        inside = {n: z.read(n) for n in z.namelist()}
    assert inside["__main__.py"] == build.main_source(cli.ENTRY, cli.NAME).encode()
    carried = {n[: -len(".py")].replace("/", ".").removesuffix(".__init__") for n in inside}
    for name, source in inside.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom | ast.Import):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert module in carried or module.split(".")[0] in sys.stdlib_module_names, (name, module)
    # What the command reads through, and not the controller's side (the switches, the catalogue, the ladder).
    short = {n.split("module_utils.", 1)[1] for n in carried if "module_utils." in n}
    assert {"monitoring.cli", "monitoring.collect", "node.sysfs", "launch.slurm_state"} <= short
    assert not {"monitoring.switch", "monitoring.catalogue", "node.build"} & short
    assert not any(n.startswith("ladder") for n in short)


def node_tools(base: Path, sdiag: str | None = None) -> Path:
    """Tools that print the recordings (sdiag: a script of the test's instead)."""
    for name, key in (("nvidia-smi", "nvidia-smi -q"), ("ethtool", "ethtool -S"), ("scontrol", "scontrol show"),
                      ("squeue", "squeue --noheader"), ("sdiag", "sdiag")):  # fmt: skip
        prints(base, name, OUTPUTS[key])
    if sdiag is not None:
        tool(base, "sdiag", sdiag)
    return base / "tools"


def alone(command: Path, *argv, base: Path) -> subprocess.CompletedProcess:
    """The zipapp with the stdlib only (-I -S: no site-packages, no PYTHONPATH, no checkout on the path)."""
    env = {"PATH": str(base / "tools"), "LC_ALL": "C.UTF-8", "COLUMNS": "100"}
    cmd = [sys.executable, "-I", "-S", str(command), *map(str, argv)]
    return subprocess.run(cmd, env=env, cwd=base, capture_output=True, text=True, timeout=60, check=False)


def test_the_built_command_writes_the_files_on_a_fake_node(command: Path, tmp_path: Path) -> None:
    root = tree(tmp_path, now=time.time())
    node_tools(tmp_path)
    proc = alone(command, "--config", config_file(tmp_path), "--root", root, "--once", base=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc
    out = files(root)
    assert set(out) == FILES
    assert value(out["rdma_llm_gpu.prom"], "rdma_llm_gpu_memory_total_bytes", gpu=0) == 143771 * 2**20
    assert value(out["rdma_llm_slurm.prom"], "rdma_llm_slurm_jobs", state="running") == 1
    assert value(out["rdma_llm_node_health.prom"], "rdma_llm_node_check_timestamp_seconds") == 1795719443
    assert value(out["rdma_llm_rdma.prom"], "rdma_llm_rdma_hw_counter_total", device="mlx5_bond_0", port=1,
                 counter="out_of_buffer") == 0  # fmt: skip
    assert "rdma_llm_train_step" in names(out["rdma_llm_training.prom"])
    success = series(out[cli.STATUS_FILE], "rdma_llm_collector_success")
    assert set(success.values()) == {1} and len(success) == len(collect.COLLECTORS)
    assert not [p for p in (root / TEXTFILES).iterdir() if not p.name.endswith(".prom")]  # no temporary file left


def test_the_built_command_does_not_hang_on_a_hung_tool(command: Path, tmp_path: Path) -> None:
    """sdiag hangs (slurmctld's RPC stuck): the Slurm file still has the nodes and the queue, the command says
    which tool timed out and ends within the timeout."""
    root = tree(tmp_path, now=time.time())
    node_tools(tmp_path, sdiag="exec /bin/sleep 30\n")
    began = time.monotonic()
    proc = alone(command, "--config", config_file(tmp_path, timeout_s=1), "--root", root, "--once", base=tmp_path)
    assert time.monotonic() - began < 15
    assert (proc.returncode, proc.stderr) == (1, "rdma-llm-metrics: slurm: sdiag: sdiag did not finish within 1 s\n")
    slurm = files(root)["rdma_llm_slurm.prom"]
    assert value(slurm, "rdma_llm_slurm_up") == 1 and value(slurm, "rdma_llm_slurm_nodes", state="idle") == 2
    assert not {n for n in names(slurm) if "scheduler" in n}


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no /usr/bin/python3 (the shebang) here")
def test_the_built_file_runs_by_its_shebang(command: Path, tmp_path: Path) -> None:
    usage = subprocess.run([command, "--help"], env={"COLUMNS": "100"}, cwd=tmp_path, capture_output=True, text=True)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: rdma-llm-metrics [-h] [--config CONFIG]"), usage
    assert (FIX / "monitoring" / "metrics.json").is_file()


def test_a_module_the_node_cannot_import_fails_the_build_by_the_commands_name(tmp_path: Path) -> None:
    fake = tmp_path / "monitoring"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text("import prometheus_client\n")
    with pytest.raises(build.BuildError, match=r"cli\.py imports prometheus_client: the node runs rdma-llm-metrics "):
        build.build(tmp_path / "out", entry=f"{build.PACKAGE}.monitoring.cli", root=tmp_path, name=cli.NAME)
    assert not (tmp_path / "out").exists()


def py39(name: str, source: bytes) -> list:
    """What in one module would fail on a node's Python 3.9 (docs/design.md: module_utils run on the nodes with
    Python 3.9+, while ruff targets the controller's 3.11): 3.10 syntax, zip(strict=), `X | Y` evaluated at run
    time (in isinstance, or an annotation without `from __future__ import annotations`)."""
    tree = ast.parse(source, name, feature_version=(3, 9))
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body)
    out = []
    for node in ast.walk(tree):
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if call and node.func.id == "zip" and any(k.arg == "strict" for k in node.keywords):
            out.append(f"{name}:{node.lineno}: zip(strict=) is Python 3.10")
        if call and node.func.id in ("isinstance", "issubclass") and isinstance(node.args[-1], ast.BinOp):
            out.append(f"{name}:{node.lineno}: {node.func.id}(x, A | B) is Python 3.10")
        note = getattr(node, "annotation", None) or getattr(node, "returns", None)
        if not future and note is not None and any(isinstance(n, ast.BinOp) for n in ast.walk(note)):
            out.append(f"{name}:{node.lineno}: `A | B` annotation without `from __future__ import annotations`")
    return out


def test_every_module_of_the_command_runs_on_the_nodes_python_3_9(command: Path) -> None:
    with zipfile.ZipFile(command) as z:
        problems = [p for n in sorted(z.namelist()) for p in py39(n, z.read(n))]
    assert problems == []
    assert py39("m.py", b"x = zip(a, b, strict=True)\nisinstance(x, int | str)\ndef f(a: int | None): pass\n") == [
        "m.py:1: zip(strict=) is Python 3.10",
        "m.py:2: isinstance(x, A | B) is Python 3.10",
        "m.py:3: `A | B` annotation without `from __future__ import annotations`",
    ]
    with pytest.raises(SyntaxError):
        py39("m.py", b"match x:\n    case 1:\n        pass\n")
