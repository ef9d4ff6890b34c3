"""One emulated switch (`Device`) and one CLI session on it (`Session`).

The device holds the running config tree, the startup config, checkpoints and bootflash files, all
guarded by one lock shared by every session. A session holds only its mode (as a path of keys, so a
rollback done by another session cannot leave it pointing into a stale tree) and terminal settings.
Nothing here knows about SSH: `Session.handle(line)` returns the text the switch prints.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from . import grammar
from .config import Node, natural_key, ordered_top, render_body, render_node
from .counters import NAMES as COUNTER_NAMES
from .counters import Counters, render_queuing
from .output import apply_filters, checkpoint_summary, expand_values, file_name, interface_brief, split_pipes
from .words import INVALID, Args, CliError, NoMatch, parse_interface, tokenize

COPY_OK = [
    "[########################################] 100%",
    "Copy complete, now saving to disk (please wait)...",
    "Copy complete.",
]
ROLLBACK_OK = [
    "Note: Applying config parallelly may fail Rollback verification",
    "Collecting Running-Config",
    "#Generating Rollback Patch",
    "Executing Rollback Patch",
    "#Generating Running-config for verification",
    "#Verifying Rollback Patch",
    "Rollback completed successfully.",
]
QOS_INTERFACE_KEYS = ("service-policy", "priority-flow-control")


@dataclass
class DeviceInfo:
    hostname: str = "switch"
    model: str = "N9K-C93180YC-FX"
    chassis: str = "Nexus9000 C93180YC-FX Chassis"
    version: str = "10.3(4a)"
    serial: str = "FDO23450LAB"
    ethernet_ports: int = 8
    image: str = "bootflash:///nxos64-cs.10.3.4a.M.bin"


def _now() -> str:
    return _dt.datetime.now().strftime("%a %b %d %H:%M:%S %Y")


@dataclass
class Device:
    info: DeviceInfo = field(default_factory=DeviceInfo)
    state_file: Path | None = None
    command_log: Path | None = None
    counters_file: Path | None = None
    # What is cabled to each port, as LLDP would see it ({"Ethernet1/1": {"system_name", "port_id",
    # "port_description", "chassis_id"}}): the lab writes it from its wiring, a test rewrites it to swap a cable.
    # Re-read at every show.
    lldp_file: Path | None = None
    # Exec commands this "release" lacks (prefixes, full words): answered `% Invalid command`, to test
    # how a caller copes with an older or smaller NX-OS.
    unsupported: tuple[str, ...] = ()
    # Config lines this switch refuses (regular expressions matched against the whole line), answered
    # with an `ERROR:` as a switch answers a line it cannot apply: to test a push that fails halfway.
    reject: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self.counters = Counters(self.counters_file)
        self.running = self.factory_root()
        self.startup = self.body_text(self.running)
        self.checkpoints: dict[str, str] = {}
        self.files: dict[str, str] = {}
        self.last_change = _now()
        self.dirty = False  # config-mode changes not yet in the state file
        self.startup_saved = _now()
        self.booted = _dt.datetime.now()
        self._session_ids = 0

    # -- construction, loading, persistence ----------------------------------------------------
    def factory_root(self) -> Node:
        root = Node(text="", key="", kind=None)
        root.set_leaf("hostname", f"hostname {self.info.hostname}")
        for port in range(1, self.info.ethernet_ports + 1):
            name = f"interface Ethernet1/{port}"
            root.block(name, name, "if")
        mgmt = root.block("interface mgmt0", "interface mgmt0", "if")
        mgmt.set_leaf("vrf member", "vrf member management")
        root.block("vrf context management", "vrf context management", "vrf")
        return root

    def load_text(self, text: str) -> Node:
        """A config tree from config text, starting from the factory config (as `rollback` does)."""
        root = self.factory_root()
        grammar.replay(root, text)
        return root

    def body_text(self, root: Node) -> str:
        return "\n".join(render_body(root)).strip("\n") + "\n"

    def boot(self, startup_text: str | None = None) -> None:
        """Initial state: the state file if it exists, else the startup-config file, else factory."""
        with self.lock:
            if self.state_file and self.state_file.exists():
                state = json.loads(self.state_file.read_text())
                self.running = self.load_text(state["running"])
                self.startup = state["startup"]
                self.checkpoints = dict(state.get("checkpoints", {}))
                self.files = dict(state.get("files", {}))
                self.counters.load(state.get("counters", {}))
            elif startup_text is not None:
                self.running = self.load_text(startup_text)
            self.running.set_leaf("hostname", f"hostname {self.info.hostname}")
            if not (self.state_file and self.state_file.exists()):
                self.startup = self.body_text(self.running)
            self.save_state()

    def save_state(self) -> None:
        self.dirty = False
        if not self.state_file:
            return
        state = {
            "running": self.body_text(self.running),
            "startup": self.startup,
            "checkpoints": self.checkpoints,
            "files": self.files,
            "counters": self.counters.dump(),
        }
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.state_file)

    def log(self, session: int, mode: str, line: str, result: str) -> None:
        if not self.command_log:
            return
        entry = {
            "ts": _dt.datetime.now().isoformat(timespec="milliseconds"),
            "session": session,
            "mode": mode,
            "line": line,
            "result": result,
        }
        with self.lock, self.command_log.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")

    def new_session(self) -> Session:
        with self.lock:
            self._session_ids += 1
            return Session(self, self._session_ids)

    @property
    def hostname(self) -> str:
        node = self.running.find("hostname")
        return node.text.split(" ", 1)[1] if node else "switch"

    def changed(self) -> None:
        """A config line changed the running config. The state file is written when the session is
        back at the exec prompt (or closes), not per line: a push of 70 lines would otherwise spend
        most of its time rewriting the file."""
        self.last_change = _now()
        self.dirty = True

    def flush(self) -> None:
        with self.lock:
            if self.dirty:
                self.save_state()

    # -- renderings ------------------------------------------------------------------------------
    def _header(self, command: str, startup: bool = False) -> list[str]:
        if startup:
            lines = ["", f"!Command: {command}", f"!Startup config saved at: {self.startup_saved}"]
        else:
            lines = [
                "",
                f"!Command: {command}",
                f"!Running configuration last done at: {self.last_change}",
                f"!Time: {_now()}",
            ]
        return [*lines, "", f"version {self.info.version} Bios:version 05.47 "]

    def _with_defaults(self, root: Node) -> Node:
        """The tree `... all` shows: defaults spelled out."""
        full = root.clone()
        for node in full.children:
            if node.kind == "if" and node.key.startswith("interface Ethernet"):
                if node.find("mtu") is None:
                    node.set_leaf("mtu", "mtu 1500")
                if node.find("priority-flow-control mode") is None:
                    node.set_leaf("priority-flow-control mode", "priority-flow-control mode auto")
        sysqos = full.block("system qos", "system qos", "sys-qos")
        if sysqos.find("service-policy type network-qos") is None:
            sysqos.set_leaf("service-policy type network-qos", "service-policy type network-qos default-8q-nq-policy")
        if sysqos.find("service-policy type queuing output") is None:
            sysqos.set_leaf(
                "service-policy type queuing output", "service-policy type queuing output default-8q-out-policy"
            )
        return full

    def show_config(self, words: list[str], startup: bool = False) -> list[str]:
        """`show running-config [all] [ipqos [all] | interface [NAME] [all]]` and the startup twin."""
        command = "show " + " ".join(["startup-config" if startup else "running-config", *words])
        root = self.load_text(self.startup) if startup else self.running
        rest = list(words)
        show_all = "all" in rest
        rest = [w for w in rest if w != "all"]
        if show_all:
            root = self._with_defaults(root)
        top = ordered_top(root)
        if rest and rest[0] == "ipqos":
            top = self._ipqos(top)
            rest = rest[1:]
        elif rest and rest[0] == "interface":
            names = rest[1:]
            top = [n for n in top if n.kind == "if"]
            if names:
                wanted = {f"interface {n}" for n in names}
                top = [n for n in top if n.key in wanted]
                if not top:
                    raise CliError(INVALID, None)
            rest = []
        if rest:
            raise CliError(INVALID, None)
        return self._header(command, startup) + render_body(root, top)

    @staticmethod
    def _ipqos(top: list[Node]) -> list[Node]:
        kept = []
        for node in top:
            if node.key.startswith(("class-map ", "policy-map ", "system qos", "priority-flow-control ")):
                kept.append(node)
            elif node.kind == "if":
                qos = [c for c in node.children if c.key.startswith(QOS_INTERFACE_KEYS)]
                if qos:
                    kept.append(Node(text=node.text, key=node.key, kind="if", children=qos))
        return kept

    def pfc_bitmap(self) -> int:
        """Bitmap of the no-drop CoS values of the network-qos policy active under `system qos`."""
        sysqos = self.running.find("system qos")
        attached = sysqos.find("service-policy type network-qos") if sysqos else None
        if attached is None:
            return 0
        policy = self.running.find(f"policy-map type network-qos {attached.text.rsplit(' ', 1)[1]}")
        bitmap = 0
        for cls in policy.children if policy else []:
            pause = cls.find("pause pfc-cos")
            if pause is not None:
                for value in expand_values(pause.text.rsplit(" ", 1)[1]):
                    bitmap |= 1 << value
        return bitmap

    def show_pfc(self) -> list[str]:
        bitmap = self.pfc_bitmap()
        lines = [
            "",
            "slot  1",
            "=======",
            "",
            "",
            "============================================================",
            "Port               Mode Oper(VL bmap)  RxPPP      TxPPP     ",
            "============================================================",
            "",
        ]
        interfaces = [n for n in self.running.children if n.kind == "if" and n.key.startswith("interface Ethernet")]
        for node in sorted(interfaces, key=lambda n: natural_key(n.key)):
            mode_node = node.find("priority-flow-control mode")
            mode = mode_node.text.rsplit(" ", 1)[1] if mode_node else "auto"
            oper = f"On  ({bitmap:x})" if mode == "on" and bitmap and node.find("shutdown") is None else "Off"
            port = node.key.split(" ", 1)[1]
            per_cos = [self.counters.get(port, cos) for cos in range(8)]
            rx_ppp = sum(c["rx-pause"] for c in per_cos)
            tx_ppp = sum(c["tx-pause"] for c in per_cos)
            lines.append(f"{port:<19}{mode.capitalize():<5}{oper:<15}{rx_ppp:<11}{tx_ppp:<10}")
        return lines

    def show_interface_brief(self) -> list[str]:
        interfaces = [n for n in self.running.children if n.kind == "if" and n.key.startswith("interface Ethernet")]
        ports = sorted(interfaces, key=lambda n: natural_key(n.key))
        return interface_brief([(n.key.split(" ", 1)[1], n.find("shutdown") is not None) for n in ports])

    # -- counters ----------------------------------------------------------------------------------
    def add_counters(self, interface: str, qos_group: int, **deltas: int) -> None:
        """Move the counters of one port and qos-group (names in counters.NAMES, `_` for `-`)."""
        with self.lock:
            self.counters.add(interface, qos_group, **deltas)
            self.save_state()

    def _active_policy(self, ptype: str) -> Node | None:
        sysqos = self.running.find("system qos")
        key = "service-policy type network-qos" if ptype == "network-qos" else "service-policy type queuing output"
        attached = sysqos.find(key) if sysqos else None
        if attached is None:
            return None
        return self.running.find(f"policy-map type {ptype} {attached.text.rsplit(' ', 1)[1]}")

    def _port_queuing_policy(self, port: str) -> Node | None:
        """The queuing policy attached to the port itself (it overrides the system one), or None."""
        node = self.running.find(f"interface {port}")
        attached = node.find("service-policy type queuing output") if node else None
        if attached is None:
            return None
        return self.running.find(f"policy-map type queuing {attached.text.rsplit(' ', 1)[1]}")

    def queue_table(self, port: str | None = None) -> tuple[dict[int, dict], set[int]]:
        """Egress queues of the queuing policy active on the port (its own, else the system one)
        ({group: bandwidth/priority}) and the no-drop groups."""
        policy = (self._port_queuing_policy(port) if port else None) or self._active_policy("queuing")
        classes = policy.children if policy else []
        four = any(re.fullmatch(r"class type queuing c-out-q(\d|-default)", c.key) for c in classes)
        queues: dict[int, dict] = {g: {"bandwidth": 0, "priority": None} for g in range(4 if four else 8)}
        if policy is None:
            queues[0]["bandwidth"] = 100
        for cls in classes:
            match = re.fullmatch(r"class type queuing c-out-(?:8q-)?q(\d|-default)", cls.key)
            if not match:
                continue
            group = 0 if match.group(1) == "-default" else int(match.group(1))
            bandwidth, priority = cls.find("bandwidth"), cls.find("priority")
            queues.setdefault(group, {})
            queues[group]["bandwidth"] = int(bandwidth.text.rsplit(" ", 1)[1]) if bandwidth else None
            queues[group]["priority"] = int(priority.text.rsplit(" ", 1)[1]) if priority else None
        nodrop = set()
        network = self._active_policy("network-qos")
        for cls in network.children if network else []:
            match = re.fullmatch(r"class type network-qos c-(?:8q-)?nq(\d)", cls.key)
            if match and cls.find("pause pfc-cos") is not None:
                nodrop.add(int(match.group(1)))
        return queues, nodrop

    def show_queuing(self, interface: str | None) -> list[str]:
        ports = [n.key.split(" ", 1)[1] for n in self.running.children if n.key.startswith("interface Ethernet")]
        if interface is not None:
            if interface not in ports:
                raise CliError("% Invalid interface format at '^' marker.")
            ports = [interface]
        out = ["", "slot  1", "=======", "", ""]
        for port in sorted(ports, key=lambda p: natural_key(f"interface {p}")):
            queues, nodrop = self.queue_table(port)
            out += [*render_queuing(port, queues, nodrop, self.counters), ""]
        return out

    def show_lldp_neighbors_detail(self) -> list[str]:
        """`show lldp neighbors detail` in NX-OS's layout, from the lldp file; `% Invalid command` while `feature lldp`
        is off (NX-OS has no LLDP commands then)."""
        if self.running.find("feature lldp") is None:
            raise CliError(INVALID, None)
        try:
            cabled = json.loads(self.lldp_file.read_text()) if self.lldp_file else {}
        except (OSError, ValueError):
            cabled = {}
        out = [
            "Capability codes:",
            "  (R) Router, (B) Bridge, (T) Telephone, (C) DOCSIS Cable Device",
            "  (W) WLAN Access Point, (P) Repeater, (S) Station, (O) Other",
            "Device ID            Local Intf      Hold-time  Capability  Port ID  ",
            "",
        ]
        ports = sorted(cabled, key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
        for port in ports:
            n = cabled[port]
            out += [
                f"Chassis id: {n.get('chassis_id') or '0000.0000.0000'}",
                *([f"Port id: {n['port_id']}"] if n.get("port_id") else []),
                f"Local Port id: {port.replace('Ethernet', 'Eth', 1)}",
                f"Port Description: {n.get('port_description') or ''}",
                f"System Name: {n.get('system_name') or ''}",
                f"System Description: {n.get('system_description') or 'Debian GNU/Linux 12 (bookworm) Linux'}",
                "Time remaining: 98 seconds",
                "System Capabilities: B, R",
                "Enabled Capabilities: R",
                f"Management Address: {n.get('management_address') or 'not advertised'}",
                "Vlan ID: not advertised",
                "",
            ]
        return [*out, f"Total entries displayed: {len(ports)}"]

    def show_version(self) -> list[str]:
        up = _dt.datetime.now() - self.booted
        days, secs = up.days, up.seconds
        uptime = f"{days} day(s), {secs // 3600} hour(s), {secs // 60 % 60} minute(s), {secs % 60} second(s)"
        return [
            "Cisco Nexus Operating System (NX-OS) Software",
            "TAC support: http://www.cisco.com/tac",
            "This is lab.nxos_emu, an emulator of the NX-OS CLI for tests; not Cisco software.",
            "",
            "Software",
            "  BIOS: version 05.47",
            f"  NXOS: version {self.info.version}",
            "  BIOS compile time:  04/28/2022",
            f"  NXOS image file is: {self.info.image}",
            "  NXOS compile time:  11/10/2023 12:00:00 [11/10/2023 20:00:00]",
            "",
            "",
            "Hardware",
            f"  cisco {self.info.chassis}",
            "  Intel(R) Xeon(R) CPU D-1528 @ 1.90GHz with 24569356 kB of memory.",
            f"  Processor Board ID {self.info.serial}",
            "",
            f"  Device name: {self.hostname}",
            "  bootflash:  115805356 kB",
            "",
            f"Kernel uptime is {uptime}",
            "",
            "Last reset",
            "  Reason: Unknown",
            "  System version: ",
            "  Service: ",
        ]

    def show_inventory(self) -> list[str]:
        return [
            f'NAME: "Chassis",  DESCR: "{self.info.chassis}"',
            f"PID: {self.info.model:<20},  VID: V02 ,  SN: {self.info.serial}",
            "",
            'NAME: "Slot 1",  DESCR: "48x10/25G + 6x40/100G Ethernet Module"',
            f"PID: {self.info.model:<20},  VID: V02 ,  SN: {self.info.serial}",
            "",
        ]

    # -- checkpoints and files ---------------------------------------------------------------------
    def rollback_to(self, text: str) -> None:
        self.running = self.load_text(text)
        self.changed()


class Session:
    """One CLI session: exec mode or a config mode given by a path of node keys."""

    def __init__(self, device: Device, number: int):
        self.device = device
        self.number = number
        self.mode_keys: list[str] | None = None  # None: exec mode; [] the config root
        self.dont_ask = False
        self.closed = False

    # -- mode --------------------------------------------------------------------------------------
    def _stack(self) -> list[Node]:
        stack = [self.device.running]
        for key in self.mode_keys or []:
            child = stack[-1].find(key)
            if child is None or child.kind is None:
                break
            stack.append(child)
        return stack

    @property
    def mode_name(self) -> str:
        if self.mode_keys is None:
            return "exec"
        with self.device.lock:
            return grammar.PROMPTS[grammar.mode_kind(self._stack()[-1])]

    @property
    def prompt(self) -> str:
        host = self.device.hostname
        if self.mode_keys is None:
            return f"{host}# "
        return f"{host}({self.mode_name})# "

    # -- input -------------------------------------------------------------------------------------
    def handle(self, line: str) -> list[str]:
        """Run one input line; return the output lines (the `^` marker is relative to the line)."""
        line = line.rstrip("\r\n")
        if not line.strip():
            return []
        mode = self.mode_name
        try:
            with self.device.lock:
                out = self._dispatch(line)
            self.device.log(self.number, mode, line, "ok")
            return out
        except CliError as exc:
            self.device.log(self.number, mode, line, "error")
            if exc.column is None:
                return [exc.message]
            return [" " * exc.column + "^", exc.message]
        finally:
            if self.mode_keys is None:  # back at the exec prompt: the state file catches up
                self.device.flush()

    def _dispatch(self, line: str) -> list[str]:
        words = line.split()
        first = words[0].lower()
        if self.mode_keys is None:
            return self._exec(line)
        # config modes
        if first == "end" and len(words) == 1:
            self.mode_keys = None
            return []
        if first == "exit" and len(words) == 1:
            stack = self._stack()
            self.mode_keys = None if len(stack) == 1 else [n.key for n in stack[1:-1]]
            return []
        if first == "do" and len(words) > 1:
            return self._exec(line.split(None, 1)[1], from_config=True)
        if first in ("show", "sho", "sh"):
            return self._exec(line, from_config=True)
        for pattern in self.device.reject:
            if re.fullmatch(pattern, line.strip()):
                raise CliError(f"ERROR: {line.strip()}: refused by this switch (lab.nxos_emu --reject-config)")
        before = self.device.body_text(self.device.running)
        stack = grammar.apply_line(self._stack(), line)
        self.mode_keys = [n.key for n in stack[1:]]
        if self.device.body_text(self.device.running) != before:
            self.device.changed()
        return []

    def _exec(self, line: str, from_config: bool = False) -> list[str]:
        dev = self.device
        base, filters = split_pipes(line)
        normalized = " ".join(base.split())
        for prefix in dev.unsupported:
            if normalized == prefix or normalized.startswith(prefix + " "):
                raise CliError(INVALID, base.find(prefix.split()[-1]))
        tokens = tokenize(base)
        args = Args(base, tokens)
        negate = tokens[0].text.lower() == "no"
        if negate:
            args.pos = 1
        try:
            cmd = args.first(
                "show",
                "configure",
                "terminal",
                "copy",
                "checkpoint",
                "rollback",
                "delete",
                "dir",
                "exit",
                "quit",
                "end",
                "clear",
                "emulator",
            )
        except NoMatch:
            raise CliError(INVALID, tokens[args.pos].col if args.pos < len(tokens) else 0) from None
        if negate and cmd not in ("checkpoint", "terminal"):
            raise CliError(INVALID, tokens[0].col)
        if filters and cmd != "show":
            raise CliError(INVALID, len(base) + 1)
        if cmd == "show":
            output = self._show(args)
            try:
                return apply_filters(output, filters)
            except CliError as exc:
                if exc.column is None:
                    exc.column = line.rfind("|") + 2
                raise
        if from_config and cmd in ("configure", "exit", "quit", "end"):
            raise CliError(INVALID, tokens[0].col)
        if cmd == "configure":
            args.try_kw("terminal")
            args.end()
            self.mode_keys = []
            return ["Enter configuration commands, one per line. End with CNTL/Z."]
        if cmd in ("exit", "quit"):
            args.end()
            self.closed = True
            return []
        if cmd == "end":
            args.end()
            return []
        if cmd == "terminal":
            sub = args.kw("length", "width", "dont-ask", "session-timeout")
            if sub == "dont-ask":
                args.end()
                self.dont_ask = not negate
            elif sub == "length":
                args.number(0, 511)
            elif sub == "width":
                args.number(24, 511)
            else:
                args.number(0, 525600)
            args.end()
            return []
        if cmd == "copy":
            source = args.kw("running-config", "startup-config")
            dest = args.word()
            args.end()
            if source == "running-config" and dest == "startup-config":
                dev.startup = dev.body_text(dev.running)
                dev.startup_saved = _now()
                dev.save_state()
                return list(COPY_OK)
            if source == "running-config" and dest.startswith("bootflash:"):
                dev.files[file_name(dest)] = dev.body_text(dev.running)
                dev.save_state()
                return list(COPY_OK)
            raise CliError(INVALID, args.tokens[args.pos - 1].col)
        if cmd == "checkpoint":
            return self._checkpoint(args, negate)
        if cmd == "clear":
            args.kw("qos")
            args.kw("statistics")
            port = None
            if args.try_kw("interface"):
                port = self._if_name(args)
            args.end()
            dev.counters.clear(port)
            dev.save_state()
            return []
        if cmd == "emulator":
            return self._emulator(args)
        if cmd == "rollback":
            args.kw("running-config")
            how = args.kw("checkpoint", "file")
            name = args.word()
            args.try_kw("atomic", "best-effort", "stop-at-first-failure")
            args.try_kw("verbose")
            args.end()
            if how == "checkpoint":
                if name not in dev.checkpoints:
                    raise CliError(f"ERROR: Checkpoint {name} does not exist")
                text = dev.checkpoints[name]
            else:
                if file_name(name) not in dev.files:
                    raise CliError(f"ERROR: File {name} does not exist")
                text = dev.files[file_name(name)]
            dev.rollback_to(text)
            return list(ROLLBACK_OK)
        if cmd == "delete":
            name = args.word()
            args.try_kw("no-prompt")
            args.end()
            if dev.files.pop(file_name(name), None) is None:
                raise CliError(f"ERROR: File {name} does not exist")
            dev.save_state()
            return []
        # dir
        args.try_kw("bootflash:")
        args.end()
        # As NX-OS lists bootflash: size, date, the file's name as the last word.
        stamp = dev.booted.strftime("%b %d %H:%M:%S %Y")
        out = [
            f"  {len(text):>9}    {stamp}  {name.removeprefix('bootflash:')}"
            for name, text in sorted(dev.files.items())
        ]
        return [*out, "", "Usage for bootflash://sup-local", " 1010778112 bytes used", "115805356 bytes free"]

    def _emulator(self, args: Args) -> list[str]:
        """Hidden lab control (no NX-OS command): `emulator counters interface NAME qos-group N
        [tx-pkts N] [tx-bytes N] [dropped N] [dropped-bytes N] [ecn-marked N] [tx-pause N] [rx-pause N]`
        adds to the counters of that port and qos-group."""
        args.kw("counters")
        args.kw("interface")
        port = self._if_name(args)
        if self.device.running.find(f"interface {port}") is None:
            raise CliError(INVALID, args.tokens[args.pos - 1].col)
        args.kw("qos-group")
        group = args.number(0, 7)
        deltas = {}
        while not args.done():
            name = args.kw(*COUNTER_NAMES)
            deltas[name] = args.number(0, 2**63 - 1)
        if not deltas:
            raise CliError("% Incomplete command at '^' marker.")
        self.device.counters.add(port, group, **deltas)
        self.device.save_state()
        return []

    def _checkpoint(self, args: Args, negate: bool) -> list[str]:
        dev = self.device
        if args.try_kw("file"):
            name = args.word()
            args.end()
            if negate:
                raise CliError(INVALID, args.tokens[0].col)
            dev.files[file_name(name)] = dev.body_text(dev.running)
            dev.save_state()
            return ["Done"]
        name = args.word()
        if args.try_kw("description"):
            args.rest()
        args.end()
        if negate:
            if dev.checkpoints.pop(name, None) is None:
                raise CliError(f"ERROR: Checkpoint {name} does not exist")
            dev.save_state()
            return ["Done"]
        if name in dev.checkpoints:
            raise CliError(f"ERROR: Checkpoint name {name} is already in use")
        dev.checkpoints[name] = dev.body_text(dev.running)
        dev.save_state()
        return ["Done"]

    def _show(self, args: Args) -> list[str]:
        dev = self.device
        what = args.kw(
            "version",
            "inventory",
            "hostname",
            "license",
            "running-config",
            "startup-config",
            "interface",
            "checkpoint",
            "clock",
            "privilege",
            "user-account",
            "policy-map",
            "queuing",
            "lldp",
        )
        if what == "lldp":
            args.kw("neighbors")
            args.kw("detail")
            args.end()
            return dev.show_lldp_neighbors_detail()
        if what == "version":
            args.end()
            return dev.show_version()
        if what == "inventory":
            args.end()
            return dev.show_inventory()
        if what == "hostname":
            args.end()
            return [dev.hostname]
        if what == "license":
            args.kw("host-id")
            args.end()
            return [f"License hostid: VDH={dev.info.serial}"]
        if what == "clock":
            args.end()
            now = _dt.datetime.now()
            return [now.strftime("%H:%M:%S.%f")[:-3] + " UTC " + now.strftime("%a %b %d %Y")]
        if what == "privilege":
            args.end()
            return ["User privilege level: 15"]
        if what == "user-account":
            name = args.word()
            args.end()
            return [f"user:{name}", "        this user account has no expiry date", "", "        roles:network-admin "]
        if what in ("running-config", "startup-config"):
            words = []
            while not args.done():
                words.append(
                    args.kw("all", "ipqos", "interface")
                    if not words or words[-1] != "interface"
                    else self._if_name(args)
                )
            return dev.show_config(words, startup=what == "startup-config")
        if what == "checkpoint":
            args.kw("summary")
            args.end()
            return checkpoint_summary(dev.checkpoints)
        if what == "policy-map":
            return self._show_policy_map(args)
        if what == "queuing":
            port = None
            if args.try_kw("interface"):
                port = self._if_name(args)
            args.end()
            return dev.show_queuing(port)
        # interface ...
        if args.kw("priority-flow-control", "brief") == "brief":
            args.end()
            return dev.show_interface_brief()
        args.end()
        return dev.show_pfc()

    @staticmethod
    def _if_name(args: Args) -> str:
        name, _ = parse_interface(args)
        return name

    def _show_policy_map(self, args: Args) -> list[str]:
        """`show policy-map system type network-qos`: the active network-qos policy."""
        args.kw("system")
        args.kw("type")
        args.kw("network-qos")
        args.end()
        sysqos = self.device.running.find("system qos")
        attached = sysqos.find("service-policy type network-qos") if sysqos else None
        name = attached.text.rsplit(" ", 1)[1] if attached else "default-8q-nq-policy"
        policy = self.device.running.find(f"policy-map type network-qos {name}")
        lines = ["", "  Type network-qos policy-maps", "  ===============================", ""]
        if policy is None:
            return [*lines, f"  policy-map type network-qos {name}"]
        return lines + ["  " + ln for ln in render_node(policy)]
