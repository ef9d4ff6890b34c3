"""The reset record (module_utils/host/reset_record.py): what a first run replaces is kept once and put back exactly.

Every test works on a temporary root with a fake host (systemctl, nft, ip, dpkg-query, apt-get, groupdel, userdel,
modprobe answered from a small in-memory state that the commands change), so the order of a restore and what it leaves
are visible."""

from __future__ import annotations

import errno
import json
import os
import shlex
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import reset_record as rr


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


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.1.1 node1\n")
    (tmp_path / "etc" / "hosts").chmod(0o644)
    (tmp_path / "etc" / "group").write_text("root:x:0:\n")
    return tmp_path


@pytest.fixture
def system(root: Path) -> FakeSystem:
    return FakeSystem(root)


def host(root: Path, system: FakeSystem, check: bool = False) -> rr.Host:
    return rr.Host(root=str(root), run=system, check_mode=check)


def tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under root (the store left out) with its content (files) and mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = "/" + str(path.relative_to(root))
            if rel.startswith(rr.STORE):
                continue
            out[rel] = (path.read_text() if path.is_file() else "<dir>", path.stat().st_mode & 0o7777)
    return out


def test_files_come_back_exactly_and_new_ones_go_with_their_directories(root, system):
    before = tree(root)
    h = host(root, system)
    done = rr.record(
        h, "common", rr.Spec(paths=["/etc/hosts", "/etc/rdma-llm/sub/new.conf"], trees=["/opt/rdma-llm/venv"])
    )
    assert done["changed"]
    assert "/etc/rdma-llm: absent" in done["lines"] and "/etc/hosts: file (kept)" in done["lines"]
    # What the concern then does.
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n10.0.0.1 node1-fabric node1\n")
    (root / "etc" / "hosts").chmod(0o600)
    (root / "etc" / "rdma-llm" / "sub").mkdir(parents=True)
    (root / "etc" / "rdma-llm" / "sub" / "new.conf").write_text("x\n")
    (root / "opt" / "rdma-llm" / "venv" / "bin").mkdir(parents=True)
    (root / "opt" / "rdma-llm" / "venv" / "bin" / "python").write_text("#!")
    result = rr.restore(h, "common")
    assert result["errors"] == [] and result["forgotten"]
    assert tree(root) == before
    assert not (root / "var").exists(), "the store and the directories it made are gone with the last record"
    # The diff of --check --diff: the file as it is, then the kept copy.
    hosts = next(d for d in result["diff"] if d["before_header"] == "/etc/hosts")
    assert (
        hosts["before"].endswith("node1-fabric node1\n") and hosts["after"] == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    )


