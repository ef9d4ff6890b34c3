"""Run the emulator: `python -m lab.nxos_emu --port 0 --port-file F ...` (loopback only).

Prints the bound port on stdout (one line) and writes it to --port-file once the server listens.
SIGTERM/SIGINT stop it and remove the port and PID files.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
from pathlib import Path

from .device import Device, DeviceInfo
from .server import EmulatorServer, check_loopback, load_host_key


def _write(path: Path | None, text: str) -> None:
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {exc}") from exc
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lab.nxos_emu", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port, 0 = a free random port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here")
    parser.add_argument("--pid-file", type=Path, help="write the process id here")
    parser.add_argument(
        "--state-file",
        type=Path,
        help="persist running/startup config, checkpoints and files here (JSON); loaded at start when it exists",
    )
    parser.add_argument(
        "--command-log", type=Path, help="append every received line as JSON (default: <state-file>.commands.jsonl)"
    )
    parser.add_argument(
        "--counters-file",
        type=Path,
        help="JSON counters added to the emulator's own at every show (default: counters.json beside the state file)",
    )
    parser.add_argument(
        "--lldp-file",
        type=Path,
        help="JSON of what is cabled to each port, served by `show lldp neighbors detail` (default: lldp.json beside "
        "the state file)",
    )
    parser.add_argument(
        "--unsupported",
        action="append",
        default=[],
        metavar="COMMAND",
        help="an exec command this switch lacks (e.g. 'show interface priority-flow-control'); repeatable",
    )
    parser.add_argument(
        "--reject-config",
        action="append",
        type=_regex,
        default=[],
        metavar="REGEX",
        help="refuse every config line that matches REGEX (whole line) with an ERROR, as a switch refuses a "
        "line it cannot apply; repeatable",
    )
    parser.add_argument("--startup-config", type=Path, help="config text to boot with (no state file yet)")
    parser.add_argument("--host-key", type=Path, help="RSA host key; generated (and saved here) if missing")
    parser.add_argument("--hostname", default="switch")
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password", default="admin")
    parser.add_argument("--model", default=DeviceInfo.model, help="PID, e.g. N9K-C93180YC-FX")
    parser.add_argument("--chassis", default=DeviceInfo.chassis)
    parser.add_argument("--nxos-version", default=DeviceInfo.version)
    parser.add_argument(
        "--ports",
        type=int,
        default=DeviceInfo.ethernet_ports,
        help="number of front ports Ethernet1/1..1/N (default 8)",
    )
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="nxos_emu %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    command_log = args.command_log
    if command_log is None and args.state_file is not None:
        command_log = args.state_file.with_name(args.state_file.name + ".commands.jsonl")
    info = DeviceInfo(
        hostname=args.hostname,
        model=args.model,
        chassis=args.chassis,
        version=args.nxos_version,
        ethernet_ports=args.ports,
    )
    try:
        host = check_loopback(args.host)
    except ValueError as exc:
        print(f"nxos_emu: {exc}", file=sys.stderr)
        return 2
    counters_file = args.counters_file
    if counters_file is None and args.state_file:
        counters_file = args.state_file.with_name("counters.json")
    lldp_file = args.lldp_file
    if lldp_file is None and args.state_file:
        lldp_file = args.state_file.with_name("lldp.json")
    device = Device(
        info=info,
        state_file=args.state_file,
        command_log=command_log,
        counters_file=counters_file,
        lldp_file=lldp_file,
        unsupported=tuple(args.unsupported),
        reject=tuple(args.reject_config),
    )
    startup = args.startup_config.read_text() if args.startup_config else None
    device.boot(startup)
    server = EmulatorServer(device, host, args.port, args.username, args.password, load_host_key(args.host_key))

    def stop(signum, frame):
        server.close()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _write(args.pid_file, f"{os.getpid()}\n")
    _write(args.port_file, f"{server.port}\n")
    print(server.port, flush=True)
    try:
        server.serve_forever()
    finally:
        for path in (args.port_file, args.pid_file):
            if path is not None and path.exists():
                path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
