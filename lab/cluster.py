"""Lab cluster lifecycle: networks, systemd hosts, SSH key, switch emulator and the lab inventory."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab import ROOT, STATE_ROOT, cgroups, podman, vault
from lab.image import ensure_image

LABEL = "io.rdma-llm-cluster.lab"
MGMT_NET = "rdmalab-mgmt"
FABRIC_NET = "rdmalab-fabric"
# Private ranges used only on this machine's own podman bridges.
MGMT_SUBNET = "10.77.0.0/24"
MGMT_GW = "10.77.0.1"
FABRIC_PREFIX = "10.77.250"
FABRIC_IFNAME = "rdma0"
FABRIC_MTU = 9000
# 32: the size this project's scale budget is measured at (docs/benchmarks.md); the address plan (10.77.x.<10+i>)
# would take 245. One switch has EMULATOR_PORTS host ports: more hosts need leaves (`--leaves`, fabric_plan).
MAX_HOSTS = 32
# `lab up --rails R`: a fabric NIC per rail, rdma<r> on network rdmalab-fabric<r+1> (the first keeps its name),
# subnet 10.77.<250+r>.0/24: the NIC-per-GPU node a rail-optimised fabric connects, rail r to rail r.
MAX_RAILS = 4
RAILS_LABEL = "io.rdma-llm-cluster.lab.rails"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
INVENTORY = ROOT / "inventory" / "lab" / "hosts.yml"
SSH_DIR = STATE_ROOT / "ssh"
KEY = SSH_DIR / "id_ed25519"
SWITCH_DIR = STATE_ROOT / "switch"
SWITCH_NAME = "lab-switch"
# A leaf-spine lab (`lab up --leaves L --spines S`): one emulator per switch, state in FABRIC_DIR/<name>.
FABRIC_DIR = STATE_ROOT / "fabric"
EMULATOR_PORTS = 8  # Ethernet1/1-8 on every emulator (its factory config)
# systemd-networkd drop-in that stands in for udev's coldplug of network devices (see the file).
NETWORKD_DROPIN = Path(__file__).parent / "files" / "networkd-udev.conf"


@dataclass(frozen=True)
class Node:
    index: int

    @property
    def name(self) -> str:
        return f"lab-node{self.index}"

    @property
    def mgmt_ip(self) -> str:
        return f"10.77.0.{10 + self.index}"

    @property
    def fabric_cidr(self) -> str:
        return self.rail_cidr(0)

    def rail_cidr(self, rail: int) -> str:
        """This host's address on rail `rail` (0: the fabric address)."""
        return f"{rail_prefix(rail)}.{10 + self.index}/24"

    def rail_mac(self, rail: int) -> str:
        """This host's NIC address on rail `rail`, locally administered and fixed: a restarted host keeps it, as a
        server's NIC does (podman would give the new veth a new one, and its peers' stale neighbour entries would
        lose its first packets after a reboot)."""
        return f"02:72:6c:{rail:02x}:{self.index // 256:02x}:{self.index % 256:02x}"


def rail_prefix(rail: int) -> str:
    return FABRIC_PREFIX if rail == 0 else f"10.77.{250 + rail}"


def rail_net(rail: int) -> str:
    return FABRIC_NET if rail == 0 else f"{FABRIC_NET}{rail + 1}"


def rail_ifname(rail: int) -> str:
    return f"rdma{rail}"


def log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------- inspection


def containers() -> list[dict]:
    return podman.jsonout("ps", "-a", "--filter", f"label={LABEL}", "--format", "json")


def networks() -> list[str]:
    rows = podman.jsonout("network", "ls", "--filter", f"label={LABEL}", "--format", "json")
    return sorted(r["name"] if "name" in r else r["Name"] for r in rows)


def _emulator_pid(directory: Path, pid_file: str = "emulator.pid") -> int | None:
    try:
        pid = int((directory / pid_file).read_text().strip())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None