def test_the_first_record_wins_and_a_second_reset_changes_nothing(root, system):
    h = host(root, system)
    rr.record(h, "common", rr.Spec(paths=["/etc/hosts"], values={"hostname": "before"}))
    (root / "etc" / "hosts").write_text("changed once\n")
    again = rr.record(h, "common", rr.Spec(paths=["/etc/hosts"], values={"hostname": "after"}))
    assert again == {"changed": False, "lines": []}
    (root / "etc" / "hosts").write_text("changed twice\n")
    result = rr.restore(h, "common")
    assert result["values"] == {"hostname": "before"}
    assert (root / "etc" / "hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    second = rr.restore(h, "common")
    assert second["changed"] is False and second["recorded"] is False


def test_check_mode_records_nothing_and_restores_nothing(root, system):
    rr.record(host(root, system, check=True), "common", rr.Spec(paths=["/etc/hosts"]))
    assert not (root / "var").exists()
    h = host(root, system)
    rr.record(h, "common", rr.Spec(paths=["/etc/hosts", "/etc/new"]))
    (root / "etc" / "new").write_text("new\n")
    planned = rr.restore(host(root, system, check=True), "common")
    assert planned["changed"] and "remove /etc/new (created by the project)" in planned["changes"]
    assert (root / "etc" / "new").exists() and rr.load(h, "common") is not None, "check mode keeps everything"


def test_another_concern_keeps_the_store_and_shared_directories(root, system):
    h = host(root, system)
    rr.record(h, "rdma_modules", rr.Spec(paths=["/etc/ansible/facts.d/rdma_modules.fact"]))
    (root / "etc/ansible/facts.d").mkdir(parents=True)
    (root / "etc/ansible/facts.d/rdma_modules.fact").write_text("{}")
    rr.record(h, "rdma_stack", rr.Spec(paths=["/etc/ansible/facts.d/rdma.fact"]))
    (root / "etc/ansible/facts.d/rdma.fact").write_text("{}")
    first = rr.restore(h, "rdma_modules")
    assert first["notes"] == ["/etc/ansible/facts.d kept for rdma_stack: their reset removes it"], (
        "another concern's file keeps the directory, and that concern takes it over"
    )
    assert (root / rr.STORE.lstrip("/") / "rdma_stack").is_dir()
    second = rr.restore(h, "rdma_stack")
    # The concern that created facts.d was reset first (a half site.yml made it for a later role, then the whole
    # site.yml ran): the directories go with the last file they held.
    assert not (root / "etc/ansible").exists() and not (root / "var").exists(), second
    assert "remove the empty directory /etc/ansible (created by the project)" in second["changes"]


def test_a_shared_directory_with_a_file_no_record_names_stays_and_says_why(root, system):
    h = host(root, system)
    rr.record(h, "rdma_qos", rr.Spec(paths=["/etc/ansible/facts.d/rdma_qos.fact"]))
    (root / "etc/ansible/facts.d").mkdir(parents=True)
    rr.record(h, "rdma_stack", rr.Spec(paths=["/etc/ansible/facts.d/rdma.fact"]))
    for name in ("rdma_qos.fact", "mine.fact", "rdma.fact"):
        (root / "etc/ansible/facts.d" / name).write_text("{}")
    planned = rr.restore(host(root, system, check=True), "rdma_qos")
    assert rr.load(h, "rdma_stack")["paths"][0]["path"] == "/etc/ansible/facts.d/rdma.fact", "check mode hands nothing"
    first = rr.restore(h, "rdma_qos")
    assert (
        first["notes"]
        == planned["notes"]
        == [
            "/etc/ansible/facts.d kept: it holds files the project did not record (mine.fact)",
            "/etc/ansible/facts.d kept for rdma_stack: their reset removes it",
        ]
    )
    rr.restore(h, "rdma_stack")
    assert sorted(p.name for p in (root / "etc/ansible/facts.d").iterdir()) == ["mine.fact"]


def test_units_the_project_added_go_and_units_it_stopped_come_back(root, system):
    system.units["opensm.service"] = {"load": "loaded", "enabled": "enabled", "active": "active", "vendor": "1"}
    h = host(root, system)
    rr.record(
        h,
        "rdma_qos",
        rr.Spec(paths=["/etc/systemd/system/rdma-qos.service"], services=["rdma-qos.service", "opensm.service"]),
    )
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/rdma-qos.service").write_text("[Unit]\n")
    system.units["rdma-qos.service"] = {"load": "loaded", "enabled": "enabled", "active": "active"}
    system.units["opensm.service"].update(enabled="disabled", active="inactive")
    system.calls.clear()
    result = rr.restore(h, "rdma_qos")
    assert result["errors"] == []
    assert system.calls == [
        "systemctl show rdma-qos.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl show opensm.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl stop rdma-qos.service",
        "systemctl disable rdma-qos.service",
        "systemctl daemon-reload",
        "systemctl show opensm.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl enable opensm.service",
        "systemctl start opensm.service",
    ]
    assert system.units["rdma-qos.service"]["load"] == "not-found"


def test_a_unit_the_project_started_and_enabled_at_runtime_is_stopped_socket_first(root, system):
    """netplan starts systemd-networkd (and its socket) on a host that did not run it, and links it under /run."""
    for unit in ("systemd-networkd.socket", "systemd-networkd.service"):
        system.units[unit] = {"load": "loaded", "enabled": "disabled", "active": "inactive", "vendor": "1"}
    h = host(root, system)
    rr.record(h, "rdma_netplan", rr.Spec(services=["systemd-networkd.socket", "systemd-networkd.service"]))
    system.units["systemd-networkd.socket"].update(active="active")
    system.units["systemd-networkd.service"].update(active="active", enabled="enabled-runtime")
    system.calls.clear()
    rr.restore(h, "rdma_netplan", parts=["services"])
    assert [c for c in system.calls if not c.startswith("systemctl show")] == [
        "systemctl stop systemd-networkd.socket",
        "systemctl stop systemd-networkd.service",
        "systemctl disable --runtime systemd-networkd.service",
    ]


def test_nft_table_group_and_module_the_project_added_are_removed(root, system):
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("ib_core 1 0 - Live 0x0\n")
    h = host(root, system)
    rr.record(
        h, "fw", rr.Spec(nft_tables=["inet fabric_firewall"], groups=["rdma-llm-train"], modules=["ib_core", "ib_umad"])
    )
    system.nft["inet fabric_firewall"] = "table inet fabric_firewall {\n}\n"
    (root / "etc/group").write_text("root:x:0:\nrdma-llm-train:x:999:\n")
    (root / "proc/modules").write_text("ib_core 1 0 - Live 0x0\nib_umad 1 0 - Live 0x0\n")
    result = rr.restore(h, "fw")
    assert result["errors"] == []
    assert "inet fabric_firewall" not in system.nft
    assert "rdma-llm-train" not in (root / "etc/group").read_text()
    assert (root / "proc/modules").read_text() == "ib_core 1 0 - Live 0x0\n", "only the module the project loaded"


def test_a_table_that_was_there_before_is_loaded_again(root, system):
    system.nft["inet mine"] = "table inet mine {\n\tchain c {\n\t}\n}\n"
    h = host(root, system)
    rr.record(h, "fw", rr.Spec(nft_tables=["inet mine"]))
    system.nft["inet mine"] = "table inet mine {\n}\n"
    rr.restore(h, "fw")
    assert system.nft["inet mine"] == "table inet mine {\n\tchain c {\n\t}\n}\n"


def test_undo_operations_run_last_first_once_per_key(root, system):
    (root / "sys").mkdir()
    (root / "sys/attr").write_text("1\n")
    h = host(root, system)
    ops = [
        {"key": "attr", "write": "/sys/attr", "value": "0"},
        {"key": "dcb app rdma0", "argv": ["nft", "delete", "table", "inet", "x"]},
        {"key": "cm dir", "rmdir": "/sys/cm"},
    ]
    rr.record(h, "rdma_qos", rr.Spec(undo=ops))
    rr.record(h, "rdma_qos", rr.Spec(undo=[{"key": "attr", "write": "/sys/attr", "value": "7"}]))
    (root / "sys/cm").mkdir()
    system.calls.clear()
    result = rr.restore(h, "rdma_qos")
    assert result["changes"][:3] == ["rmdir /sys/cm", "nft delete table inet x", "echo 0 > /sys/attr"]
    assert (root / "sys/attr").read_text() == "0\n" and not (root / "sys/cm").exists()
    with pytest.raises(rr.ResetError, match="needs a key"):
        rr.record(h, "rdma_qos", rr.Spec(undo=[{"argv": ["true"]}]))


def test_links_lose_what_the_project_added_and_get_their_mtu_back(root, system):
    system.links["eth1"] = {"mtu": 9000, "addresses": [["inet6", "fe80::1", 64]], "routes": []}
    h = host(root, system)
    rr.record(h, "rdma_netplan", rr.Spec(links=["eth1"]))
    system.links["eth1"] = {
        "mtu": 8000,
        "addresses": [["inet", "10.78.2.11", 24], ["inet6", "fe80::1", 64]],
        "routes": [["10.78.3.0/24", "10.78.2.1", 50]],
    }
    result = rr.restore(h, "rdma_netplan", parts=["links"])
    assert result["changes"][:3] == [
        "ip route del 10.78.3.0/24 via 10.78.2.1 dev eth1 metric 50",
        "ip addr del 10.78.2.11/24 dev eth1",
        "ip link set dev eth1 mtu 9000",
    ]
    assert system.links["eth1"] == {"mtu": 9000, "addresses": [["inet6", "fe80::1", 64]], "routes": []}


def test_a_link_that_does_not_come_back_is_an_error_and_the_record_stays(root, system, monkeypatch):
    system.links["eth1"] = {"mtu": 9000, "addresses": [], "routes": []}
    h = host(root, system)
    rr.record(h, "rdma_netplan", rr.Spec(links=["eth1"]))
    system.links["eth1"]["addresses"] = [["inet", "10.78.2.11", 24]]
    monkeypatch.setattr(rr, "plan_link", lambda *a: [])  # a restore that does nothing
    result = rr.restore(h, "rdma_netplan")
    assert result["errors"] and "not as before the first run" in result["errors"][0]
    assert not result["forgotten"] and rr.load(h, "rdma_netplan") is not None


def test_plan_link_adds_back_what_the_project_removed():
    before = {"mtu": 1500, "addresses": [["inet", "192.0.2.5", 24]], "routes": [["198.51.100.0/24", "192.0.2.1", 0]]}
    now = {"mtu": 1500, "addresses": [["inet", "10.0.0.5", 24]], "routes": []}
    assert rr.plan_link("ens1", before, now) == [
        ["ip", "addr", "del", "10.0.0.5/24", "dev", "ens1"],
        ["ip", "addr", "add", "192.0.2.5/24", "dev", "ens1"],
        ["ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.1", "dev", "ens1"],
    ]


def test_parse_links_keeps_static_routes_only():
    addr = json.dumps(
        [{"ifname": "eth1", "mtu": 8000, "addr_info": [{"family": "inet", "local": "10.78.2.11", "prefixlen": 24}]}]
    )
    routes = json.dumps(
        [
            {"dst": "10.78.2.0/24", "protocol": "kernel", "scope": "link"},
            {"dst": "10.78.3.0/24", "gateway": "10.78.2.1", "protocol": "static", "metric": 50},
        ]
    )
    assert rr.parse_links(addr, [routes, "[]"]) == {
        "mtu": 8000,
        "addresses": [["inet", "10.78.2.11", 24]],
        "routes": [["10.78.3.0/24", "10.78.2.1", 50]],
    }
    assert rr.parse_links("[]", []) is None


def test_packages_are_kept_unless_asked_and_never_take_another_package_along(root, system):
    h = host(root, system)
    rr.record(h, "rdma_stack", rr.Spec(packages=["opensm", "libopensm9"]))
    rr.record(h, "rdma_stack", rr.Spec(packages=["opensm", "iperf3"]))
    assert rr.load(h, "rdma_stack")["packages"] == ["opensm", "libopensm9", "iperf3"]
    system.packages = {"opensm", "libopensm9", "iperf3", "bash"}
    kept = rr.restore(h, "rdma_stack", keep=True)
    assert kept["notes"] == [
        "packages the project installed are kept (opensm libopensm9 iperf3); -e reset_packages=true removes them"
    ]
    system.apt_extra = ["slurm-wlm"]  # a package installed later that depends on one of them
    refused = rr.restore(h, "rdma_stack", remove_packages=True)
    assert "would also remove slurm-wlm" in refused["errors"][0] and not refused["forgotten"]
    assert system.packages == {"opensm", "libopensm9", "iperf3", "bash"}
    # slurm-wlm installed by another concern: a dry run says the full reset removes it first; a real run refuses
    # (resetting this concern alone would take Slurm's package along) and names the concern.
    rr.record(h, "slurm", rr.Spec(packages=["slurm-wlm"]))
    dry = rr.restore(rr.Host(h.root, h.run, check_mode=True), "rdma_stack", remove_packages=True)
    assert dry["errors"] == [] and "which slurm installed; a full reset removes those first" in dry["notes"][0]
    assert any("purge opensm libopensm9 iperf3" in c for c in dry["changes"])
    refused = rr.restore(h, "rdma_stack", remove_packages=True)
    assert "(slurm did: reset it too, or first)" in refused["errors"][0] and not refused["forgotten"]
    assert system.packages == {"opensm", "libopensm9", "iperf3", "bash"}
    system.apt_extra = []
    # The group libibverbs1's install made goes after the packages; one that is a user's primary group stays. A user
    # the install made (MariaDB's mysql: its purge keeps it) goes before the groups, so its group goes too.
    rr.record(h, "rdma_stack", rr.Spec(package_groups=["rdma", "munge", "mysql"], package_users=["mysql", "gone"]))
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "group").write_text("root:x:0:\nrdma:x:102:\nmunge:x:101:\nmysql:x:107:\n")
    (root / "etc" / "passwd").write_text(
        "root:x:0:0::/root:/bin/bash\nmunge:x:100:101::/nonexistent:/bin/false\nmysql:x:102:107::/nonexistent:/bin/false\n"
    )
    done = rr.restore(h, "rdma_stack", remove_packages=True)
    assert done["errors"] == [] and system.packages == {"bash"}
    assert "groupdel rdma" in done["changes"] and not any("groupdel munge" in c for c in done["changes"])
    assert "group munge kept: it is the primary group of munge" in done["notes"]
    changes = [c for c in done["changes"] if c.split()[0] in ("userdel", "groupdel")]
    assert changes.index("userdel mysql") < changes.index("groupdel mysql") and "userdel gone" not in changes
    assert "env DEBIAN_FRONTEND=noninteractive apt-get --yes --quiet purge opensm libopensm9 iperf3" in done["changes"]


def test_a_bind_mounted_file_is_written_in_place(root, system, monkeypatch):
    h = host(root, system)
    rr.record(h, "common", rr.Spec(paths=["/etc/hosts"]))
    (root / "etc/hosts").write_text("changed\n")
    inode = (root / "etc/hosts").stat().st_ino

    def busy(src, dst):
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(rr.os, "replace", busy)
    result = rr.restore(h, "common", keep=True)
    assert result["errors"] == []
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n127.0.1.1 node1\n"
    assert (root / "etc/hosts").stat().st_ino == inode, "written in place, not replaced"


@pytest.mark.parametrize(
    ("concern", "paths", "error"),
    [
        ("Common", [], "must match"),
        ("common", ["etc/hosts"], "absolute, normalised"),
        ("common", ["/etc/../etc/hosts"], "absolute, normalised"),
        ("common", ["/var/lib/rdma-llm"], "absolute, normalised"),
        ("common", ["/var/lib/rdma-llm/reset/x"], "inside the reset store"),
    ],
)
def test_bad_requests_are_refused(root, system, concern, paths, error):
    with pytest.raises(rr.ResetError, match=error):
        rr.record(host(root, system), concern, rr.Spec(paths=paths))
