"""What the project touches on the lab, as one comparable snapshot: the reset tests compare a node and the switch after
`playbooks/reset.yml` with the fresh lab (tests/conftest.py `lab_cluster` takes that snapshot right after `lab up`).

Per node (one SSH round trip, a stdlib script run by the node's python3): the files and directories the roles write
or edit (content hash, mode, owner; the venv's and the wheelhouse's trees by name only), the hostname, `ip -j addr`
and the IPv4 routes, `nft list ruleset` (counters left out), what `dcb` and the RDMA-CM configfs show on the fabric
NIC, unit files and the state of the project's units, the packages dpkg shows installed, the groups and users,
/proc/modules.
The switch: its running and startup config and bootflash files from the emulator's state file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess

from lab import cluster

NODE_SCRIPT = r"""
import hashlib, json, os, re, stat, subprocess
TREES = ["/etc/hosts", "/etc/hostname", "/etc/netplan", "/etc/modules-load.d", "/etc/ansible", "/etc/rdma-llm",
         "/etc/rdma-qos", "/etc/opensm", "/etc/default/opensm", "/etc/systemd/system", "/usr/local/sbin",
         "/var/lib/rdma-llm", "/etc/slurm", "/etc/munge"]
NAMES_ONLY = ["/opt", "/var/cache/rdma-llm"]  # the venv and the wheelhouse: thousands of files, by name (depth 3)
SKIP = ["/var/lib/rdma-llm/runs"]  # training runs: the user's results (reset -e reset_train_runs=true removes them)
# Rewritten by a running service, not by a playbook: rdma-node-check's counter reading, which Slurm's health check
# (every 30 s in the lab) keeps; its presence counts, its content does not.
LIVE = ["/var/lib/rdma-llm/node-check-state.json", "/var/lib/rdma-llm/node-check-result.json"]

def entry(path, content=True):
    st = os.lstat(path)
    kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
    out = [kind, oct(stat.S_IMODE(st.st_mode)), st.st_uid, st.st_gid]
    if kind == "link":
        out.append(os.readlink(path))
    elif kind == "file" and content:
        out.append(hashlib.sha256(open(path, "rb").read()).hexdigest())
    return out

def walk(top, content=True, depth=None):
    found = {}
    if not os.path.lexists(top):
        return {top: "absent"}
    found[top] = entry(top, content)
    base = top.rstrip("/").count("/")
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in SKIP]
        if depth is not None and dirpath.count("/") - base >= depth:
            dirnames[:] = []
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            if path not in SKIP:
                found[path] = entry(path, content and path not in LIVE)
    return found

