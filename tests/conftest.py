"""Shared pytest fixtures: the project's tool environment and the lab cluster."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab import podman, vault  # noqa: E402

COLLECTION = ROOT / ".ansible" / "collections"
# The checkout as the collection rdma_llm.cluster (`make collection`): plugins import each other by that name,
# and so do the tests, from module_utils (stdlib only: ansible stays out of this process).
if not (COLLECTION / "ansible_collections" / "rdma_llm" / "cluster" / "galaxy.yml").is_file():
    raise SystemExit("tests: the collection link is missing; run `make setup` (or `make collection`) first")
sys.path.insert(0, str(COLLECTION))


def load_script(path: Path):
    """A script that ships as a file and runs as a program (a role's host-side probe, the payload's config),
    imported for its functions; plugins are imported by name instead."""
    name = f"script_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tool_env(**extra: str) -> dict[str, str]:
    """Environment for ansible/molecule subprocesses: the venv's tools, the lab's podman settings."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["ANSIBLE_COLLECTIONS_PATH"] = str(COLLECTION)
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["PY_COLORS"] = "0"
    env["NO_COLOR"] = "1"
    if shutil.which("podman"):
        env["CONTAINERS_CONF"] = str(podman.containers_conf())
    # The lab's vault (its MUNGE key, inventory/lab/group_vars/all/slurm.yml): no run prompts for it.
    env["ANSIBLE_VAULT_IDENTITY_LIST"] = vault.identity_list(env.get("ANSIBLE_VAULT_IDENTITY_LIST"))
    env.update(extra)
    return env


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """Run a command from the project root; output is kept for assertions and failure messages."""
    return subprocess.run(
        cmd,
        cwd=ROOT,
        env=kw.pop("env", None) or tool_env(),
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
        **kw,
    )


def ladder_rungs() -> list[str]:
    """The validation ladder's rungs, in order, where the role keeps them (roles/cluster_validate/vars/main.yml)."""
    import yaml

    return yaml.safe_load((ROOT / "roles" / "cluster_validate" / "vars" / "main.yml").read_text())[
        "__cluster_validate_rung_names"
    ]


