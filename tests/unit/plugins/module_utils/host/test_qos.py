"""rdma_qos logic on recorded `dcb` outputs and fake sysfs/configfs/debugfs trees (the lab has no DCB NIC, no RDMA).

The fake NIC keeps DCB state the way the kernel does and prints it the way iproute2's `dcb -N … show` does
(tests/fixtures/rdma_qos/README.md says where each recorded sample and each tree shape comes from), so a plan is
applied, read back and planned again: the second pass must change nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import qos, qos_values
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import qos as rules

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "rdma_qos"


# The lab's group_vars/all/qos.yml.
LAB = qos.Wanted(
    roce_dscp=26,
    cnp_dscp=48,
    tcp_dscp=10,
    pfc_priority=3,
    cnp_priority=7,
    tcp_priority=1,
    roce_bandwidth=50,
    tcp_bandwidth=25,
    default_bandwidth=25,
)
PFC_ONLY = dataclasses.replace(LAB, profile="pfc_only")
UNSUPPORTED = (FIXTURES / "dcb_show_veth_stderr.txt").read_text()


# ------------------------------------------------------------------------------------------ parser
def test_parse_pfc_man_page_output() -> None:
    got = qos.parse_dcb((FIXTURES / "dcb_pfc_show.txt").read_text())
    assert got["pfc-cap"] == "8" and got["macsec-bypass"] == "off" and got["delay"] == "4096"
    assert qos.as_map(got["prio-pfc"]) == {str(p): "on" if p in (6, 7) else "off" for p in range(8)}


@pytest.mark.parametrize("sample", ["dcb_ets_show_selected.txt", "dcb_ets_show_full.txt"])
def test_parse_ets_man_page_output(sample: str) -> None:
    got = qos.parse_dcb((FIXTURES / sample).read_text())
    assert qos.as_map(got["prio-tc"]) == {str(p): str(p) for p in range(8)}
    assert qos.as_map(got["tc-bw"])["2"] == "34"
    assert qos.as_map(got["tc-tsa"])["3"] == "strict"
    if sample.endswith("full.txt"):
        assert got["willing"] == "off" and got["ets-cap"] == "8"
        assert qos.as_map(got["reco-tc-tsa"])["0"] == "strict"


def test_parse_app_keeps_repeated_dscp() -> None:
    got = qos.parse_dcb((FIXTURES / "dcb_app_show_dscp_repeated.txt").read_text())
    assert got["dscp-prio"] == [("0", "0"), ("24", "2"), ("24", "3"), ("48", "6")]


def test_parse_empty_app_table() -> None:
    assert qos.parse_dcb("") == {}


# ------------------------------------------------------------------------------------------ plans
def test_app_plan_from_man_page_state() -> None:
    current = qos.parse_dcb((FIXTURES / "dcb_app_show_dscp_numeric.txt").read_text())
    assert qos.plan_app(current, LAB) == ["dscp-prio", "10:1", "26:3", "48:7"]
    assert qos.plan_app(qos.parse_dcb("dscp-prio 0:0 10:1 26:3 48:7 \n"), LAB) is None
    # Fabric TCP's DSCP missing (the two-class layout before the TCP class): planned.
    assert qos.plan_app(qos.parse_dcb("dscp-prio 0:0 26:3 48:7 \n"), LAB) is not None
    # A second priority for the RoCE DSCP is ambiguous: replace it.
    assert qos.plan_app(qos.parse_dcb("dscp-prio 26:3 26:5 48:7 \n"), LAB) is not None


def test_pfc_plan_only_the_nodrop_priority() -> None:
    current = qos.parse_dcb((FIXTURES / "dcb_pfc_show.txt").read_text())
    assert qos.plan_pfc(current, LAB) == ["prio-pfc", "all:off", "3:on"]
    done = "pfc-cap 8 macsec-bypass off delay 0 \nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
    assert qos.plan_pfc(qos.parse_dcb(done), LAB) is None


def test_ets_matches_the_switch_queuing() -> None:
    ets = LAB.ets()
    # CNP class strict (switch: priority level 1); RoCE, fabric TCP and default share 50/25/25 (bandwidth remaining).
    assert ets["tc-tsa"]["7"] == "strict" and ets["tc-bw"]["7"] == "0"
    assert (ets["tc-bw"]["3"], ets["tc-bw"]["1"], ets["tc-bw"]["0"]) == ("50", "25", "25")
    assert sum(int(b) for tc, b in ets["tc-bw"].items() if ets["tc-tsa"][tc] == "ets") == 100
    # Fabric TCP in its own class 1; every other priority shares class 0, as every other CoS the default queue.
    assert ets["prio-tc"] == {"0": "0", "1": "1", "2": "0", "3": "3", "4": "0", "5": "0", "6": "0", "7": "7"}
    current = qos.parse_dcb((FIXTURES / "dcb_ets_show_full.txt").read_text())
    args = qos.plan_ets(current, LAB)
    assert args[:9] == ["prio-tc", "0:0", "1:1", "2:0", "3:3", "4:0", "5:0", "6:0", "7:7"]


def test_tos_of_each_profile() -> None:
    """dcqcn: DSCP 26 with ECT(0), 106 (NVIDIA's `cma_roce_tos -t 106`); pfc_only: without ECT, 104."""
    assert LAB.tos == 106 and qos_values.roce_tos(26, "dcqcn") == 106
    assert PFC_ONLY.tos == 104 and qos_values.roce_tos(26, "pfc_only") == 104
    assert qos_values.roce_tos(24, "dcqcn") == 98 and qos_values.roce_tos(63, "pfc_only") == 252
    with pytest.raises(RuleError, match="profile 'lossless' must be one of dcqcn, pfc_only"):
        qos_values.roce_tos(26, "lossless")
    with pytest.raises(RuleError, match="DSCP 64 must lie within 0-63"):
        qos_values.roce_tos(64, "dcqcn")


def test_fabric_tcp_dscp_and_nccl_env() -> None:
    """Fabric TCP is marked with its own DSCP, never the RoCE one, unless cluster_tcp_lossless opts in."""
    assert LAB.tcp_mark_dscp == 10
    assert dataclasses.replace(LAB, tcp_lossless=True).tcp_mark_dscp == 26
    assert qos.nccl_env("ethernet", LAB.tos, 3, 1) == {"NCCL_IB_TC": "106", "NCCL_IB_QPS_PER_CONNECTION": "1"}
    assert qos.nccl_env("ethernet", PFC_ONLY.tos, 3, 4) == {"NCCL_IB_TC": "104", "NCCL_IB_QPS_PER_CONNECTION": "4"}
    assert qos.nccl_env("infiniband", LAB.tos, 3, 2) == {"NCCL_IB_SL": "3", "NCCL_IB_QPS_PER_CONNECTION": "2"}


# ------------------------------------------------------------------------------------------ fake host
class FakeNic:
    """DCB state of one capable NIC; answers `dcb -N <obj> show` and applies `set`/`replace` like the kernel."""

    def __init__(self) -> None:
        self.app: list[tuple[int, int]] = [(0, 0)]
        self.pfc = {p: False for p in range(8)}
        self.ets = {"prio-tc": dict.fromkeys(range(8), 0), "tc-tsa": dict.fromkeys(range(8), "ets"), "tc-bw": {}}
        self.ets["tc-bw"] = {tc: (100 if tc == 0 else 0) for tc in range(8)}

    def show(self, obj: str) -> str:
        if obj == "app":
            return "dscp-prio " + "".join(f"{d}:{p} " for d, p in self.app) + "\n" if self.app else ""
        if obj == "pfc":
            return "pfc-cap 8 macsec-bypass off delay 0 \nprio-pfc " + "".join(
                f"{p}:{'on' if on else 'off'} " for p, on in self.pfc.items()
            )
        lines = ["willing off ets-cap 8 cbs off "]
        for key in ("tc-bw", "tc-tsa", "prio-tc"):
            lines.append(key + " " + "".join(f"{k}:{v} " for k, v in self.ets[key].items()))
        return "\n".join(lines) + "\n"

    def change(self, obj: str, verb: str, args: list[str]) -> None:
        key = None
        for word in args:
            if ":" not in word:
                key = word
                continue
            k, v = word.split(":", 1)
            if obj == "app":
                dscp, prio = int(k), int(v)
                if verb == "del":
                    self.app = [(d, p) for d, p in self.app if (d, p) != (dscp, prio)]
                    continue
                if verb == "replace":
                    self.app = [(d, p) for d, p in self.app if d != dscp]
                self.app.append((dscp, prio))
            elif obj == "pfc":
                targets = range(8) if k == "all" else [int(k)]
                for p in targets:
                    self.pfc[p] = v == "on"
            else:
                targets = range(8) if k == "all" else [int(k)]
                for t in targets:
                    self.ets[key][t] = v if key == "tc-tsa" else int(v)


# The inbox mlx5_ib's debugfs cc_params files (drivers/infiniband/hw/mlx5/cong.c, mlx5_ib_dbg_cc_name[]).
CC_PARAMS = (
    "rp_clamp_tgt_rate", "rp_clamp_tgt_rate_ati", "rp_time_reset", "rp_byte_reset", "rp_threshold", "rp_ai_rate",
    "rp_max_rate", "rp_hai_rate", "rp_min_dec_fac", "rp_min_rate", "rp_rate_to_set_on_first_cnp", "rp_dce_tcp_g",
    "rp_dce_tcp_rtt", "rp_rate_reduce_monitor_period", "rp_initial_alpha_value", "rp_gd",
    "np_min_time_between_cnps", "np_cnp_dscp", "np_cnp_prio_mode", "np_cnp_prio",
)  # fmt: skip


class FakeHost:
    """A fake root with sysfs/configfs/debugfs and a runner for `dcb` and `ip`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nics: dict[str, FakeNic] = {}
        self.calls: list[list[str]] = []
        self.fail_set = False

    def add_veth(self, name: str) -> None:
        (self.root / "sys/class/net" / name).mkdir(parents=True)
        (self.root / "sys/class/net" / name / "type").write_text("1\n")

    def add_nic(
        self,
        name: str,
        driver: str,
        dcb: bool = True,
        ecn: bool = False,
        debugfs: bool = False,
        pci: str = "0000:3b:00.0",
    ) -> None:
        """A PCI NIC: the netdev's `device` link to its PCI function, whose `driver` links to the driver.
        ecn: MLNX_OFED/DOCA mlx5's ecn/ tree (DCQCN per priority, the CNPs' DSCP and priority); debugfs: the inbox
        mlx5_ib's cc_params (tests/fixtures/rdma_qos/README.md, "Trees"). Firmware defaults: DCQCN off in the
        files, CNP DSCP 48 and priority 6 (CNP_DSCP_P1, CNP_802P_PRIO_P1 of a ConnectX mlxconfig dump)."""
        net = self.root / "sys/class/net" / name
        device = self.root / "sys/devices/pci0000:3a" / pci
        drivers = self.root / "sys/bus/pci/drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        device.mkdir(parents=True)
        net.mkdir(parents=True)
        (net / "type").write_text("1\n")
        os.symlink(device, net / "device")
        os.symlink(drivers, device / "driver")
        if dcb:
            self.nics[name] = FakeNic()
        if ecn:
            for point in ("roce_np", "roce_rp"):
                (net / "ecn" / point / "enable").mkdir(parents=True)
                for p in range(8):
                    (net / "ecn" / point / "enable" / str(p)).write_text("0\n")
            (net / "ecn/roce_np/cnp_dscp").write_text("48\n")
            (net / "ecn/roce_np/cnp_802p_prio").write_text("6\n")
        if debugfs:
            cc = self.root / "sys/kernel/debug/mlx5" / pci / "cc_params"
            cc.mkdir(parents=True)
            for param in CC_PARAMS:
                (cc / param).write_text("0\n")
            # cnp_prio_mode 1: the port's default priority, np_cnp_prio ignored (a state the test starts from).
            for param, value in (("np_cnp_dscp", 48), ("np_cnp_prio", 6), ("np_cnp_prio_mode", 1)):
                (cc / param).write_text(f"{value}\n")

    def write(self, path: str, text: str) -> None:
        """Like the kernel: writing debugfs np_cnp_prio also sets np_cnp_prio_mode to 0 (cong.c,
        mlx5_ib_set_cc_param_mask_val)."""
        Path(path).write_text(text)
        if path.endswith("/cc_params/np_cnp_prio"):
            Path(path).with_name("np_cnp_prio_mode").write_text("0\n")

    def add_ipoib(self, name: str) -> None:
        (self.root / "sys/class/net" / name).mkdir(parents=True)
        (self.root / "sys/class/net" / name / "type").write_text("32\n")

    def add_rdma(self, dev: str, link_layer: str = "Ethernet", ports: int = 1) -> None:
        for port in range(1, ports + 1):
            d = self.root / "sys/class/infiniband" / dev / "ports" / str(port)
            d.mkdir(parents=True)
            (d / "link_layer").write_text(f"{link_layer}\n")

    def add_configfs(self) -> None:
        (self.root / "sys/kernel/config/rdma_cm").mkdir(parents=True)

    def configfs_mkdir(self, path: str) -> None:
        """Like configfs: a new rdma_cm/<dev> directory appears with its ports and a ToS of 0."""
        os.mkdir(path)
        dev = os.path.basename(path)
        for port in os.listdir(self.root / "sys/class/infiniband" / dev / "ports"):
            (Path(path) / "ports" / port).mkdir(parents=True)
            (Path(path) / "ports" / port / "default_roce_tos").write_text("0\n")

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[0] == "ip":
            if "veth" in argv[-1] or argv[-1].startswith("rdma"):
                return 0, (FIXTURES / "ip_link_veth.json").read_text().replace("eth0", argv[-1]), ""
            return 0, json.dumps([{"ifname": argv[-1]}]), ""
        assert argv[0] == "dcb", argv
        if argv[1] == "-N":
            obj, ifname = argv[2], argv[5]
            if ifname not in self.nics:
                return 1, "", UNSUPPORTED
            return 0, self.nics[ifname].show(obj), ""
        obj, verb, ifname, args = argv[1], argv[2], argv[4], argv[5:]
        if self.fail_set:
            return 1, "", "Error: Invalid argument\n"
        self.nics[ifname].change(obj, verb, args)
        return 0, "", ""

    def host(self, check_mode: bool = False):
        return qos.Host(
            root=str(self.root),
            run=self.run,
            check_mode=check_mode,
            make_dir=self.configfs_mkdir,
            write_file=self.write,
        )


def read(path: Path) -> str:
    return path.read_text().strip()


def test_lab_veth_is_reported_not_failed(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_veth("rdma0")
    result = qos.apply(fake.host(), ["rdma0"], LAB)
    assert not result["changed"] and result["commands"] == [] and result["boot_commands"] == []
    assert "dcb: not supported on rdma0 (veth)" in result["unsupported"]
    assert any(u.startswith("dcqcn: not exposed on rdma0") for u in result["unsupported"])
    assert any(u.startswith("cnp: not exposed on rdma0") for u in result["unsupported"])
    assert any(u.startswith("default_roce_tos: no RoCE device found") for u in result["unsupported"])
    # A virtual NIC is never asked to change anything.
    assert not [c for c in fake.calls if c[0] == "dcb"]


def test_mlx5_host_gets_everything_then_nothing_changes(tmp_path: Path) -> None:
    """MLNX_OFED/DOCA mlx5: DCB, DCQCN on the no-drop priority, the CNPs' DSCP and priority, the ToS of dcqcn."""
    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core", ecn=True)
    fake.add_rdma("mlx5_0")
    fake.add_configfs()
    first = qos.apply(fake.host(), ["ens1f0np0"], LAB)
    assert first["changed"] and first["unsupported"] == []
    assert first["commands"][:3] == [
        "dcb app replace dev ens1f0np0 dscp-prio 10:1 26:3 48:7",
        "dcb pfc set dev ens1f0np0 prio-pfc all:off 3:on",
        "dcb ets set dev ens1f0np0 prio-tc 0:0 1:1 2:0 3:3 4:0 5:0 6:0 7:7 "
        "tc-tsa 0:ets 1:ets 2:ets 3:ets 4:ets 5:ets 6:ets 7:strict tc-bw 0:25 1:25 2:0 3:50 4:0 5:0 6:0 7:0",
    ]
    nic = fake.nics["ens1f0np0"]
    assert (26, 3) in nic.app and (48, 7) in nic.app and (10, 1) in nic.app
    assert [p for p, on in nic.pfc.items() if on] == [3]
    ecn = tmp_path / "sys/class/net/ens1f0np0/ecn"
    assert read(ecn / "roce_np/enable/3") == "1" and read(ecn / "roce_rp/enable/3") == "1"
    assert read(ecn / "roce_np/enable/0") == "0"  # other priorities are left alone
    # The CNPs leave with the switch's CNP DSCP and class, not the firmware's priority 6.
    assert read(ecn / "roce_np/cnp_dscp") == "48" and read(ecn / "roce_np/cnp_802p_prio") == "7"
    assert first["interfaces"][0]["cnp"] == "set"
    assert read(tmp_path / "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos") == "106"
    assert first["roce_tos"] == 106 and first["tcp_mark_dscp"] == 10
    assert first["devices"] == [{"device": "mlx5_0", "port": 1, "default_roce_tos": 106, "state": "set"}]
    # The boot script holds the whole wanted state, with paths from the real root.
    assert "mkdir -p /sys/kernel/config/rdma_cm/mlx5_0" in first["boot_commands"]
    assert "echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos" in first["boot_commands"]
    assert "echo 1 > /sys/class/net/ens1f0np0/ecn/roce_rp/enable/3" in first["boot_commands"]
    assert "echo 7 > /sys/class/net/ens1f0np0/ecn/roce_np/cnp_802p_prio" in first["boot_commands"]
    for line in first["boot_commands"]:
        shlex.split(line)  # valid shell words

    second = qos.apply(fake.host(), ["ens1f0np0"], LAB)
    assert not second["changed"] and second["commands"] == [], second["commands"]
    assert second["boot_commands"] == first["boot_commands"]
    assert "dcb on ens1f0np0: app ok, pfc ok, ets ok" in second["report"]
    assert "dcqcn on (dcqcn) on ens1f0np0 priority 3: ok" in second["report"]
    assert "cnp DSCP 48 priority 7 on ens1f0np0: ok" in second["report"]


