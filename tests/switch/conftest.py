"""Fixtures for the switch tests: a fresh lab.nxos_emu per test and real ansible-playbook runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
import pytest

from lab import cluster
from lab.cluster import switch_inventory
from tests.conftest import ROOT, tool_env

# The lab credentials (inventory/lab/group_vars/switches/main.yml): the tests use the lab group_vars.
EMU_USER = "admin"
EMU_PASSWORD = "rdma-lab"
FIXTURES = ROOT / "tests" / "fixtures" / "nxos"
FIELD_CONFIG = FIXTURES / "field-running-config.txt"
PROMPT_RE = re.compile(r"\r\n[A-Za-z0-9][\w.-]*(\([\w-]+\))?# $")


@dataclass
class Emulator:
    """A running emulator process; stopped by its PID in the fixture finalizer."""

    proc: subprocess.Popen
    port: int
    workdir: Path

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    @property
    def log_file(self) -> Path:
        return self.workdir / "commands.jsonl"

    def state(self) -> dict:
        return json.loads(self.state_file.read_text())

    def running(self) -> str:
        return self.state()["running"]

    def startup(self) -> str:
        return self.state()["startup"]

    def log(self) -> list[dict]:
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text().splitlines() if line.strip()]

    def config_commands(self, since: int = 0) -> list[dict]:
        """Entries from `since` that were typed in a config mode, or entered one."""
        return [e for e in self.log()[since:] if e["mode"] != "exec" or e["line"].split()[0] in ("configure", "conf")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


@pytest.fixture(scope="session")
def host_key(tmp_path_factory) -> Path:
    """One RSA host key for every emulator of the run (generating one costs ~0.5 s)."""
    path = tmp_path_factory.mktemp("nxos_key") / "host_key"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(path))
    return path


@pytest.fixture
def start_emulator(tmp_path, host_key):
    """Factory: start a fresh emulator on a random loopback port; all are stopped by PID at teardown."""
    started: list[Emulator] = []

    def start(
        startup_config: Path | None = None,
        hostname: str = "lab-switch",
        name: str = "emu",
        extra: list[str] | None = None,
    ) -> Emulator:
        workdir = tmp_path / name
        workdir.mkdir()
        cmd = [
            *cluster.emulator_cmd(workdir, hostname, EMU_USER, EMU_PASSWORD),
            "--command-log",
            str(workdir / "commands.jsonl"),
            "--host-key",
            str(host_key),
            *(extra or []),
        ]
        if startup_config is not None:
            cmd += ["--startup-config", str(startup_config)]
        stderr = (workdir / "stderr.log").open("w")
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 20
        while not (workdir / "port").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"emulator did not start: {(workdir / 'stderr.log').read_text()}")
            time.sleep(0.05)
        emu = Emulator(proc=proc, port=int((workdir / "port").read_text()), workdir=workdir)
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()


@pytest.fixture
def emulator(start_emulator) -> Emulator:
    return start_emulator()


# -- Molecule ---------------------------------------------------------------------------------------------
# `molecule test -s nxos_roce_qos` runs in the session's Molecule queue (tests/molecule_queue.py), first, so its
# result is there by the time this test waits for it.
@pytest.fixture
def molecule_result(molecule_queue):
    """(returncode, output) of `molecule test -s nxos_roce_qos`."""
    result = molecule_queue.result("nxos_roce_qos")
    return result.returncode, result.output


# -- ansible-playbook ---------------------------------------------------------------------------------
@dataclass
class PlaybookRun:
    proc: subprocess.CompletedProcess
    data: dict = field(default_factory=dict)

    @property
    def rc(self) -> int:
        return self.proc.returncode

    def stats(self, host: str) -> dict:
        return self.data.get("stats", {}).get(host, {})

    def results(self, host: str) -> list[tuple[str, dict]]:
        """(task name, result) for every task that ran on host, in order."""
        out = []
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                if host in task.get("hosts", {}):
                    name = task["task"]["name"].removeprefix("rdma_llm.cluster.nxos_roce_qos : ")
                    out.append((name, task["hosts"][host]))
        return out

    def result(self, host: str, name_part: str) -> dict:
        hits = [r for name, r in self.results(host) if name_part in name]
        assert hits, f"no task matching {name_part!r} ran on {host}"
        return hits[-1]

    def fact(self, host: str, name: str):
        for _, res in reversed(self.results(host)):
            facts = res.get("ansible_facts", {})
            if name in facts:
                return facts[name]
        raise KeyError(name)

    def explain(self) -> str:
        return (self.proc.stdout or "")[-8000:] + "\n--- stderr ---\n" + (self.proc.stderr or "")[-4000:]


def run_playbook(
    inventory: Path,
    *args: str,
    extra_vars: dict | None = None,
    playbook: str = "playbooks/switch.yml",
    timeout: float = 240,
    env: dict | None = None,
) -> PlaybookRun:
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), playbook, *args]
    # The configs the role keeps before its first apply go to the test's own directory, never to the checkout's
    # artifacts/ (where the lab's switch, also lab-switch, keeps its own).
    extra_vars = dict(extra_vars or {})
    if "nxos_roce_qos_baseline_dir" not in extra_vars:
        inside = Path(inventory).resolve().is_relative_to(ROOT)
        extra_vars["nxos_roce_qos_baseline_dir"] = (
            tempfile.mkdtemp(prefix="nxos_baseline_") if inside else str(Path(inventory).parent / "nxos_baseline")
        )
    cmd += ["-e", json.dumps(extra_vars)]
    env = tool_env(
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json",
        ANSIBLE_DEPRECATION_WARNINGS="False",
        **(env or {}),
    )
    proc = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, timeout=timeout, check=False)
    try:
        data = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{\n") :])[0]
    except ValueError:
        data = {}
    return PlaybookRun(proc=proc, data=data)


@pytest.fixture
def switch_run(tmp_path):
    """Run playbooks/switch.yml against an emulator as host `lab-switch` (the lab's host name)."""

    def run(emu: Emulator, *args: str, extra_vars: dict | None = None, env: dict | None = None) -> PlaybookRun:
        inventory = switch_inventory(
            tmp_path / "inventory", {"lab-switch": {"ansible_host": "127.0.0.1", "ansible_port": emu.port}}
        )
        merged = {"nxos_roce_qos_render_dir": str(tmp_path / "render"), **(extra_vars or {})}
        return run_playbook(inventory, *args, extra_vars=merged, env=env)

    return run


# -- a plain SSH client for the emulator tests --------------------------------------------------------
class ShellClient:
    """Interactive shell over paramiko, reading until the NX-OS prompt like network_cli does."""

    def __init__(self, port: int, user: str = EMU_USER, password: str = EMU_PASSWORD):
        self.client = paramiko.SSHClient()
        self.client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        self.client.connect(
            "127.0.0.1", port=port, username=user, password=password, look_for_keys=False, allow_agent=False, timeout=10
        )
        self.chan = self.client.invoke_shell(term="vt100", width=511)
        self.chan.settimeout(10)
        self.banner = self.read_until_prompt()

    def read_until_prompt(self) -> str:
        buf = ""
        while not PROMPT_RE.search(buf):
            chunk = self.chan.recv(65536).decode()
            if not chunk:
                raise EOFError(buf)
            buf += chunk
        return buf

    def send(self, line: str) -> str:
        self.chan.send(line + "\r")
        return self.read_until_prompt()

    def close(self) -> None:
        self.client.close()
