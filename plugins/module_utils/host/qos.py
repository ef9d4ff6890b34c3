"""Host-side RoCE QoS rules: DCB (app/PFC/ETS via iproute2 `dcb`), DCQCN and the CNPs' DSCP and priority (mlx5
sysfs or debugfs), RDMA-CM ToS (configfs), and what NCCL and the TCP marking get from them.

Read the current state, plan what differs from the wanted state, apply it (not in check mode) and report per
NIC what was set, what already matched and what the hardware cannot do. Every change notes how to undo it
(`Host.undo`: the value it found, as a reset_record undo operation): the module records those the first time,
before it changes anything, so playbooks/reset.yml puts the NIC back as the project found it. Every path starts at
`root` and every command goes through one runner, so the RDMA branch runs in unit tests against fake
sysfs/configfs/debugfs trees and recorded `dcb` outputs. The module rdma_llm.cluster.rdma_qos runs `apply` and
returns the ToS, NCCL's environment and the DSCP of fabric TCP (the role's fact and nftables rules take them from
there); the filter rdma_llm.cluster.rdma_qos_fabric_networks gives the networks the TCP marking matches.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import roce_tos

Runner = Callable[[list[str]], tuple[int, str, str]]

NOT_SUPPORTED = ("Operation not supported", "not supported", "EOPNOTSUPP")
ARPHRD_ETHER = "1"
ARPHRD_INFINIBAND = "32"


# ----------------------------------------------------------------------------------------- parsing
def parse_dcb(text: str) -> dict[str, object]:
    """Parse `dcb -N <object> show dev X` text output.

    Lines are either a map (`prio-pfc 0:off 1:off ... 3:on`; keys and values kept as strings, keys
    repeated for `dscp-prio` where one DSCP may map to several priorities) or key/value pairs
    (`pfc-cap 8 macsec-bypass off delay 4096`).
    """
    out: dict[str, object] = {}
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        name, rest = words[0].rstrip(":"), words[1:]
        if rest and all(":" in w for w in rest):
            out[name] = [tuple(w.split(":", 1)) for w in rest]
        elif len(words) % 2 == 0:
            out.update(dict(zip(words[::2], words[1::2], strict=True)))
        elif not rest:
            out[name] = []
    return out


def as_map(pairs: object) -> dict[str, str]:
    return dict(pairs) if isinstance(pairs, list) else {}


# ----------------------------------------------------------------------------------------- wanted state
@dataclass(frozen=True)
class Wanted:
    """The host's QoS as the switch has it: three classes with a share each (RoCE no-drop, fabric TCP lossy,
    default), CNPs strict; the profile decides ECN in the ToS and DCQCN."""

    roce_dscp: int
    cnp_dscp: int
    tcp_dscp: int
    pfc_priority: int
    cnp_priority: int
    tcp_priority: int
    roce_bandwidth: int
    tcp_bandwidth: int
    default_bandwidth: int
    profile: str = "dcqcn"
    tcp_lossless: bool = False

    @property
    def tos(self) -> int:
        return roce_tos(self.roce_dscp, self.profile)

    @property
    def tcp_mark_dscp(self) -> int:
        """What fabric TCP is marked with: its own lossy class, or RoCE's no-drop one where cluster_tcp_lossless
        opts in (then TCP shares PFC's pauses with RoCE: the references keep it out, see the README)."""
        return self.roce_dscp if self.tcp_lossless else self.tcp_dscp

    @property
    def dcqcn(self) -> bool:
        return self.profile == "dcqcn"

    def dscp_prio(self) -> dict[int, int]:
        return {self.roce_dscp: self.pfc_priority, self.cnp_dscp: self.cnp_priority, self.tcp_dscp: self.tcp_priority}

    def prio_pfc(self) -> dict[str, str]:
        return {str(p): "on" if p == self.pfc_priority else "off" for p in range(8)}

    def ets(self) -> dict[str, dict[str, str]]:
        """ETS as the switch queues: CNP class strict; RoCE, fabric TCP and the default class share by the switch's
        percentages."""
        bw = {tc: 0 for tc in range(8)}
        bw[0] += self.default_bandwidth
        bw[self.pfc_priority] += self.roce_bandwidth
        bw[self.tcp_priority] += self.tcp_bandwidth
        own = {self.pfc_priority, self.cnp_priority, self.tcp_priority}
        return {
            # Like the switch: RoCE, CNPs and fabric TCP get their own class, every other priority shares class 0.
            "prio-tc": {str(p): str(p if p in own else 0) for p in range(8)},
            "tc-tsa": {str(tc): "strict" if tc == self.cnp_priority else "ets" for tc in range(8)},
            "tc-bw": {str(tc): str(bw[tc]) for tc in range(8)},
        }


def nccl_env(link_layer: str, tos: int, ib_sl: int, qps_per_connection: int) -> dict[str, str]:
    """What NCCL gets from the host's QoS (the fact's nccl_env): the traffic class of its RoCE QPs, or the service
    level on InfiniBand, and the QPs per connection (more than one spreads a connection over ECMP paths)."""
    env = {"NCCL_IB_SL": str(ib_sl)} if link_layer == "infiniband" else {"NCCL_IB_TC": str(tos)}
    env["NCCL_IB_QPS_PER_CONNECTION"] = str(qps_per_connection)
    return env


# ----------------------------------------------------------------------------------------- host access
def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@dataclass
class Host:
    root: str
    run: Runner
    check_mode: bool = False
    commands: list[str] = field(default_factory=list)
    boot: list[str] = field(default_factory=list)
    # How to put back each value a change replaces (module_utils/host/reset/undo.py operations), in change order.
    undo: list[dict] = field(default_factory=list)
    # configfs populates a new rdma_cm/<dev> directory with its ports, and a debugfs write can change a second
    # attribute (cong.c); tests pass a mkdir and a write that do the same.
    make_dir: Callable[[str], None] = os.mkdir
    write_file: Callable[[str, str], None] = _write_text

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read(self, *parts: str) -> str | None:
        try:
            with open(self.path(*parts), encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError:
            return None

    def listdir(self, *parts: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(*parts)), key=lambda n: (len(n), n))
        except OSError:
            return []

    def change(self, argv: list[str]) -> None:
        """Run a changing command (not in check mode); a failure on capable hardware is an error."""
        line = shlex.join(argv)
        self.commands.append(line)
        if self.check_mode:
            return
        rc, out, err = self.run(argv)
        if rc != 0:
            raise QosError(f"`{line}` failed (rc {rc}): {(err or out).strip()}")

    def write(self, value: str, *parts: str) -> None:
        """Write a sysfs/configfs attribute; the real path goes in the report, the root-less one in scripts."""
        rel = "/" + os.path.join(*parts)
        self.commands.append(f"echo {value} > {rel}")
        previous = self.read(*parts)
        if previous is not None:
            self.undo.append({"key": rel, "write": rel, "value": previous})
        if self.check_mode:
            return
        try:
            self.write_file(self.path(*parts), f"{value}\n")
        except OSError as exc:
            raise QosError(f"writing {value} to {rel} failed: {exc.strerror or exc}") from exc

    def mkdir(self, *parts: str) -> None:
        rel = "/" + os.path.join(*parts)
        self.commands.append(f"mkdir {rel}")
        self.undo.append({"key": rel, "rmdir": rel})
        if self.check_mode:
            return
        try:
            self.make_dir(self.path(*parts))
        except OSError as exc:
            raise QosError(f"mkdir {rel} failed: {exc.strerror or exc}") from exc


class QosError(Exception):
    pass


def link_kind(host: Host, ifname: str) -> tuple[str, str | None]:
    """('physical', driver) for a NIC with a device, else ('virtual', kind such as veth)."""
    driver_link = host.path("sys/class/net", ifname, "device", "driver")
    if os.path.islink(driver_link) or os.path.isdir(driver_link):
        return "physical", os.path.basename(os.path.realpath(driver_link))
    rc, out, _ = host.run(["ip", "-details", "-json", "link", "show", "dev", ifname])
    try:
        info = json.loads(out)[0].get("linkinfo", {}) if rc == 0 else {}
    except (ValueError, IndexError, AttributeError):
        info = {}
    if info.get("info_kind"):
        return "virtual", str(info["info_kind"])
    return "virtual", "no device"


# ----------------------------------------------------------------------------------------- DCB
def dcb_show(host: Host, obj: str, ifname: str) -> tuple[str, dict[str, object] | None]:
    """('ok', parsed) or ('unsupported', None); other errors raise."""
    rc, out, err = host.run(["dcb", "-N", obj, "show", "dev", ifname])
    if rc == 0:
        return "ok", parse_dcb(out)
    if any(s in (err + out) for s in NOT_SUPPORTED):
        return "unsupported", None
    raise QosError(f"`dcb {obj} show dev {ifname}` failed (rc {rc}): {(err or out).strip()}")


def plan_app(current: dict[str, object], w: Wanted) -> list[str] | None:
    """Arguments of `dcb app replace` when the DSCP table lacks a wanted mapping (or has extra ones for it)."""
    have: dict[int, set[int]] = {}
    for dscp, prio in current.get("dscp-prio", []) or []:
        have.setdefault(int(dscp), set()).add(int(prio))
    want = w.dscp_prio()
    if all(have.get(d) == {p} for d, p in want.items()):
        return None
    return ["dscp-prio", *[f"{d}:{p}" for d, p in sorted(want.items())]]


def plan_pfc(current: dict[str, object], w: Wanted) -> list[str] | None:
    if as_map(current.get("prio-pfc")) == w.prio_pfc():
        return None
    return ["prio-pfc", "all:off", f"{w.pfc_priority}:on"]


def plan_ets(current: dict[str, object], w: Wanted) -> list[str] | None:
    want = w.ets()
    if all(as_map(current.get(k)) == v for k, v in want.items()):
        return None
    args: list[str] = []
    for key, mapping in want.items():
        args += [key, *[f"{k}:{v}" for k, v in mapping.items()]]
    return args


def dcb_undo(obj: str, ifname: str, current: dict[str, object], w: Wanted) -> list[dict]:
    """reset_record undo operations that take one DCB object back to `current` after the role's change: the APP
    entries it replaced (`replace` with the old priorities, `del` of those it added), PFC and ETS as they were."""
    if obj == "app":
        have: dict[int, list[int]] = {}
        for dscp, prio in current.get("dscp-prio", []) or []:
            have.setdefault(int(dscp), []).append(int(prio))
        want = sorted(w.dscp_prio().items())
        added = [f"{d}:{p}" for d, p in want if d not in have]
        replaced = [f"{d}:{q}" for d, _ in want if d in have for q in sorted(have[d])]
        ops = []
        if replaced:
            ops.append(
                {
                    "key": f"dcb app {ifname} replace",
                    "argv": ["dcb", "app", "replace", "dev", ifname, "dscp-prio", *replaced],
                }
            )
        if added:
            ops.append(
                {"key": f"dcb app {ifname} del", "argv": ["dcb", "app", "del", "dev", ifname, "dscp-prio", *added]}
            )
        return ops
    keys = ("prio-pfc",) if obj == "pfc" else ("prio-tc", "tc-tsa", "tc-bw")
    args: list[str] = []
    for key in keys:
        mapping = as_map(current.get(key))
        if mapping:
            args += [key, *[f"{k}:{v}" for k, v in mapping.items()]]
    return [{"key": f"dcb {obj} {ifname}", "argv": ["dcb", obj, "set", "dev", ifname, *args]}] if args else []


def dcb_interface(host: Host, ifname: str, w: Wanted, kind: tuple[str, str | None]) -> dict[str, str]:
    """Apply app/PFC/ETS on one NIC; returns {feature: state} with state set|ok|'not supported …'."""
    result: dict[str, str] = {}
    where = f"{ifname} ({kind[1]})"
    if kind[0] != "physical":
        return dict.fromkeys(("app", "pfc", "ets"), f"not supported on {where}")
    for obj, planner, verb in (("app", plan_app, "replace"), ("pfc", plan_pfc, "set"), ("ets", plan_ets, "set")):
        status, current = dcb_show(host, obj, ifname)
        if status == "unsupported":
            result[obj] = f"not supported on {where}"
            continue
        full = planner({}, w)  # the whole wanted state, for the boot script
        host.boot.append(shlex.join(["dcb", obj, verb, "dev", ifname, *(full or [])]))
        args = planner(current or {}, w)
        if args is None:
            result[obj] = "ok"
        else:
            host.undo += dcb_undo(obj, ifname, current or {}, w)
            host.change(["dcb", obj, verb, "dev", ifname, *args])
            result[obj] = "set"
    return result


# ----------------------------------------------------------------------------------------- DCQCN
def dcqcn_interface(host: Host, ifname: str, w: Wanted) -> str:
    """DCQCN's notification and reaction points on the no-drop priority: on under dcqcn, off under pfc_only, where
    the MLNX_OFED/DOCA driver has ecn/roce_np|roce_rp (the inbox mlx5 driver has no per-priority switch)."""
    base = ("sys/class/net", ifname, "ecn")
    if not os.path.isdir(host.path(*base)):
        return f"not exposed on {ifname} (no {'/' + '/'.join(base)}; the NIC's firmware default applies)"
    want = "1" if w.dcqcn else "0"
    state = "ok"
    for point in ("roce_np", "roce_rp"):
        attr = (*base, point, "enable", str(w.pfc_priority))
        if not os.path.exists(host.path(*attr)):
            return f"not exposed on {ifname} (no /{'/'.join(attr)})"
        host.boot.append(f"echo {want} > /{'/'.join(attr)}")
        if host.read(*attr) != want:
            host.write(want, *attr)
            state = "set"
    return state


PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def cnp_attributes(host: Host, ifname: str, w: Wanted) -> list[tuple[tuple[str, ...], int, bool]]:
    """Where the driver takes the DSCP and 802.1p priority of the CNPs this NIC sends: [(path, wanted value, write
    even if it reads so)], [] where it has no such files (bnxt_re, irdma keep congestion control elsewhere).
    MLNX_OFED/DOCA: sysfs ecn/roce_np/cnp_dscp and cnp_802p_prio. Inbox mlx5_ib (drivers/infiniband/hw/mlx5/cong.c):
    debugfs mlx5/<pci>/cc_params np_cnp_dscp and np_cnp_prio; np_cnp_prio_mode 1 ignores np_cnp_prio, and writing
    np_cnp_prio sets the mode to 0, so a mode of 1 rewrites the priority."""
    ofed = ("sys/class/net", ifname, "ecn", "roce_np")
    if all(os.path.isfile(host.path(*ofed, f)) for f in ("cnp_dscp", "cnp_802p_prio")):
        return [((*ofed, "cnp_dscp"), w.cnp_dscp, False), ((*ofed, "cnp_802p_prio"), w.cnp_priority, False)]
    pci = os.path.basename(os.path.realpath(host.path("sys/class/net", ifname, "device")))
    cc = ("sys/kernel/debug/mlx5", pci, "cc_params")
    if PCI_ADDRESS.fullmatch(pci) and all(
        os.path.isfile(host.path(*cc, f)) for f in ("np_cnp_dscp", "np_cnp_prio", "np_cnp_prio_mode")
    ):
        mode_ignores_prio = host.read(*cc, "np_cnp_prio_mode") != "0"
        return [((*cc, "np_cnp_dscp"), w.cnp_dscp, False), ((*cc, "np_cnp_prio"), w.cnp_priority, mode_ignores_prio)]
    return []


def cnp_interface(host: Host, ifname: str, w: Wanted) -> str:
    """The CNPs' DSCP and priority, which the switch classifies into its strict CNP class (the firmware sends
    priority 6 unless told): set, ok or not exposed."""
    attrs = cnp_attributes(host, ifname, w)
    if not attrs:
        return (
            f"not exposed on {ifname} (no /sys/class/net/{ifname}/ecn/roce_np/cnp_dscp nor mlx5 debugfs cc_params; "
            "the NIC's firmware default applies)"
        )
    state = "ok"
    for attr, value, force in attrs:
        host.boot.append(f"echo {value} > /{'/'.join(attr)}")
        if force or host.read(*attr) != str(value):
            if force:  # the driver's write also sets np_cnp_prio_mode to 0: the mode goes back after the priority
                mode = (*attr[:-1], "np_cnp_prio_mode")
                rel = "/" + "/".join(mode)
                host.undo.append({"key": rel, "write": rel, "value": host.read(*mode)})
            host.write(str(value), *attr)
            state = "set"
    return state


# ----------------------------------------------------------------------------------------- RDMA-CM ToS
def roce_ports(host: Host, wanted_devices: list[str]) -> list[tuple[str, str]]:
    ports = []
    for dev in host.listdir("sys/class/infiniband"):
        if wanted_devices and dev not in wanted_devices:
            continue
        for port in host.listdir("sys/class/infiniband", dev, "ports"):
            if (host.read("sys/class/infiniband", dev, "ports", port, "link_layer") or "").lower() == "ethernet":
                ports.append((dev, port))
    return ports


def tos_port(host: Host, dev: str, port: str, w: Wanted) -> str:
    cm = ("sys/kernel/config/rdma_cm",)
    if not os.path.isdir(host.path(*cm)):
        return "not available: /sys/kernel/config/rdma_cm is absent (configfs not mounted or rdma_cm not loaded)"
    dev_dir = (*cm, dev)
    attr = (*dev_dir, "ports", port, "default_roce_tos")
    host.boot.append(f"mkdir -p /{'/'.join(dev_dir)}")
    host.boot.append(f"echo {w.tos} > /{'/'.join(attr)}")
    state = "ok"
    if not os.path.isdir(host.path(*dev_dir)):
        host.mkdir(*dev_dir)
        state = "set"
        if host.check_mode:
            return state
    if host.read(*attr) != str(w.tos):
        host.write(str(w.tos), *attr)
        state = "set"
    return state


# ----------------------------------------------------------------------------------------- driver
def apply(
    host: Host,
    interfaces: list[str],
    w: Wanted,
    devices: list[str] | None = None,
    do_dcb: bool = True,
    do_dcqcn: bool = True,
    do_tos: bool = True,
) -> dict:
    report: list[str] = []
    unsupported: list[str] = []
    per_if = []
    for ifname in interfaces:
        if not os.path.isdir(host.path("sys/class/net", ifname)):
            raise QosError(f"interface {ifname} does not exist")
        link_type = host.read("sys/class/net", ifname, "type")
        entry: dict[str, object] = {"name": ifname}
        if link_type == ARPHRD_INFINIBAND:
            entry.update(kind="infiniband", driver=None)
            msg = f"dcb: not applicable on {ifname} (InfiniBand: QoS is SL/VL, set by OpenSM's QoS policy)"
            report.append(msg)
            per_if.append(entry)
            continue
        kind = link_kind(host, ifname)
        entry.update(kind=kind[0], driver=kind[1])
        if do_dcb:
            states = dcb_interface(host, ifname, w, kind)
            entry["dcb"] = states
            bad = sorted({s for s in states.values() if s.startswith("not supported")})
            if bad and len({states[k] for k in states}) == 1:
                unsupported.append(f"dcb: {bad[0]}")
            else:
                unsupported += [f"dcb {k}: {s}" for k, s in states.items() if s.startswith("not supported")]
            report.append(f"dcb on {ifname}: " + ", ".join(f"{k} {s}" for k, s in states.items()))
        if do_dcqcn:
            state = dcqcn_interface(host, ifname, w)
            entry["dcqcn"] = state
            if state.startswith("not"):
                unsupported.append(f"dcqcn: {state}")
            want = "on" if w.dcqcn else "off"
            report.append(f"dcqcn {want} ({w.profile}) on {ifname} priority {w.pfc_priority}: {state}")
            cnp = cnp_interface(host, ifname, w)
            entry["cnp"] = cnp
            if cnp.startswith("not"):
                unsupported.append(f"cnp: {cnp}")
            report.append(f"cnp DSCP {w.cnp_dscp} priority {w.cnp_priority} on {ifname}: {cnp}")
        per_if.append(entry)
    per_dev = []
    if do_tos:
        ports = roce_ports(host, devices or [])
        if not ports:
            msg = "default_roce_tos: no RoCE device found (/sys/class/infiniband has no Ethernet port)"
            unsupported.append(msg)
            report.append(msg)
        for dev, port in ports:
            state = tos_port(host, dev, port, w)
            per_dev.append({"device": dev, "port": int(port), "default_roce_tos": w.tos, "state": state})
            if state.startswith("not"):
                unsupported.append(f"default_roce_tos on {dev}/{port}: {state}")
            report.append(f"default_roce_tos {w.tos} on {dev} port {port}: {state}")
    return {
        "changed": bool(host.commands),
        "roce_tos": w.tos,
        "tcp_mark_dscp": w.tcp_mark_dscp,
        "report": report,
        "unsupported": unsupported,
        "commands": host.commands,
        "boot_commands": host.boot,
        "interfaces": per_if,
        "devices": per_dev,
    }


def rdma_qos_fabric_networks(interfaces: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The fabric's networks (interface subnets and routed destinations), split by IP version."""
    nets: dict[str, list[str]] = {"ipv4": [], "ipv6": []}
    for interface in [i for i in interfaces or [] if isinstance(i, dict)]:
        cidrs = [_network(a) for a in interface.get("addresses", []) or []]
        cidrs += [_network(r.get("to")) for r in interface.get("routes", []) or [] if isinstance(r, dict)]
        for cidr in filter(None, cidrs):
            key = "ipv4" if ipaddress.ip_network(cidr).version == 4 else "ipv6"
            if cidr not in nets[key]:
                nets[key].append(cidr)
    return nets


def _network(value: Any) -> str | None:
    """The network of an address or route; None for what the inventory contract refuses (reported there, once)."""
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except (TypeError, ValueError):
        return None


# Filter name -> rule (plugins/filter/ exposes them as rdma_llm.cluster.<name>).
FILTERS = {"rdma_qos_fabric_networks": rdma_qos_fabric_networks}
