"""The reset record's kernel state that no file holds: nftables tables (`nft`), loaded kernel modules (`modules`) and
network links' addresses, routes and MTU (`links`, read with `ip -j`).

A table the project added is deleted, one it changed is loaded again as `nft list table` printed it; a module it
loaded is unloaded where it can be; a link loses what the project added and gets back what it removed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, Outcome, ResetError


# ----------------------------------------------------------------------------------------- nftables tables
def nft_table(host: Host, table: str) -> str | None:
    """The table as `nft list table` prints it, None when it (or nft itself) is not there."""
    family, _, name = table.partition(" ")
    rc, out, _ = host.sh(["nft", "list", "table", family, name])
    return out if rc == 0 else None


def record_nft(host: Host, manifest: dict, tables: list[str], lines: list[str]) -> None:
    for table in tables:
        if table not in manifest["nft"]:
            manifest["nft"][table] = nft_table(host, table)
            lines.append(f"nft table {table}: {'absent' if manifest['nft'][table] is None else 'kept'}")


def restore_nft(host: Host, tables: dict, out: Outcome) -> None:
    for table, before in tables.items():
        now = nft_table(host, table)
        if now == before:
            continue
        if now is not None:
            out.cmd(host, ["nft", "delete", "table", *table.split(" ", 1)])
        if before is not None:
            _load_nft(host, table, before, out)


def _load_nft(host: Host, table: str, text: str, out: Outcome) -> None:
    def load_table() -> None:
        fd, tmp = tempfile.mkstemp(prefix="reset-nft-", suffix=".nft")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            rc, so, se = host.sh(["nft", "-f", tmp])
            if rc != 0:
                raise ResetError(f"nft -f failed (rc {rc}): {(se or so).strip()}")
        finally:
            os.unlink(tmp)

    out.do(host, f"load the table {table} as it was before the first run", load_table)


# ----------------------------------------------------------------------------------------- kernel modules
def loaded_modules(host: Host) -> set[str] | None:
    """Names in /proc/modules; None on a kernel without loadable modules."""
    try:
        with open(host.path("/proc/modules"), encoding="utf-8") as handle:
            return {line.split()[0] for line in handle if line.strip()}
    except OSError:
        return None


def record_modules(host: Host, manifest: dict, names: list[str], lines: list[str]) -> None:
    if not names:
        return
    loaded = loaded_modules(host)
    mods = manifest["modules"]
    for name in names:
        if name not in mods:
            mods[name] = None if loaded is None else name in loaded
            lines.append(f"module {name}: {'no loadable modules' if loaded is None else name in loaded}")


def unload_modules(host: Host, modules: dict, out: Outcome) -> None:
    """The modules the project loaded, last recorded first (a module that will not go is a note)."""
    loaded = loaded_modules(host)
    for name, before in reversed(list(modules.items())):
        if loaded is not None and before is False and name in loaded:
            out.cmd(host, ["modprobe", "-r", name], fatal=False)


# ----------------------------------------------------------------------------------------- links
def parse_links(addr_json: str, route_jsons: Iterable[str]) -> dict | None:
    """One link from `ip -j addr show dev X` and `ip -j [-6] route show dev X`: MTU, addresses
    ([family, address, prefix length]) and the routes that are not the kernel's own (those follow the addresses)."""
    try:
        entries = json.loads(addr_json or "[]")
    except ValueError:
        return None
    if not entries:
        return None
    link = entries[0]
    addresses = sorted(
        [a.get("family", ""), a.get("local", ""), int(a.get("prefixlen", 0))]
        for a in link.get("addr_info", [])
        if a.get("local")
    )
    routes = []
    for text in route_jsons:
        try:
            rows = json.loads(text or "[]")
        except ValueError:
            rows = []
        for row in rows:
            if row.get("protocol") == "kernel" or row.get("type") in ("multicast", "local", "broadcast"):
                continue
            routes.append([str(row.get("dst", "")), str(row.get("gateway", "")), int(row.get("metric", 0) or 0)])
    return {"mtu": int(link.get("mtu", 0)), "addresses": addresses, "routes": sorted(routes)}


def read_link(host: Host, ifname: str) -> dict | None:
    rc, addr, _ = host.sh(["ip", "-j", "addr", "show", "dev", ifname])
    if rc != 0:
        return None
    routes = [host.sh(["ip", *family, "-j", "route", "show", "dev", ifname])[1] for family in ([], ["-6"])]
    return parse_links(addr, routes)


def plan_link(ifname: str, before: dict, now: dict) -> list[list[str]]:
    """The `ip` commands that take a link from `now` back to `before`: routes and addresses the project added go
    (routes first), the MTU is set back, what it removed comes back (addresses before routes)."""
    cmds: list[list[str]] = []
    b_addr = {tuple(a) for a in before["addresses"]}
    n_addr = {tuple(a) for a in now["addresses"]}
    b_route = {tuple(r) for r in before["routes"]}
    n_route = {tuple(r) for r in now["routes"]}

    def route(verb: str, r: tuple) -> list[str]:
        dst, gateway, metric = r
        six = ["-6"] if ":" in dst + gateway else []
        return ["ip", *six, "route", verb, dst, *(["via", gateway] if gateway else []), "dev", ifname] + (
            ["metric", str(metric)] if metric else []
        )

    cmds += [route("del", r) for r in sorted(n_route - b_route)]
    cmds += [["ip", "addr", "del", f"{a[1]}/{a[2]}", "dev", ifname] for a in sorted(n_addr - b_addr)]
    if before["mtu"] and now["mtu"] != before["mtu"]:
        cmds.append(["ip", "link", "set", "dev", ifname, "mtu", str(before["mtu"])])
    cmds += [["ip", "addr", "add", f"{a[1]}/{a[2]}", "dev", ifname] for a in sorted(b_addr - n_addr)]
    cmds += [route("add", r) for r in sorted(b_route - n_route)]
    return cmds


def record_links(host: Host, manifest: dict, ifnames: list[str], lines: list[str]) -> None:
    for ifname in ifnames:
        if ifname not in manifest["links"]:
            manifest["links"][ifname] = read_link(host, ifname)
            lines.append(f"link {ifname}: {manifest['links'][ifname]}")


def restore_links(host: Host, links: dict, out: Outcome) -> None:
    """Addresses, routes and MTU as before (rdma_netplan asks for this after its netplan apply); a link that does
    not come back as it was is an error."""
    for ifname, before in links.items():
        now = read_link(host, ifname)
        if before is None or now is None:
            if before != now:
                out.notes.append(f"{ifname}: {'absent before' if before is None else 'absent now'}: left as it is")
            continue
        for argv in plan_link(ifname, before, now):
            out.cmd(host, argv)
        if not host.check_mode:
            again = read_link(host, ifname)
            if again is None or {k: again[k] for k in ("mtu", "addresses", "routes")} != before:
                out.errors.append(f"{ifname} is {again}, not as before the first run: {before}")