def test_pfc_only_turns_dcqcn_off_and_sends_without_ect(tmp_path: Path) -> None:
    """pfc_only on an mlx5 host that ran dcqcn: DCQCN off on the no-drop priority, ToS 104."""
    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core", ecn=True)
    fake.add_rdma("mlx5_0")
    fake.add_configfs()
    qos.apply(fake.host(), ["ens1f0np0"], LAB)
    result = qos.apply(fake.host(), ["ens1f0np0"], PFC_ONLY)
    ecn = tmp_path / "sys/class/net/ens1f0np0/ecn"
    assert read(ecn / "roce_np/enable/3") == "0" and read(ecn / "roce_rp/enable/3") == "0"
    assert read(tmp_path / "sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos") == "104"
    assert result["roce_tos"] == 104
    assert "echo 0 > /sys/class/net/ens1f0np0/ecn/roce_np/enable/3" in result["commands"]
    assert "dcqcn off (pfc_only) on ens1f0np0 priority 3: set" in result["report"]
    assert not qos.apply(fake.host(), ["ens1f0np0"], PFC_ONLY)["changed"]


def test_inbox_mlx5_cnp_marking_through_debugfs(tmp_path: Path) -> None:
    """The inbox mlx5 driver: no ecn/ tree (DCQCN stays at the firmware default, reported), the CNPs' DSCP and
    priority through debugfs cc_params; a priority mode that ignores np_cnp_prio is rewritten."""
    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core", debugfs=True, pci="0000:3b:00.1")
    cc = tmp_path / "sys/kernel/debug/mlx5/0000:3b:00.1/cc_params"
    (cc / "np_cnp_prio").write_text("7\n")  # the right priority, but mode 1 ignores it
    first = qos.apply(fake.host(), ["ens1f0np0"], LAB, do_tos=False)
    assert read(cc / "np_cnp_dscp") == "48" and read(cc / "np_cnp_prio") == "7" and read(cc / "np_cnp_prio_mode") == "0"
    assert first["commands"][-1:] == ["echo 7 > /sys/kernel/debug/mlx5/0000:3b:00.1/cc_params/np_cnp_prio"]
    assert first["interfaces"][0]["cnp"] == "set"
    assert any(
        u.startswith("dcqcn: not exposed on ens1f0np0 (no /sys/class/net/ens1f0np0/ecn") for u in first["unsupported"]
    )
    assert not any(u.startswith("cnp:") for u in first["unsupported"])
    assert "echo 48 > /sys/kernel/debug/mlx5/0000:3b:00.1/cc_params/np_cnp_dscp" in first["boot_commands"]
    second = qos.apply(fake.host(), ["ens1f0np0"], LAB, do_tos=False)
    assert second["commands"] == [] and second["interfaces"][0]["cnp"] == "ok"
    # Another CNP DSCP is written (and mapped by DCB); the priority, whose mode is 0 now, is left alone.
    third = qos.apply(fake.host(), ["ens1f0np0"], dataclasses.replace(LAB, cnp_dscp=46), do_tos=False)
    assert [c for c in third["commands"] if "cc_params" in c] == [
        "echo 46 > /sys/kernel/debug/mlx5/0000:3b:00.1/cc_params/np_cnp_dscp"
    ]


