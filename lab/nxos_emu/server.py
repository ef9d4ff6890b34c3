"""SSH front end: paramiko's server API, password auth, one interactive shell per channel.

network_cli (libssh or paramiko) opens a pty + shell and types each command followed by `\\r`; it finds
the end of the output by the prompt, which must come right after `\\r\\n` (lab-notes §4). Exec
requests (`ssh switch show version`) are refused, as the cisco.nxos plugins never use them.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import socket
import threading
from pathlib import Path

import paramiko

from .device import Device, Session

LOG = logging.getLogger("nxos_emu")
BANNER = (
    "Cisco Nexus Operating System (NX-OS) Software\r\n"
    "TAC support: http://www.cisco.com/tac\r\n"
    "(lab.nxos_emu: an emulated NX-OS CLI for tests and the lab)\r\n"
)


def check_loopback(host: str) -> str:
    """Only loopback addresses: the emulator has fixed lab credentials."""
    if host == "localhost":
        return "127.0.0.1"
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"refusing to listen on {host}: the emulator binds loopback addresses only")
    return host


def load_host_key(path: Path | None) -> paramiko.PKey:
    if path is not None and path.exists():
        return paramiko.RSAKey.from_private_key_file(str(path))
    key = paramiko.RSAKey.generate(2048)
    if path is not None:
        key.write_private_key_file(str(path))
        path.chmod(0o600)
    return key


class _Auth(paramiko.ServerInterface):
    def __init__(self, username: str, password: str):
        self.username = username
        self.password = password
        self.shell = threading.Event()

    def check_channel_request(self, kind, chanid):
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def get_allowed_auths(self, username):
        return "password"

    def check_auth_password(self, username, password):
        ok = hmac.compare_digest(username.encode(), self.username.encode()) and hmac.compare_digest(
            password.encode(), self.password.encode()
        )
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_pty_request(self, channel, term, width, height, pixelwidth, pixelheight, modes):
        return True

    def check_channel_window_change_request(self, channel, width, height, pixelwidth, pixelheight):
        return True

    def check_channel_env_request(self, channel, name, value):
        return True

    def check_channel_shell_request(self, channel):
        self.shell.set()
        return True

    def check_channel_exec_request(self, channel, command):
        return False


class EmulatorServer:
    """Listens on a loopback port; every SSH connection gets its own `Session` on the shared device."""

    def __init__(self, device: Device, host: str, port: int, username: str, password: str, host_key: paramiko.PKey):
        self.device = device
        self.host = check_loopback(host)
        self.username = username
        self.password = password
        self.host_key = host_key
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((self.host, port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stopping = threading.Event()

    def serve_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                client, addr = self.sock.accept()
            except OSError:
                break
            threading.Thread(target=self._client, args=(client, addr), daemon=True).start()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    # -- one connection ------------------------------------------------------------------------
    def _client(self, client: socket.socket, addr) -> None:
        # Echo, output and prompt are small writes answered by small writes: without NODELAY, Nagle's
        # algorithm meets the client's delayed ACK and every command waits ~40 ms.
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = paramiko.Transport(client)
        transport.add_server_key(self.host_key)
        auth = _Auth(self.username, self.password)
        try:
            transport.start_server(server=auth)
            channel = transport.accept(30)
            if channel is None or not auth.shell.wait(10):
                return
            session = self.device.new_session()
            LOG.info("session %d opened from %s:%s (%s)", session.number, *addr[:2], transport.remote_version)
            try:
                self._shell(channel, session)
            finally:
                self.device.flush()  # a session that ended in config mode
            LOG.info("session %d closed", session.number)
        except (EOFError, OSError, paramiko.SSHException) as exc:
            LOG.info("connection from %s ended: %s", addr[0], exc)
        finally:
            transport.close()

    @staticmethod
    def _send(channel: paramiko.Channel, text: str) -> None:
        channel.sendall(text.encode("utf-8"))

    def _shell(self, channel: paramiko.Channel, session: Session) -> None:
        self._send(channel, BANNER + "\r\n" + session.prompt)
        line = ""
        last_cr = False
        escape = False
        echo = ""  # typed characters are echoed once per received chunk, not one packet each
        while not session.closed:
            if echo:
                self._send(channel, echo)
                echo = ""
            data = channel.recv(4096)
            if not data:
                return
            for ch in data.decode("utf-8", "replace"):
                if escape:  # skip ANSI escape sequences (arrow keys) up to their final letter
                    escape = not ch.isalpha() and ch != "~"
                    continue
                if ch == "\n" and last_cr:
                    last_cr = False
                    continue
                last_cr = ch == "\r"
                if ch in "\r\n":
                    prompt = session.prompt
                    out = session.handle(line)
                    line = ""
                    text = echo + "\r\n"
                    text += "".join((" " * len(prompt) + o if o.strip() == "^" else o) + "\r\n" for o in out)
                    echo = ""
                    if session.closed:
                        self._send(channel, text)
                        channel.close()
                        return
                    self._send(channel, text + session.prompt)
                elif ch in "\x7f\x08":
                    if line:
                        line = line[:-1]
                        echo += "\b \b"
                elif ch == "\x03":  # Ctrl-C: drop the line
                    line = ""
                    self._send(channel, echo + "^C\r\n" + session.prompt)
                    echo = ""
                elif ch == "\x1a":  # Ctrl-Z: back to exec
                    line = ""
                    if session.mode_keys is not None:
                        session.handle("end")
                    self._send(channel, echo + "^Z\r\n" + session.prompt)
                    echo = ""
                elif ch == "\x04" and not line and session.mode_keys is None:
                    self._send(channel, echo)
                    channel.close()
                    return
                elif ch == "\x1b":
                    escape = True
                elif ch >= " " and ch not in "?\t":
                    line += ch
                    echo += ch