def _emulator_port(directory: Path) -> int | None:
    try:
        return int((directory / "port").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def switch_pid() -> int | None:
    return _emulator_pid(SWITCH_DIR)


def switch_port() -> int | None:
    return _emulator_port(SWITCH_DIR)


def fabric_emulators() -> dict[str, tuple[int | None, int | None]]:
    """Running leaf-spine emulators: {name: (pid, port)}."""
    if not FABRIC_DIR.is_dir():
        return {}
    found = {}
    for directory in sorted(p for p in FABRIC_DIR.iterdir() if p.is_dir()):
        pid = _emulator_pid(directory)
        if pid is not None:
            found[directory.name] = (pid, _emulator_port(directory))
    return found


def emulator_available() -> bool:
    return (ROOT / "lab" / "nxos_emu" / "__main__.py").exists()


# ---------------------------------------------------------------- down


def down() -> None:
    """Remove every lab container, network and the emulator process. Safe to run any time."""
    names = [c["Names"][0] for c in containers()]
    if names:
        log(f"lab: removing {len(names)} host(s): {' '.join(sorted(names))}")
        # systemd containers honour SIGRTMIN+3 quickly; -t 5 bounds a stuck one.
        podman.run("rm", "-f", "-t", "5", *names)
    for net in networks():
        log(f"lab: removing network {net}")
        podman.run("network", "rm", "-f", net)
    stop_switch()
    stop_fabric()
    # The next lab starts with a factory-fresh switch.
    for leftover in ("state.json", "counters.json", "port", "emulator.log"):
        (SWITCH_DIR / leftover).unlink(missing_ok=True)
    INVENTORY.unlink(missing_ok=True)
    (STATE_ROOT / "state.json").unlink(missing_ok=True)
    # What nxos_roce_qos kept of the lab switches before its first apply (for reset.yml) goes with them: the next lab's
    # switches are new, and their first apply keeps their own.
    for kept in (ROOT / "artifacts" / "nxos_baseline").glob("lab-*.cfg"):
        kept.unlink(missing_ok=True)
    cgroups.remove(cgroups.LAB_GROUP)


def _gone(pid: int) -> bool:
    """Whether the process has exited; reaps it when this process started it (`lab up` and `lab down`
    in one Python process, as the tests do), which would otherwise linger as a zombie."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def stop_emulator(directory: Path, pid_file: str = "emulator.pid") -> None:
    """Stop the emulator whose pid file is in `directory` (its own process group, nothing else)."""
    pid = _emulator_pid(directory, pid_file)
    if pid is None:
        return
    log(f"lab: stopping the switch emulator in {directory.name} (pid {pid})")
    # The emulator runs in its own session: end its whole process group, nothing else.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        for _ in range(50):
            if _gone(pid):
                break
            time.sleep(0.1)
        else:
            continue
        break
    (directory / pid_file).unlink(missing_ok=True)


def stop_switch() -> None:
    stop_emulator(SWITCH_DIR)


# ---------------------------------------------------------------- up


def ensure_key() -> Path:
    SSH_DIR.mkdir(parents=True, exist_ok=True)
    if not KEY.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdma-llm-lab", "-f", str(KEY)], check=True
        )
    return KEY


def ensure_networks(rails: int = 1) -> None:
    have = set(networks())
    if MGMT_NET not in have:
        # Management: NAT to the outside (apt, PyPI) and container-to-container TCP.
        podman.run("network", "create", "--label", LABEL, "--subnet", MGMT_SUBNET, "--gateway", MGMT_GW, MGMT_NET)
    for net in (rail_net(r) for r in range(rails)):
        if net not in have:
            # Fabric: internal, no DNS, no IPAM: interfaces come up unaddressed, like a fresh RoCE NIC.
            podman.run(
                "network",
                "create",
                "--label",
                LABEL,
                "--internal",
                "--disable-dns",
                "--ipam-driver",
                "none",
                "-o",
                f"mtu={FABRIC_MTU}",
                net,
            )


def start_node(node: Node, image: str, rails: int = 1) -> None:
    podman.run(*node_run_args(node, rails, cgroups.cpu_group(cgroups.LAB_GROUP, cgroups.LAB_SHARES)), image)


# The lab's hosts outrank other containers on the machine for the CPU: they run in a top-level group of their own
# (lab/cgroups.py) where the machine allows it, and among its other containers by their shares (podman's default is
# 1024). Only the split under contention changes; a lab alone on the machine runs as before.
NODE_CPU_SHARES = 8192


def node_run_args(node: Node, rails: int = 1, cgroup_parent: str | None = None) -> list[str]:
    """`podman run` for a lab host, less the image: systemd as PID 1, management and one fabric NIC per rail;
    in the CPU group `cgroup_parent` where one is given."""
    args = [
        "run",
        "-d",
        "--name",
        node.name,
        "--hostname",
        node.name,
        "--label",
        LABEL,
        "--label",
        f"{RAILS_LABEL}={rails}",
        "--systemd=always",
        f"--cpu-shares={NODE_CPU_SHARES}",
        *([f"--cgroup-parent={cgroup_parent}"] if cgroup_parent else []),
        # netplan apply needs rw /sys (udevadm trigger); ping needs NET_RAW.
        "--privileged",
        # /etc/hosts stays the host's own file, managed by the common role as on a real server.
        "--no-hosts",
        "--network",
        f"{MGMT_NET}:ip={node.mgmt_ip}",
        *(
            a
            for r in range(rails)
            for a in ("--network", f"{rail_net(r)}:interface_name={rail_ifname(r)},mac={node.rail_mac(r)}")
        ),
        "-v",
        f"{KEY}.pub:/root/.ssh/authorized_keys:ro",
        # A restarted host brings its netplan fabric address up at boot, as a real server does.
        "-v",
        f"{NETWORKD_DROPIN}:/etc/systemd/system/systemd-networkd.service.d/lab-udev.conf:ro",
    ]
    if HOST_CA_DIR.is_dir() and any(HOST_CA_DIR.iterdir()):
        # A TLS-intercepting proxy's CA must be trusted for PyPI; mounted, never baked in.
        args += ["-v", f"{HOST_CA_DIR}:/usr/local/share/ca-certificates/lab-host:ro"]
    return args


def wait_ssh(node: Node, deadline: float) -> None:
    """systemd boots in a few seconds; the host is ready when SSH runs a command."""
    while True:
        try:
            with socket.create_connection((node.mgmt_ip, 22), timeout=2):
                pass
            proc = subprocess.run(ssh_cmd(node.mgmt_ip, "true"), capture_output=True, timeout=20)
            if proc.returncode == 0:
                return
        except (OSError, subprocess.TimeoutExpired):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"lab: {node.name} ({node.mgmt_ip}) did not answer SSH in time")
        time.sleep(0.5)


def ssh_cmd(ip: str, *command: str) -> list[str]:
    return [
        "ssh",
        "-i",
        str(KEY),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        f"root@{ip}",
        *command,
    ]


def emulator_cmd(workdir: Path, hostname: str, username: str, password: str, pid_file: str = "pid") -> list[str]:
    """The emulator's command line on loopback (random port, written to <workdir>/port), state in workdir.
    The lab, the switch tests and the switch benchmark all start it this way."""
    return [
        sys.executable,
        "-m",
        "lab.nxos_emu",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--port-file",
        str(workdir / "port"),
        "--pid-file",
        str(workdir / pid_file),
        "--state-file",
        str(workdir / "state.json"),
        "--hostname",
        hostname,
        "--username",
        username,
        "--password",
        password,
    ]


def start_emulator(hostname: str, directory: Path, pid_file: str = "emulator.pid") -> int:
    """Start one NX-OS emulator on loopback (random port) with its state in `directory`; its port.
    Already running (pid file alive, port known): its port."""
    pid, port = _emulator_pid(directory, pid_file), _emulator_port(directory)
    if pid is not None and port:
        return port
    directory.mkdir(parents=True, exist_ok=True)
    portfile = directory / "port"
    portfile.unlink(missing_ok=True)
    cmd = emulator_cmd(directory, hostname, "admin", "rdma-lab", pid_file=pid_file)
    logf = open(directory / "emulator.log", "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    (directory / pid_file).write_text(str(proc.pid))
    for _ in range(200):
        if portfile.exists() and portfile.read_text().strip():
            return int(portfile.read_text().strip())
        if proc.poll() is not None:
            raise SystemExit(
                f"lab: the switch emulator {hostname} exited (rc {proc.returncode}); see {directory / 'emulator.log'}"
            )
        time.sleep(0.1)
    raise SystemExit(f"lab: the switch emulator {hostname} did not report its port")


def start_switch() -> int | None:
    """Start the NX-OS emulator on loopback (random port) as the lab's switch."""
    if not emulator_available():
        return None
    return start_emulator(SWITCH_NAME, SWITCH_DIR)


@dataclass(frozen=True)
class FabricSwitch:
    """One emulated Nexus of a leaf-spine lab and its RoCE ports (nxos_roce_qos item form)."""

    name: str
    group: str  # leaves | spines
    host_interfaces: tuple[dict, ...]
    uplink_interfaces: tuple[dict, ...]

    @property
    def directory(self) -> Path:
        return FABRIC_DIR / self.name


def fabric_plan(nodes: list[Node], leaves: int, spines: int) -> list[FabricSwitch]:
    """Leaves lab-leaf1..L and spines lab-spine1..S. Host i goes to leaf ((i-1) mod L) + 1 on its next
    free port from Ethernet1/1; leaf l reaches spine s on Ethernet1/(9-s), spine s reaches leaf l on
    Ethernet1/l. Every RoCE port, host-facing or uplink, gets the same policy."""
    if leaves < 1 or spines < 0 or leaves > EMULATOR_PORTS or spines > EMULATOR_PORTS // 2:
        raise SystemExit(f"lab: --leaves must be 1..{EMULATOR_PORTS} and --spines 0..{EMULATOR_PORTS // 2}")
    per_leaf = -(-len(nodes) // leaves)
    if per_leaf + spines > EMULATOR_PORTS:
        raise SystemExit(f"lab: {len(nodes)} hosts on {leaves} leaves with {spines} spines need more than 8 ports")
    switches = []
    for leaf in range(1, leaves + 1):
        mine = [n for n in nodes if (n.index - 1) % leaves == leaf - 1]
        hosts = tuple(
            {"name": f"Ethernet1/{k}", "description": f"{n.name} {FABRIC_IFNAME}"} for k, n in enumerate(mine, 1)
        )
        uplinks = tuple(
            {"name": f"Ethernet1/{EMULATOR_PORTS + 1 - s}", "description": f"lab-spine{s} Ethernet1/{leaf}"}
            for s in range(1, spines + 1)
        )
        switches.append(FabricSwitch(f"lab-leaf{leaf}", "leaves", hosts, uplinks))
    for spine in range(1, spines + 1):
        downlinks = tuple(
            {"name": f"Ethernet1/{leaf}", "description": f"lab-leaf{leaf} Ethernet1/{EMULATOR_PORTS + 1 - spine}"}
            for leaf in range(1, leaves + 1)
        )
        switches.append(FabricSwitch(f"lab-spine{spine}", "spines", (), downlinks))
    return switches


def lldp_wiring(nodes: list[Node], fabric: list[FabricSwitch] | None) -> dict[str, dict]:
    """What LLDP sees on each switch port of the lab's cables, {switch: {port: neighbour}}: a host's lldpd (its
    name, its fabric interface as port id: lldpd's `portidsubtype ifname`), a switch's (its name, its port). The
    single switch has node i on Ethernet1/i (inventory/lab/group_vars/switches); a fabric, what fabric_plan wired,
    read back from its port descriptions (`<peer> <port>`)."""
    if not fabric:
        return {
            SWITCH_NAME: {
                f"Ethernet1/{i}": {"system_name": n.name, "port_id": FABRIC_IFNAME, "port_description": FABRIC_IFNAME}
                for i, n in enumerate(nodes, 1)
            }
        }
    wiring = {}
    for sw in fabric:
        wiring[sw.name] = {}
        for item in (*sw.host_interfaces, *sw.uplink_interfaces):
            peer, port = item["description"].split()[:2]
            wiring[sw.name][item["name"]] = {"system_name": peer, "port_id": port, "port_description": port}
    return wiring


def write_lldp(wiring: dict[str, dict]) -> None:
    """Each emulator's lldp.json (re-read at every `show lldp neighbors detail`)."""
    for name, ports in wiring.items():
        directory = SWITCH_DIR if name == SWITCH_NAME else FABRIC_DIR / name
        if directory.is_dir():
            (directory / "lldp.json").write_text(json.dumps(ports, indent=1))


def fabric_inventory(switches: list[FabricSwitch], ports: dict[str, int]) -> list[str]:
    """The `switches` group of the lab inventory for a leaf-spine lab (children leaves and spines),
    each switch with its own port lists; the policy itself comes from group_vars/switches."""
    lines = ["    switches:", "      children:"]
    for group in ("leaves", "spines"):
        members = [sw for sw in switches if sw.group == group]
        if not members:
            continue
        lines += [f"        {group}:", "          hosts:"]
        for sw in members:
            lines += [
                f"            {sw.name}:",
                "              ansible_host: 127.0.0.1",
                f"              ansible_port: {ports[sw.name]}",
                f"              nxos_roce_qos_host_interfaces: {json.dumps(list(sw.host_interfaces))}",
                f"              nxos_roce_qos_uplink_interfaces: {json.dumps(list(sw.uplink_interfaces))}",
            ]
    return lines


def start_fabric(switches: list[FabricSwitch]) -> dict[str, int]:
    """Start (or find running) one emulator per fabric switch, in parallel; {name: port}."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(switches)) as pool:
        ports = list(pool.map(lambda sw: start_emulator(sw.name, sw.directory), switches))
    return {sw.name: port for sw, port in zip(switches, ports, strict=True)}


def stop_fabric() -> None:
    """Stop every fabric emulator and forget its state (the next lab starts factory-fresh)."""
    if not FABRIC_DIR.is_dir():
        return
    for directory in sorted(p for p in FABRIC_DIR.iterdir() if p.is_dir()):
        stop_emulator(directory)
        shutil.rmtree(directory, ignore_errors=True)


def switch_inventory(directory: Path, switches: dict[str, dict], lab_group_vars: bool = True) -> Path:
    """An inventory of the lab's two node names and the given switches ({name: host vars}), with the committed
    lab group_vars beside it (as `lab up` has them): the switch tests' and bench_switch.py's."""
    import yaml  # the venv's (lab down runs without it)

    directory.mkdir(parents=True, exist_ok=True)
    hosts = {
        "all": {
            "children": {
                "rdma_nodes": {"hosts": {"lab-node1": None, "lab-node2": None}},
                "switches": {"hosts": switches},
            }
        }
    }
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    if lab_group_vars and not (directory / "group_vars").exists():
        (directory / "group_vars").symlink_to(ROOT / "inventory" / "lab" / "group_vars")
    return directory / "hosts.yml"


def write_inventory(nodes: list[Node], *args, **kwargs) -> None:
    """inventory_text's hosts.yml (same arguments), written where the lab's playbooks read it."""
    INVENTORY.write_text(inventory_text(nodes, *args, **kwargs))


def inventory_text(
    nodes: list[Node],
    switch_port_: int | None,
    fabric: list[FabricSwitch] | None = None,
    ports: dict | None = None,
    rails: int = 1,
    slurm: bool = True,
) -> str:
    """The lab inventory (hosts.yml): the nodes, the Slurm controller (the first node; none with slurm=False:
    the Slurm play then runs nowhere), and the single switch or the leaf-spine fabric."""
    lines = [
        "---",
        "# Written by `python -m lab up`; removed by `lab down`. Do not edit: group_vars/ beside it",
        "# holds the lab's settings. Same groups and variables as inventory/example.",
        "all:",
        "  children:",
        "    rdma_nodes:",
        "      vars:",
        "        ansible_user: root",
        f"        ansible_ssh_private_key_file: {KEY}",
        "      hosts:",
    ]
    for n in nodes:
        lines += [
            f"        {n.name}:",
            f"          ansible_host: {n.mgmt_ip}",
            "          cluster_fabric_interfaces:",
        ]
        for r in range(rails):
            lines += [
                f"            - name: {rail_ifname(r)}",
                f"              addresses: [{n.rail_cidr(r)}]",
                f"              mtu: {FABRIC_MTU}",
            ]
    lines += ["    subnet_managers:", "      hosts:", f"        {nodes[0].name}:"]
    lines += ["    slurm_controllers:", "      hosts:" + ("" if slurm else " {}")]
    lines += [f"        {nodes[0].name}:"] if slurm else []
    if fabric:
        lines += fabric_inventory(fabric, ports or {})
    elif switch_port_:
        lines += [
            "    switches:",
            "      hosts:",
            f"        {SWITCH_NAME}:",
            "          ansible_host: 127.0.0.1",
            f"          ansible_port: {switch_port_}",
        ]
    else:
        lines += ["    switches:", "      hosts: {}"]
    return "\n".join(lines) + "\n"


def up(n_hosts: int, leaves: int = 1, spines: int = 0, rails: int = 1, slurm: bool = True) -> dict:
    """Hosts, networks and the switch. One leaf and no spine (the default) is the single `lab-switch`;
    more make a leaf-spine fabric of emulators (lab-leaf1.., lab-spine1..) in the inventory. `rails` fabric
    NICs per host (rdma0..): a host of another shape is started again. `slurm`: the first node is the Slurm
    controller (site.yml's Slurm play runs), its vault password file written (lab/vault.py)."""
    if not 1 <= n_hosts <= MAX_HOSTS:
        raise SystemExit(f"lab: --hosts must be 1..{MAX_HOSTS}, got {n_hosts}")
    if (leaves, spines) == (1, 0) and n_hosts > EMULATOR_PORTS:
        raise SystemExit(
            f"lab: one switch has {EMULATOR_PORTS} ports, {n_hosts} hosts need leaves: --leaves "
            f"{-(-n_hosts // (EMULATOR_PORTS - 1))} --spines 1"
        )
    if not 1 <= rails <= MAX_RAILS:
        raise SystemExit(f"lab: --rails must be 1..{MAX_RAILS}, got {rails}")
    t0 = time.monotonic()
    nodes = [Node(i) for i in range(1, n_hosts + 1)]
    fabric = fabric_plan(nodes, leaves, spines) if (leaves, spines) != (1, 0) else None
    image = ensure_image(log)
    want = {n.name for n in nodes}
    running = {c["Names"][0]: c for c in containers()}
    # Stale or surplus lab hosts (a crashed run, a different size or number of rails) go first.
    stale = [
        name
        for name, c in running.items()
        if name not in want
        or c.get("State") != "running"
        or (c.get("Labels") or {}).get(RAILS_LABEL, "1") != str(rails)
    ]
    if stale:
        log(f"lab: removing stale host(s): {' '.join(sorted(stale))}")
        podman.run("rm", "-f", "-t", "5", *stale)
    ensure_key()
    ensure_networks(rails)
    todo = [n for n in nodes if n.name not in running or n.name in stale]
    for n in todo:
        start_node(n, image, rails)
    log(f"lab: {len(todo)} host(s) started, {len(nodes) - len(todo)} already running; waiting for SSH")
    deadline = time.monotonic() + 120
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(lambda n: wait_ssh(n, deadline), nodes))
    if fabric:
        # A lab changes shape: the single switch or an earlier fabric goes first.
        stop_switch()
        stop_fabric()
        ports = start_fabric(fabric) if emulator_available() else {}
        port = None
    else:
        stop_fabric()
        ports = {}
        port = start_switch()
    write_lldp(lldp_wiring(nodes, fabric if ports else None))
    vault.password_file()
    write_inventory(nodes, port, fabric if ports else None, ports, rails, slurm)
    state = {
        "hosts": [n.name for n in nodes],
        "rails": rails,
        "slurm": slurm,
        "switch_port": port,
        "fabric": ports,
        "inventory": str(INVENTORY),
        "seconds": round(time.monotonic() - t0, 1),
    }
    (STATE_ROOT / "state.json").write_text(json.dumps(state, indent=2))
    log(
        f"lab: up in {state['seconds']} s: {len(nodes)} host(s)"
        + (f" with {rails} fabric NICs each ({', '.join(rail_ifname(r) for r in range(rails))})" if rails > 1 else "")
        + (f", switch on 127.0.0.1:{port}" if port else "")
        + (f", switches {', '.join(f'{n} on 127.0.0.1:{p}' for n, p in ports.items())}" if ports else "")
        + ("" if port or ports else ", no switch emulator yet")
        + f"; inventory {INVENTORY.relative_to(ROOT)}"
    )
    return state


def status() -> int:
    rows = containers()
    fabric = fabric_emulators()
    if not rows and not networks() and switch_pid() is None and not fabric:
        log("lab: down (no container, network or emulator)")
        return 1
    for c in sorted(rows, key=lambda c: c["Names"][0]):
        nets = ",".join(sorted(c.get("Networks") or []))
        log(f"  {c['Names'][0]:12} {c.get('State', '?'):10} {nets}")
    for net in networks():
        log(f"  network {net}")
    pid = switch_pid()
    if pid:
        log(f"  switch {SWITCH_NAME} emulator pid {pid} on 127.0.0.1:{switch_port()}")
    for name, (fpid, fport) in fabric.items():
        log(f"  switch {name} emulator pid {fpid} on 127.0.0.1:{fport}")
    if INVENTORY.exists():
        log(f"  inventory {INVENTORY.relative_to(ROOT)}")
    return 0