@pytest.mark.parametrize("shape", ["ofed", "inbox"])
def test_reset_puts_the_nic_back_as_the_first_run_found_it(tmp_path: Path, monkeypatch, shape: str) -> None:
    """The undo operations a first run notes (what the module records before its first change, through a planning
    pass in check mode) take DCB, DCQCN, the CNPs' marking and the RDMA-CM ToS back exactly, replayed by the reset
    record (module_utils/host/reset/) after the change; a converged NIC notes nothing new."""
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import record as reset_record
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import restore as reset_restore
    from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset import store as reset_store

    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core", ecn=shape == "ofed", debugfs=shape == "inbox")
    fake.nics["ens1f0np0"].app = [(0, 0), (26, 2)]  # a host that mapped RoCE to priority 2 before the project
    fake.add_rdma("mlx5_0")
    fake.add_configfs()

    def state() -> tuple:
        nic = fake.nics["ens1f0np0"]
        files = {
            str(p.relative_to(tmp_path)): p.read_text()
            for p in sorted(tmp_path.rglob("*"))
            if p.is_file() and not str(p.relative_to(tmp_path)).startswith("var/")  # the record itself
        }
        return sorted(nic.app), dict(nic.pfc), {k: dict(v) for k, v in nic.ets.items()}, files

    before = state()
    plan = fake.host(check_mode=True)
    qos.apply(plan, ["ens1f0np0"], LAB)
    assert state() == before, "the planning pass changes nothing"
    store = reset_store.Host(root=str(tmp_path), run=fake.run)
    reset_record.record(store, "rdma_qos", reset_record.Spec(undo=plan.undo))
    qos.apply(fake.host(), ["ens1f0np0"], LAB)
    assert state() != before
    again = fake.host(check_mode=True)
    qos.apply(again, ["ens1f0np0"], LAB)
    assert again.undo == [], "a converged NIC has nothing new to undo"
    # configfs removes a group with its attributes; rmdir on the fake tree does the same.
    real_rmdir = os.rmdir

    def configfs_rmdir(path, *args, **kwargs):
        if "rdma_cm/" in str(path) and not args and not kwargs:
            for sub in sorted(Path(path).rglob("*"), reverse=True):
                sub.unlink() if sub.is_file() else real_rmdir(sub)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", configfs_rmdir)
    result = reset_restore.restore(store, "rdma_qos")
    assert result["errors"] == [] and result["forgotten"], result
    assert state() == before
    assert "dcb app replace dev ens1f0np0 dscp-prio 26:2" in result["changes"]


