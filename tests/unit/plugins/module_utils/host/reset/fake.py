"""A fake host for the reset record's tests (module_utils/host/reset/): every test works on a temporary root
(the fixtures in conftest.py) with the commands a restore runs (systemctl, nft, ip, dpkg-query, apt-get, groupdel,
userdel, modprobe) answered from a small in-memory state that the commands change, so the order of a restore and what
it leaves are visible."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import STORE, Host


class FakeSystem:
    """The commands a restore runs, answered from state they change; `calls` keeps every command line."""

    def __init__(self, root: Path):
        self.root = root
        self.calls: list[str] = []
        self.units: dict[str, dict[str, str]] = {}
        self.nft: dict[str, str] = {}
        self.links: dict[str, dict] = {}
        self.packages: set[str] = set()
        self.apt_extra: list[str] = []  # what a simulated purge would take besides the packages asked for

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(shlex.join(argv))
        tool, args = argv[0], argv[1:]
        if tool == "systemctl":
            return self.systemctl(args)
        if tool == "nft":
            return self.nft_cmd(args)
        if tool == "ip":
            return self.ip(args)
        if tool == "dpkg-query":
            names = args[2:]
            out = "".join(f"{n} installed\n" for n in names if n in self.packages)
            return (0 if all(n in self.packages for n in names) else 1), out, ""
        if tool == "apt-get":
            names = [a for a in args if not a.startswith("-") and a != "purge"]
            if "--simulate" in args:
                return 0, "".join(f"Purg {n} [1.0]\n" for n in names + self.apt_extra), ""
            self.packages -= set(names)
            return 0, "", ""
        if tool == "env":
            return self(args[1:])
        if tool in ("groupdel", "userdel"):
            table = self.root / "etc" / ("group" if tool == "groupdel" else "passwd")
            table.write_text(
                "".join(line for line in table.read_text().splitlines(True) if not line.startswith(f"{args[0]}:"))
            )
            return 0, "", ""
        if tool == "modprobe":
            modules = self.root / "proc" / "modules"
            modules.write_text(
                "".join(x for x in modules.read_text().splitlines(True) if not x.startswith(args[1] + " "))
            )
            return 0, "", ""
        return 127, "", f"{tool}: not faked"

    def systemctl(self, args: list[str]) -> tuple[int, str, str]:
        verb, unit = args[0], next((a for a in args[1:] if not a.startswith("--")), "")
        state = self.units.setdefault(unit, {"load": "not-found", "enabled": "", "active": "inactive"})
        if verb == "show":
            return (
                0,
                f"LoadState={state['load']}\nUnitFileState={state['enabled']}\nActiveState={state['active']}\n",
                "",
            )
        if verb == "daemon-reload":
            for name, st in self.units.items():
                exists = (self.root / "etc/systemd/system" / name).exists() or st.get("vendor")
                st["load"] = "loaded" if exists else "not-found"
            return 0, "", ""
        state.update({"stop": {"active": "inactive"}, "start": {"active": "active"},
                      "disable": {"enabled": "disabled"}, "enable": {"enabled": "enabled"}}[verb])  # fmt: skip
        return 0, "", ""

    def nft_cmd(self, args: list[str]) -> tuple[int, str, str]:
        if args[:2] == ["list", "table"]:
            key = " ".join(args[2:4])
            return (0, self.nft[key], "") if key in self.nft else (1, "", "Error: No such file or directory")
        if args[:2] == ["delete", "table"]:
            self.nft.pop(" ".join(args[2:4]), None)
            return 0, "", ""
        if args[0] == "-f":
            text = Path(args[1]).read_text()
            family, name = text.split()[1:3]
            self.nft[f"{family} {name}"] = text
            return 0, "", ""
        return 1, "", "unknown"

    def ip(self, args: list[str]) -> tuple[int, str, str]:
        six = args[:1] == ["-6"]
        args = args[1:] if six else args
        if args[:1] == ["-j"]:
            what, dev = args[1], args[-1]
            link = self.links.get(dev)
            if link is None:
                return 1, "", f'Device "{dev}" does not exist.'
            if what == "addr":
                info = [{"family": f, "local": a, "prefixlen": p, "scope": "global"} for f, a, p in link["addresses"]]
                return 0, json.dumps([{"ifname": dev, "mtu": link["mtu"], "addr_info": info}]), ""
            rows = [{"dst": d, "gateway": g, "metric": m, "protocol": "static"} for d, g, m in link["routes"]]
            rows = [r for r in rows if (":" in r["dst"]) == six]
            rows.append({"dst": "10.78.2.0/24", "protocol": "kernel", "scope": "link"})  # follows an address
            return 0, json.dumps(rows), ""
        dev = args[args.index("dev") + 1]
        link = self.links[dev]
        if args[0] == "link":
            link["mtu"] = int(args[-1])
        elif args[0] == "addr":
            local, prefix = args[2].split("/")
            entry = ["inet6" if ":" in local else "inet", local, int(prefix)]
            link["addresses"] = [a for a in link["addresses"] if a != entry] + ([entry] if args[1] == "add" else [])
        elif args[0] == "route":
            via = args[args.index("via") + 1] if "via" in args else ""
            metric = int(args[args.index("metric") + 1]) if "metric" in args else 0
            entry = [args[2], via, metric]
            link["routes"] = [r for r in link["routes"] if r != entry] + ([entry] if args[1] == "add" else [])
        return 0, "", ""


def host(root: Path, system: FakeSystem, check: bool = False) -> Host:
    return Host(root=str(root), run=system, check_mode=check)


def tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under root (the store left out) with its content (files) and mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = "/" + str(path.relative_to(root))
            if rel.startswith(STORE):
                continue
            out[rel] = (path.read_text() if path.is_file() else "<dir>", path.stat().st_mode & 0o7777)
    return out
