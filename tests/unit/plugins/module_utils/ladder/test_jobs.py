"""The job rungs (ladder/jobs.py): the short training run and the scheduler (tests/fixtures/slurm/)."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.jobs import (
    evaluate_slurm,
    evaluate_train,
    slurm_topology,
)

from tests.conftest import ROOT

# ------------------------------------------------------------------------------------ the train rung


def _train_report(tps, device="cpu", mfu=0.004, outcome="completed"):
    """report.json as train_launch's train_report.py writes it (keys used by the rung), results per host."""
    result = {"status": "completed", "device": device, "world_size": 2, "mfu": mfu, "tokens_per_s": tps}
    return {"run_id": "validate-x", "outcome": outcome, "message": "", "model": "tiny", "final_step": 20,
            "tokens_per_s_median": tps, "results": {"n1": result, "n2": {**result, "mfu": None}}}  # fmt: skip


def test_train_rung() -> None:
    assert evaluate_train({}, 100, skip_reason="no corpus")["status"] == "skip"
    ok = evaluate_train(_train_report(900.0), 500)
    assert ok["status"] == "pass" and ok["value"] == 900.0 and ok["threshold"] == 500 and ok["unit"] == "tokens/s"
    # On CPUs MFU is the payload's estimate: reported, never judged, even under a floor.
    assert "MFU 0.4% (estimated CPU peak, not judged)" in ok["reason"] and ok["mfu"] == 0.004
    assert evaluate_train(_train_report(900.0, mfu=0.001), 500, min_mfu=0.3)["status"] == "pass"
    slow = evaluate_train(_train_report(90.0), 500)
    assert slow["status"] == "fail" and slow["reason"].startswith("90 tokens/s below the floor 500")
    # On GPUs the MFU floor applies.
    gpu = evaluate_train(_train_report(40000.0, device="cuda", mfu=0.12), 500, min_mfu=0.3)
    assert gpu["status"] == "fail" and "MFU 12.0% below 30%" in gpu["reason"]
    assert evaluate_train(_train_report(40000.0, device="cuda", mfu=0.41), 500, min_mfu=0.3)["status"] == "pass"
    failed = evaluate_train(_train_report(None, outcome="failed") | {"message": "lab-node2 lost"}, 500)
    assert failed["status"] == "fail" and "training failed: lab-node2 lost" in failed["reason"]
    gone = evaluate_train({"error": "rendezvous port 29500 busy on lab-node1"}, 500)
    assert gone["status"] == "fail" and "29500 busy" in gone["reason"]


# ------------------------------------------------------------------------------------ the slurm rung

SLURM_FIX = ROOT / "tests" / "fixtures" / "slurm"


SLURM_HOSTS = ["mol-slurm-1", "mol-slurm-2"]


SLURM_ALIASES = {h: [h] for h in SLURM_HOSTS}


def _scontrol(*names: str) -> dict:
    return {"rc": 0, "stdout": "".join((SLURM_FIX / n).read_text() for n in names), "stderr": ""}


def _srun(*nodes: str, rc: int = 0, stderr: str = "") -> dict:
    return {"rc": rc, "stdout": "".join(f"{n}\n" for n in nodes), "stderr": stderr}


LEAF_SPINE = [
    "SwitchName=lab-leaf1 Nodes=mol-slurm-1",
    "SwitchName=lab-leaf2 Nodes=mol-slurm-2",
    "SwitchName=lab-spine1 Switches=lab-leaf1,lab-leaf2",
]


def test_slurm_rung_passes_idle_nodes_that_answer_srun_with_the_inventorys_topology() -> None:
    rung = evaluate_slurm(
        _scontrol("scontrol_show_nodes_idle.txt"),
        (SLURM_FIX / "scontrol_show_topology_leaf_spine.txt").read_text(),
        _srun(*SLURM_HOSTS),
        SLURM_HOSTS,
        SLURM_ALIASES,
        LEAF_SPINE,
    )
    assert rung["status"] == "pass" and (rung["value"], rung["threshold"]) == (2, 2), rung
    assert rung["reason"] == "topology as the inventory" and rung["nodes"] == {h: h for h in SLURM_HOSTS}
    no_topo = evaluate_slurm(_scontrol("scontrol_show_nodes_idle.txt"), "", _srun(*SLURM_HOSTS), SLURM_HOSTS,
                                SLURM_ALIASES)  # fmt: skip
    assert no_topo["status"] == "pass" and no_topo["reason"] == "topology not configured (no topology.conf)"