def test_check_mode_plans_without_touching(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core", ecn=True)
    fake.add_rdma("mlx5_0")
    fake.add_configfs()
    before = fake.nics["ens1f0np0"].show("pfc")
    result = qos.apply(fake.host(check_mode=True), ["ens1f0np0"], LAB)
    assert result["changed"] and len(result["commands"]) == 7, result["commands"]
    assert "mkdir /sys/kernel/config/rdma_cm/mlx5_0" in result["commands"]
    assert fake.nics["ens1f0np0"].show("pfc") == before
    assert read(tmp_path / "sys/class/net/ens1f0np0/ecn/roce_np/enable/3") == "0"
    assert read(tmp_path / "sys/class/net/ens1f0np0/ecn/roce_np/cnp_802p_prio") == "6"
    assert not (tmp_path / "sys/kernel/config/rdma_cm/mlx5_0").exists()
    assert not [c for c in fake.calls if c[0] == "dcb" and c[1] != "-N"]


@pytest.mark.parametrize(("driver", "rdma"), [("bnxt_en", "bnxt_re0"), ("ice", "irdma0")])
def test_broadcom_and_intel_get_dcb_and_report_dcqcn_and_cnp(tmp_path: Path, driver: str, rdma: str) -> None:
    fake = FakeHost(tmp_path)
    fake.add_nic("ens2f0np0", driver)
    fake.add_rdma(rdma)
    fake.add_configfs()
    result = qos.apply(fake.host(), ["ens2f0np0"], LAB)
    assert result["interfaces"][0]["driver"] == driver
    assert result["interfaces"][0]["dcb"] == {"app": "set", "pfc": "set", "ets": "set"}
    assert any(u.startswith("dcqcn: not exposed on ens2f0np0") for u in result["unsupported"]), result["unsupported"]
    assert (
        "cnp: not exposed on ens2f0np0 (no /sys/class/net/ens2f0np0/ecn/roce_np/cnp_dscp nor mlx5 debugfs cc_params; "
        "the NIC's firmware default applies)" in result["unsupported"]
    )
    assert result["devices"][0]["state"] == "set"  # reported, not failed: the rest of the host is set


def test_nic_without_dcb_is_reported(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_nic("enp3s0", "virtio_net", dcb=False)
    result = qos.apply(fake.host(), ["enp3s0"], LAB, do_tos=False)
    assert "dcb: not supported on enp3s0 (virtio_net)" in result["unsupported"]
    assert not result["changed"]


def test_failure_on_capable_hardware_fails(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_nic("ens1f0np0", "mlx5_core")
    fake.fail_set = True
    with pytest.raises(qos.QosError, match=r"`dcb app replace dev ens1f0np0 dscp-prio 10:1 26:3 48:7` failed .*Inval"):
        qos.apply(fake.host(), ["ens1f0np0"], LAB, do_tos=False)


def test_missing_interface_fails(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    with pytest.raises(qos.QosError, match="interface ens9 does not exist"):
        qos.apply(fake.host(), ["ens9"], LAB)


def test_infiniband_port_leaves_qos_to_opensm(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_ipoib("ib0")
    result = qos.apply(fake.host(), ["ib0"], LAB, do_tos=False)
    assert any("InfiniBand: QoS is SL/VL, set by OpenSM" in line for line in result["report"])
    assert not fake.calls


def test_configfs_absent_is_reported(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_rdma("mlx5_0")
    result = qos.apply(fake.host(), [], LAB)
    assert result["unsupported"] == [
        "default_roce_tos on mlx5_0/1: not available: /sys/kernel/config/rdma_cm is absent "
        "(configfs not mounted or rdma_cm not loaded)"
    ]


def test_infiniband_rdma_ports_get_no_roce_tos(tmp_path: Path) -> None:
    fake = FakeHost(tmp_path)
    fake.add_rdma("mlx5_0", link_layer="InfiniBand")
    fake.add_rdma("mlx5_1")
    fake.add_configfs()
    result = qos.apply(fake.host(), [], LAB, devices=[])
    assert [d["device"] for d in result["devices"]] == ["mlx5_1"]


def test_fabric_networks_from_interfaces() -> None:
    interfaces = [
        {
            "name": "ens192",
            "addresses": ["192.168.250.201/24", "fd00:250::201/64"],
            "routes": [{"to": "192.168.251.0/24"}],
        },
        {"name": "ens224", "addresses": ["192.168.250.9/24"]},
    ]
    assert rules.rdma_qos_fabric_networks(interfaces) == {
        "ipv4": ["192.168.250.0/24", "192.168.251.0/24"],
        "ipv6": ["fd00:250::/64"],
    }


def test_fabric_networks_leave_out_what_the_contract_refuses() -> None:
    """A bad address or route is the inventory contract's to report (once): the default still templates."""
    interfaces = [
        {"name": "ens192", "addresses": ["192.168.250.201/24", "not-an-address"], "routes": [{"to": "default"}]},
        "ens224",
    ]
    assert rules.rdma_qos_fabric_networks(interfaces) == {"ipv4": ["192.168.250.0/24"], "ipv6": []}
