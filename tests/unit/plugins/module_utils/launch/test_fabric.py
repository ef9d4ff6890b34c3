"""The fabric during one training job (module_utils/launch/fabric.py): NIC counters read by rdma-node-check at launch
and at the end on the recorded H100 node's sysfs (tests/fixtures/node_check/sysfs_h100), switch counters parsed from
the recorded NX-OS outputs (tests/fixtures/validate/), and the report's section."""

from __future__ import annotations

import json

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import parsers
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import fabric as tf
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import report as train_report

from tests.conftest import ROOT
from tests.unit.plugins.module_utils.node.helpers import NOW, bump, counters_run, fake_root

VALIDATE = ROOT / "tests" / "fixtures" / "validate"
PORTS = {"sw1:Ethernet1/1": "n1", "sw1:Ethernet1/2": "n2"}


def switch(pause_tx: int = 0, drops: int = 0, ecn: int = 0) -> dict:
    """One read of sw1 (the recorded `show interface priority-flow-control` and `show queuing interface`), with
    Ethernet1/2's counters moved by the given amounts."""
    read = parsers.switch_counters((VALIDATE / "nxos_pfc.txt").read_text(), (VALIDATE / "nxos_queuing.txt").read_text())
    read = {port: dict(c) for port, c in read.items()}
    port = read.setdefault("Ethernet1/2", {"drops_q3": 0, "ecn_q3": 0, "pause_rx": 0, "pause_tx": 0})
    port.setdefault("drops_q3", 0)
    port.setdefault("ecn_q3", 0)
    port["pause_tx"] = port.get("pause_tx", 0) + pause_tx
    port["drops_q3"] += drops
    port["ecn_q3"] += ecn
    return {"sw1": read}