def tail(proc: subprocess.CompletedProcess, n: int = 6000) -> str:
    return (proc.stdout or "")[-n:] + "\n--- stderr ---\n" + (proc.stderr or "")[-n // 2 :]


@pytest.fixture(scope="session")
def lab_image() -> str:
    """The lab host image, built once (cached) for Molecule and the lab."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run `make setup` first")
    from lab.image import ensure_image

    return ensure_image()


RECAP_RE = (
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)"
)


def play_recap(output: str) -> dict[str, dict[str, int]]:
    """Parse ansible-playbook's PLAY RECAP into {host: {ok, changed, unreachable, failed}}."""
    import re

    recap = output.rsplit("PLAY RECAP", 1)[-1]
    return {
        m["host"]: {k: int(m[k]) for k in ("ok", "changed", "unreachable", "failed")}
        for m in re.finditer(RECAP_RE, recap, re.M)
    }


def changed_tasks(output: str, host: str) -> list[str]:
    """The tasks ansible-playbook's default output shows as `changed` on `host`, in order, each once."""
    import re

    out, task = [], ""
    for line in output.splitlines():
        head = re.match(r"^TASK \[(.*)\] \**$", line)
        if head:
            task = head[1]
        elif re.match(rf"^changed: \[{re.escape(host)}(\]| -> )", line) and task not in out:
            out.append(task)
    return out


def playbook(
    *args: str, timeout: float = 1800, inventory: str | Path | None = None, **env: str
) -> subprocess.CompletedProcess:
    inv = str(inventory or ROOT / "inventory" / "lab")
    return run(["ansible-playbook", "-i", inv, *args], timeout=timeout, env=tool_env(**env))


@pytest.fixture(scope="session")
def lab_cluster(lab_image):
    """A fresh 2-host lab for the session; torn down at the end even when tests fail. `fresh` is the snapshot of what
    the project touches on it before any playbook ran (tests/lab_state.py): reset.yml must give it back."""
    from lab import cluster
    from tests import lab_state

    cluster.down()  # stale containers of an earlier, crashed run
    try:
        state = cluster.up(2)
        state["fresh"] = lab_state.snapshot(state["hosts"])
        yield state
    finally:
        cluster.down()


# -- Molecule beside the lab (tests/molecule_queue.py) ------------------------------------------------------
_molecule_queue: dict = {}


# Molecule's own scenario tests: the host roles' (tests/test_molecule.py) and the switch role's.
MOLECULE_TESTS = {"test_molecule_scenario": None, "test_molecule_nxos_roce_qos": "nxos_roce_qos"}


def pytest_collection_modifyitems(session, config, items) -> None:
    from tests import lanes

    # The xdist scheduler knows a lab test by its module's name (tests/lanes.py): it must agree with the marker.
    wrong = [item.nodeid for item in items if bool(item.get_closest_marker("lab")) != lanes.is_lab(item.nodeid)]
    if wrong:
        raise pytest.UsageError(f"the `lab` marker and a test_lab_<N> module go together: {', '.join(wrong)}")
    # The lab's tests first (in their order): they mostly wait, and the rest runs beside them (`-n 2`, one lane
    # each) or after them. The tests that wait for the Molecule queue come last, so the queue has the longest start.
    items.sort(key=lambda item: 0 if lanes.is_lab(item.nodeid) else 2 if _scenario(item) else 1)


def _scenario(item) -> str | None:
    name = getattr(item, "originalname", "")
    if name in MOLECULE_TESTS:
        return MOLECULE_TESTS[name] or item.callspec.params["scenario"]
    return None


_config: dict = {}


def pytest_configure(config) -> None:
    from tests.lanes import yield_to_the_lab

    _config["config"] = config
    yield_to_the_lab(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from tests.lanes import LaneScheduling

    return LaneScheduling(config, log)


def pytest_collection_finish(session) -> None:
    from tests.lanes import runs_the_rest

    scenarios = [scenario for scenario in map(_scenario, session.items) if scenario]
    # Under xdist every worker collects everything; the queue lives in the one that runs the scenarios' tests.
    if not scenarios or session.config.option.collectonly or not runs_the_rest(session.config):
        return
    from lab.image import ensure_image
    from tests import lanes
    from tests.molecule_queue import MoleculeQueue

    # Two lanes: the queue's containers install what the lab's hosts install; it starts after the lab's first
    # converge (when that test is in the run), so the two do not share the machine's disk and cores then.
    signal = lanes.converge_signal(session.config, ROOT)
    if signal is not None and lanes.CONVERGE_TEST not in {item.nodeid for item in session.items}:
        signal = None
    _molecule_queue["signal"] = signal

    def before() -> None:
        ensure_image(log=lambda *_: None)
        lanes.wait_for(signal)

    # In the order their tests wait for them (after the lab's tests: the switch's, then the host roles').
    # The queue runs in the rest's lane, below the lab's in CPU (tests/lanes.py): a `podman exec` into an instance
    # can take longer than Ansible's 10 s connection timeout while the lab trains (seen: "Connection timed out").
    _molecule_queue["queue"] = MoleculeQueue(scenarios, ROOT, tool_env(ANSIBLE_TIMEOUT="60"), before=before).start()


def pytest_runtest_logfinish(nodeid, location) -> None:
    from tests import lanes

    # The lab's lane: its first converge is over (passed or not), the queue beside it may start.
    signal = lanes.converge_signal(_config["config"], ROOT) if nodeid == lanes.CONVERGE_TEST else None
    if signal is not None:
        signal.parent.mkdir(parents=True, exist_ok=True)
        signal.touch()


def pytest_sessionfinish(session, exitstatus) -> None:
    queue = _molecule_queue.pop("queue", None)
    if queue is not None:
        queue.stop()
    signal = _molecule_queue.pop("signal", None)
    if signal is not None:
        signal.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def molecule_queue():
    """The queue started at collection (every selected scenario, in the background)."""
    if "queue" not in _molecule_queue:
        pytest.fail("the Molecule queue was not started at collection")
    return _molecule_queue["queue"]
