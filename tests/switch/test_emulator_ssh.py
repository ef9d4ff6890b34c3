"""lab.nxos_emu over real SSH: prompt framing, auth, concurrent sessions, process lifecycle."""

from __future__ import annotations

import subprocess
import sys
import threading

import paramiko
import pytest

from tests.conftest import ROOT
from tests.switch.conftest import EMU_PASSWORD, EMU_USER, ShellClient

pytestmark = pytest.mark.switch


def test_prompt_follows_a_newline_and_commands_are_echoed(emulator):
    """network_cli only matches a prompt that comes after \\r or \\n (lab-notes §4)."""
    client = ShellClient(emulator.port)
    try:
        assert client.banner.startswith("Cisco Nexus Operating System (NX-OS) Software\r\n")
        assert client.banner.endswith("\r\nlab-switch# ")
        out = client.send("show hostname")
        assert out == "show hostname\r\nlab-switch\r\nlab-switch# "
        out = client.send("configure terminal")
        assert out.endswith("\r\nlab-switch(config)# ")
        out = client.send("interface Ethernet1/1")
        assert out.endswith("\r\nlab-switch(config-if)# ")
        out = client.send("mtu 9215")
        marker = out.splitlines()[1]
        # The marker sits under the bad token, counted from the start of the prompt line.
        assert marker.index("^") == len("lab-switch(config-if)# mtu ")
        assert client.send("end").endswith("\r\nlab-switch# ")
    finally:
        client.close()


def test_wrong_password_and_exec_requests_are_refused(emulator):
    with pytest.raises(paramiko.AuthenticationException):
        ShellClient(emulator.port, password="wrong")
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(
        "127.0.0.1",
        port=emulator.port,
        username=EMU_USER,
        password=EMU_PASSWORD,
        look_for_keys=False,
        allow_agent=False,
    )
    try:
        with pytest.raises(paramiko.SSHException):
            client.exec_command("show version")
    finally:
        client.close()


def test_concurrent_sessions_share_one_config(emulator):
    clients = [ShellClient(emulator.port) for _ in range(4)]
    try:

        def configure(client: ShellClient, port: int) -> None:
            client.send("configure terminal")
            client.send(f"interface Ethernet1/{port}")
            client.send("mtu 9216")
            client.send(f"description rank {port}")
            client.send("end")

        threads = [threading.Thread(target=configure, args=(c, i + 1)) for i, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        running = clients[0].send("show running-config | include description")
        for port in range(1, 5):
            assert f"description rank {port}" in running
        # A rollback by one session while another sits in a sub-mode of a block it removes.
        clients[0].send("checkpoint BEFORE")
        clients[1].send("configure terminal")
        clients[1].send("class-map type qos match-all TMP")
        clients[0].send("rollback running-config checkpoint BEFORE")
        out = clients[1].send("match dscp 10")
        assert out.endswith("\r\nlab-switch(config)# ") or "Invalid" in out
        assert "TMP" not in emulator.running()
    finally:
        for client in clients:
            client.close()


def test_refuses_to_listen_beyond_loopback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "lab.nxos_emu", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0
    assert "loopback" in proc.stderr


def test_sigterm_stops_it_and_removes_the_pid_and_port_files(emulator):
    assert (emulator.workdir / "pid").read_text().strip() == str(emulator.proc.pid)
    emulator.stop()
    assert emulator.proc.returncode == 0
    assert not (emulator.workdir / "pid").exists()
    assert not (emulator.workdir / "port").exists()