def test_a_clean_run_is_lossless_with_its_pauses_and_marks(tmp_path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    counters_run(root, state)  # at launch
    bump(root, "mlx5_bond_0", "hw_counters", "out_of_buffer", 3)  # congestion: reported, not judged
    end = counters_run(root, state, now=NOW + 60)
    fabric = tf.job_fabric({"n1": end}, switch(), switch(pause_tx=900, ecn=42), 3, PORTS)
    assert fabric["lossless"] is True, fabric
    assert (
        fabric["reason"].startswith("no drop in qos-group 3 on ")
        and "no NIC error counter grew on 1 host" in (fabric["reason"])
    )
    assert fabric["ports"]["sw1:Ethernet1/2"] == {"host": "n2", "pause_rx": 0, "pause_tx": 900, "ecn_marked": 42,
                                                  "drops": 0}  # fmt: skip
    assert fabric["switch"]["pauses"] == 900 and fabric["switch"]["ecn_marked"] == 42
    assert fabric["hosts"]["n1"]["congestion"] == {"mlx5_bond_0:1": {"out_of_buffer": 3}}
    md = "\n".join(tf.markdown(fabric))
    assert "Lossless during this run: yes (no drop in qos-group 3" in md
    assert "| sw1:Ethernet1/2 | n2 | 0 | 900 | 42 | 0 |" in md and "mlx5_bond_0:1 out_of_buffer +3" in md


def test_drops_in_the_nodrop_class_or_a_grown_error_counter_make_it_lossy(tmp_path) -> None:
    root, state = fake_root(tmp_path), tmp_path / "state"
    counters_run(root, state)
    clean_end = counters_run(root, state, now=NOW + 60)
    dropped = tf.job_fabric({"n1": clean_end}, switch(), switch(drops=5, pause_tx=10), 3, PORTS)
    assert dropped["lossless"] is False
    assert (
        dropped["reason"]
        == "sw1 Ethernet1/2 (n2): 5 dropped in qos-group 3, 0 PFC pauses received, 10 sent, 0 ECN-marked"
    )
    bump(root, "mlx5_0", "counters", "symbol_error", 2)
    errors = tf.job_fabric({"n1": counters_run(root, state, now=NOW + 120)}, switch(), switch(), 3, PORTS)
    assert errors["lossless"] is False and errors["reason"].startswith("n1: mlx5_0 port 1: symbol_error +2 (since ")
    assert "Lossless during this run: **no**" in "\n".join(tf.markdown(errors))


def test_what_was_not_read_is_said_not_passed(tmp_path) -> None:
    # The lab: veth has no RDMA counters; the switch read decides alone, and says the NICs were not judged.
    lab_host = {"checks": [{"check": "port counters", "status": "skip", "detail": "no RDMA port counters (no RDMA "
                            "device)"}], "counters": {"deltas": {}, "pause": {}}}  # fmt: skip
    fabric = tf.job_fabric({"n1": lab_host, "n2": None}, switch(), switch(), 3, PORTS)
    assert fabric["lossless"] is True and "NIC counters not judged on n1, n2 (no RDMA port counters" in fabric["reason"]
    assert fabric["hosts"]["n2"]["detail"] == "not read at the end (host lost or the job never started)"
    # No switch and no RDMA counters: nobody can say.
    unknown = tf.job_fabric({"n1": lab_host}, None, None, 3, {}, "no switch in the inventory (group switches)")
    assert unknown["lossless"] is None and unknown["reason"].startswith("switches: no switch in the inventory")
    assert "Lossless during this run: unknown" in "\n".join(tf.markdown(unknown))


def test_the_run_report_shows_the_fabric(tmp_path) -> None:
    """train_report.write() reads fabric.json beside the manifest: a section in report.md, a line in the summary."""
    run = tmp_path / "run"
    (run / "n1" / "out").mkdir(parents=True)
    manifest = {"run_id": "r1", "outcome": "completed", "message": "", "engine": "ddp", "model": "tiny",
                "launch_id": "l1", "nodes": [{"host": "n1"}],
                "timings": {"started_epoch": 90, "launched_epoch": 100, "ended_epoch": 150}}  # fmt: skip
    (run / "manifest.json").write_text(json.dumps(manifest))
    fabric = tf.job_fabric({}, switch(), switch(drops=5), 3, PORTS)
    (run / "fabric.json").write_text(json.dumps(fabric))
    lines = train_report.write(run)
    assert any(
        line.startswith("fabric: lossless during this run: NO (sw1 Ethernet1/2 (n2): 5 dropped") for line in lines
    )
    assert "## Fabric during this run" in (run / "report.md").read_text()
    assert json.loads((run / "report.json").read_text())["fabric"]["lossless"] is False


def test_each_poll_samples_the_rdma_counters_from_sysfs(tmp_path) -> None:
    """The watch's poll command (one `sh -c`) on the recorded H100 node's sysfs: every sampled counter of every
    port, parsed back; a node without RDMA devices gives none."""
    import shutil
    import subprocess

    from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import poll as F

    sysfs = tmp_path / "sys"
    shutil.copytree(ROOT / "tests" / "fixtures" / "node_check" / "sysfs_h100", sysfs / "class" / "infiniband")
    script = F.poll_tail(str(tmp_path / "run"), "lo", "L1", sysfs=str(sysfs))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    counters = F.parse_poll_counters(out)
    assert sorted(counters) == ["mlx5_0:1", "mlx5_bond_0:1"], counters
    assert counters["mlx5_0:1"]["port_rcv_errors"] == 14 and "out_of_buffer" in counters["mlx5_bond_0:1"], counters
    assert set(counters["mlx5_0:1"]) <= set(F.SAMPLED_COUNTERS)
    assert F.parse_poll(out)[3] == []  # the failures section stops at the counters
    empty = F.poll_tail(str(tmp_path / "run"), "lo", "L1", sysfs=str(tmp_path / "none"))
    assert F.parse_poll_counters(subprocess.run(["sh", "-c", empty], capture_output=True, text=True).stdout) == {}


def _ethtool(tmp_path, recording: str):
    """A stand-in for ethtool that prints a recorded `ethtool -S` (tests/fixtures/node_check/) for any interface."""
    path = tmp_path / "ethtool"
    path.write_text(f"#!/bin/sh\ncat {ROOT / 'tests' / 'fixtures' / 'node_check' / recording}\n")
    path.chmod(0o755)
    return str(path)


def test_each_poll_samples_the_nodrop_prioritys_pause_counters(tmp_path) -> None:
    """The poll reads `ethtool -S` of the fabric interface: the recorded mlx5 output with priority 3's PFC counters
    gives them (frames and durations, not the transitions) under the interface's name; priority 4, which has none
    there, and the recording without PFC give nothing."""
    import subprocess

    from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import poll as F

    def sample(prio: int, recording: str) -> dict:
        script = F.poll_tail(
            str(tmp_path / "run"), "rdma0", "L1", str(tmp_path / "none"), prio, _ethtool(tmp_path, recording)
        )
        out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
        return F.parse_poll_counters(out, "rdma0")

    pfc = sample(3, "ethtool_mlx5_pfc_prio3.txt")
    assert list(pfc) == ["rdma0"] and sorted(pfc["rdma0"]) == [
        "rx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause", "tx_prio3_pause_duration"
    ], pfc  # fmt: skip
    assert all(v > 0 for v in pfc["rdma0"].values()), pfc
    assert sample(4, "ethtool_mlx5_pfc_prio3.txt") == {} and sample(3, "ethtool_mlx5_cx4.txt") == {}


def test_samples_become_what_grew_since_launch_and_a_plot(tmp_path) -> None:
    samples = [
        [100.0, {"mlx5_0:1": {"np_cnp_sent": 10, "symbol_error": 4}, "mlx5_1:1": {"np_ecn_marked_roce_packets": 0}}],
        [110.0, {"mlx5_0:1": {"np_cnp_sent": 25, "symbol_error": 4}, "mlx5_1:1": {"np_ecn_marked_roce_packets": 7}}],
        [120.0, {"mlx5_0:1": {"np_cnp_sent": 5, "symbol_error": 6}, "mlx5_1:1": {"np_ecn_marked_roce_packets": 9}}],
    ]
    samples[1][1]["rdma0"] = {"rx_prio3_pause": 50, "rx_prio3_pause_duration": 900, "tx_prio3_pause": 1}
    samples[2][1]["rdma0"] = {"rx_prio3_pause": 80, "rx_prio3_pause_duration": 1400, "tx_prio3_pause": 3}
    # The CNP counter went back at 120 (a reset): it counts from its new value; the errors grew by 2; 32 pause
    # frames since the interface's first sample (its durations, in microseconds, are not frames).
    assert tf.series(samples) == {
        "t": [100.0, 110.0, 120.0], "congestion": [0, 22, 9], "errors": [0, 0, 2], "pauses": [0, 0, 32]
    }  # fmt: skip
    fabric = tf.job_fabric({}, switch(), switch(), 3, PORTS, samples={"n1": samples, "n2": []})
    assert list(fabric["series"]) == ["n1"]
    assert tf.plot(fabric, tmp_path / "fabric.png") and (tmp_path / "fabric.png").stat().st_size > 2000
    md = "\n".join(tf.markdown(fabric))
    assert "the no-drop priority's PFC pauses (what each host's switch port paused) sampled at every poll" in md
    assert "of the watch on n1; the switches themselves are read at launch and at the end" in md
    assert "![fabric](fabric.png)" in md
    none = tf.job_fabric({}, switch(), switch(), 3, PORTS, samples={"n1": []})
    assert not tf.plot(none, tmp_path / "none.png") and not (tmp_path / "none.png").exists()
    assert "No NIC counters sampled during the run" in "\n".join(tf.markdown(none))


def test_the_watch_keeps_a_bounded_sample_of_the_whole_run() -> None:
    """The watch (plugins/action/train_launch_watch.py) keeps one sample per poll up to MAX_SAMPLES, then every
    other one, the first always: a run of days keeps its whole span in a few hundred samples."""
    from ansible_collections.rdma_llm.cluster.plugins.action import train_launch_watch as W

    watch = object.__new__(W.ActionModule)
    watch._samples = []
    line = "@@counters\n/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent {}\n"
    for i in range(W.MAX_SAMPLES * 3):
        watch._sample(line.format(i))
    assert len(watch._samples) <= W.MAX_SAMPLES and watch._samples[0][1] == {"mlx5_0:1": {"np_cnp_sent": 0}}
    values = [s[1]["mlx5_0:1"]["np_cnp_sent"] for s in watch._samples]
    assert values == sorted(values) and values[-1] >= W.MAX_SAMPLES * 3 - 8, values[-5:]
    watch._sample("@@counters\n@@pause\n")  # no RDMA device, no PFC counters: nothing kept
    assert len(watch._samples) == len(values)
    watch._sample("@@counters\n@@pause\n     rx_prio3_pause: 7\n", "rdma0")
    assert watch._samples[-1][1] == {"rdma0": {"rx_prio3_pause": 7}}