def test_slurm_rung_names_the_drained_node_with_the_checks_reason_and_the_node_srun_missed() -> None:
    nodes = (SLURM_FIX / "scontrol_show_nodes_idle.txt").read_text().splitlines()[0] + "\n"
    nodes += (SLURM_FIX / "scontrol_show_node_drained_by_check.txt").read_text()
    busy = "srun: error: Unable to allocate resources: Requested nodes are busy"
    rung = evaluate_slurm(
        {"rc": 0, "stdout": nodes}, "", _srun("mol-slurm-1", rc=1, stderr=busy), SLURM_HOSTS, SLURM_ALIASES
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["mol-slurm-2"] and rung["value"] == 1, rung
    assert rung["reason"] == (
        "mol-slurm-2: Slurm node mol-slurm-2 is IDLE+DRAIN: rdma-node-check: test failure "
        "[root@2026-11-26T13:06:53]; mol-slurm-2: srun step did not run on mol-slurm-2: " + busy
    )


def test_slurm_rung_fails_a_busy_node_an_unknown_host_and_a_topology_that_differs() -> None:
    busy = (SLURM_FIX / "scontrol_show_nodes_idle.txt").read_text().replace("State=IDLE", "State=ALLOCATED", 1)
    hosts = [*SLURM_HOSTS, "lab-node9"]
    rung = evaluate_slurm(
        {"rc": 0, "stdout": busy},
        (SLURM_FIX / "scontrol_show_topology_none.txt").read_text(),
        _srun(*SLURM_HOSTS),
        hosts,
        {**SLURM_ALIASES, "lab-node9": ["lab-node9", "10.0.0.9"]},
        LEAF_SPINE,
    )
    assert rung["status"] == "fail" and rung["bad_hosts"] == ["lab-node9", "mol-slurm-1"], rung
    reason = rung["reason"]
    assert "mol-slurm-1: Slurm node mol-slurm-1 is ALLOCATED, not idle: a job runs" in reason
    assert "lab-node9: not a Slurm node (none is named lab-node9, 10.0.0.9)" in reason
    assert "switch lab-leaf1 is missing in Slurm's topology" in reason  # a cluster-wide check: no host before it


def test_slurm_rung_when_slurm_cannot_be_asked_or_is_not_there() -> None:
    down = {
        "rc": 1,
        "stdout": "",
        "stderr": "slurm_load_node error: Unable to contact slurm controller (connect failure)",
    }
    rung = evaluate_slurm(down, "", {}, SLURM_HOSTS, SLURM_ALIASES)
    assert rung["status"] == "fail"
    assert rung["reason"] == (
        "scontrol show nodes failed: slurm_load_node error: Unable to contact slurm controller (connect failure)"
    )
    skipped = evaluate_slurm({}, "", {}, SLURM_HOSTS, {}, None, "no Slurm in the inventory")
    assert skipped["status"] == "skip" and skipped["reason"] == "no Slurm in the inventory"


def test_slurm_rung_expects_the_topology_the_slurm_role_writes() -> None:
    """The inventory's topology (the slurm role's rule) under the NodeNames Slurm reports."""
    ports = {
        "lab-leaf1": [{"name": "Ethernet1/1", "description": "lab-node1 rdma0"}, {"description": "lab-spine1 up"}],
        "lab-leaf2": [{"name": "Ethernet1/1", "description": "lab-node2 rdma0"}, {"description": "lab-spine1 up"}],
        "lab-spine1": [],
    }
    hostvars = {sw: {"nxos_roce_qos_host_interfaces": p} for sw, p in ports.items()}
    groups = {"rdma_nodes": ["lab-node1", "lab-node2"], "switches": sorted(ports)}
    found = {"lab-node1": {"NodeName": "mol-slurm-1"}, "lab-node2": {"NodeName": "mol-slurm-2"}}
    assert slurm_topology(hostvars, groups, found) == LEAF_SPINE
    assert slurm_topology(hostvars, groups, found, "none") is None
    assert slurm_topology(hostvars, {"rdma_nodes": ["lab-node1"]}, found) is None