def run(*argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return [127, ""]
    return [p.returncode, p.stdout]

files = {}
for top in TREES:
    files.update(walk(top))
for top in NAMES_ONLY:
    files.update(walk(top, content=False, depth=3))
links = json.loads(run("ip", "-j", "addr")[1] or "[]")
# IPv6 link-local addresses follow the MAC podman gives a veth, new at each `podman start` (the fault tests restart
# hosts); the project never sets them.
addr = sorted([l["ifname"], l.get("mtu"),
               sorted([a.get("family"), a.get("local"), a.get("prefixlen"), a.get("scope")]
                      for a in l.get("addr_info", []) if not (a.get("family") == "inet6" and a.get("scope") == "link"))]
              for l in links)
routes = sorted([r.get("dst"), r.get("gateway"), r.get("dev"), r.get("protocol"), r.get("metric")]
                for r in json.loads(run("ip", "-j", "-4", "route", "show", "table", "main")[1] or "[]"))
nft = run("nft", "list", "ruleset")
nft[1] = re.sub(r"counter packets \d+ bytes \d+", "counter", nft[1])
fabric = [l["ifname"] for l in links if l["ifname"].startswith("rdma")]
dcb = {f"{o} {i}": run("dcb", "-N", o, "show", "dev", i) for o in ("app", "pfc", "ets") for i in fabric}
# One space between columns: systemctl pads them to the longest name and state present.
units = [" ".join(l.split()) for l in run("systemctl", "list-unit-files", "--no-legend", "--no-pager")[1].splitlines()
         if not re.search(r"\s(transient|generated)\s", l)]
states = {u: run("systemctl", "is-enabled", u)[1].strip() + "/" + run("systemctl", "is-active", u)[1].strip()
          for u in ("fabric-firewall.service", "rdma-qos.service", "opensm.service", "nftables.service",
                    "systemd-networkd.service", "munge.service", "slurmctld.service", "slurmd.service")}
packages = run("dpkg-query", "--show", "--showformat=${Package} ${db:Status-Status}\n")[1]
groups = sorted(l.split(":", 1)[0] for l in open("/etc/group"))
users = sorted(l.split(":", 1)[0] for l in open("/etc/passwd"))
modules = run("cat", "/proc/modules")
print(json.dumps({"files": files, "hostname": run("hostname")[1].strip(), "addr": addr, "routes": routes, "nft": nft,
                  "dcb": dcb, "rdma_cm": walk("/sys/kernel/config/rdma_cm"), "unit_files": units, "units": states,
                  "packages": sorted(packages.splitlines()), "groups": groups, "users": users,
                  "modules": modules}))
"""


def node_state(index: int) -> dict:
    ip = cluster.Node(index).mgmt_ip
    proc = subprocess.run(
        cluster.ssh_cmd(ip, "python3", "-"), input=NODE_SCRIPT, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        raise AssertionError(f"lab-node{index}: the state script failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def switch_state() -> dict:
    """The lab switch as its emulator keeps it (running and startup config, bootflash files)."""
    path = cluster.SWITCH_DIR / "state.json"
    if not path.exists():
        return {}
    state = json.loads(path.read_text())
    return {"running": state.get("running"), "startup": state.get("startup"), "files": sorted(state.get("files", {}))}


def snapshot(hosts: list[str]) -> dict:
    """{host: node state, 'lab-switch': switch state} for the lab's nodes (lab-node1 .. in order) and its switch."""
    out = {host: node_state(i) for i, host in enumerate(hosts, 1)}
    out[cluster.SWITCH_NAME] = switch_state()
    return out


def digest(state: dict) -> dict[str, str]:
    """One hash per host and part: what a test prints and compares."""
    return {
        f"{host} {part}": hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
        for host, parts in state.items()
        for part, value in parts.items()
    }


def differences(before: dict, after: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """What differs, part by part; for files the paths, for the rest the first lines that differ. `ignore`: path
    prefixes of files left out of the comparison."""
    out = []
    for host in sorted(set(before) | set(after)):
        a, b = before.get(host, {}), after.get(host, {})
        for part in sorted(set(a) | set(b)):
            x, y = a.get(part), b.get(part)
            if part == "files":
                x = {k: v for k, v in (x or {}).items() if not k.startswith(ignore)} if ignore else x
                y = {k: v for k, v in (y or {}).items() if not k.startswith(ignore)} if ignore else y
                changed = sorted(k for k in set(x or {}) | set(y or {}) if (x or {}).get(k) != (y or {}).get(k))
                out += [f"{host} {path}: {(x or {}).get(path)} -> {(y or {}).get(path)}" for path in changed[:20]]
                continue
            if x != y:
                xs, ys = json.dumps(x, sort_keys=True, indent=0), json.dumps(y, sort_keys=True, indent=0)
                diff = [line for line in set(xs.splitlines()) ^ set(ys.splitlines())][:10]
                out.append(f"{host} {part} differs: {diff}")
    return out


def assert_same(before: dict, after: dict, what: str, ignore: tuple[str, ...] = ()) -> None:
    """Fail with what differs (see differences) when two snapshots are not the same."""
    diff = differences(before, after, ignore)
    assert not diff, f"{what}:\n" + "\n".join(diff)
