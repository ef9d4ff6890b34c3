"""How a host takes a new slurm.conf (plugins/module_utils/slurm/restart.py): which daemon restarts, what
`scontrol reconfigure` covers.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.restart import apply_plan, conf_changes

from tests.unit.plugins.module_utils.slurm.samples import LAB_CONF

pytestmark = pytest.mark.lint


BEFORE = "\n".join(["#", "# Ansible managed", "#", *LAB_CONF]) + "\n"


def edit(old: str, new: str) -> str:
    assert old in BEFORE
    return BEFORE.replace(old, new)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (BEFORE, {"slurmctld": [], "slurmd": [], "reconfigure": []}),
        (
            edit("PartitionName=train Nodes=lab-node1,lab-node2", "PartitionName=train Nodes=lab-node1"),
            {"slurmctld": [], "slurmd": [], "reconfigure": ["PartitionName train"]},
        ),
        (
            edit("ReturnToService=1", "ReturnToService=2"),
            {"slurmctld": [], "slurmd": [], "reconfigure": ["returntoservice"]},
        ),
        (
            edit("lab-node2 NodeAddr=10.77.0.12 CPUs=2", "lab-node2 NodeAddr=10.77.0.12 CPUs=4"),
            {"slurmctld": ["NodeName lab-node2"], "slurmd": ["NodeName lab-node2"], "reconfigure": []},
        ),
        (
            edit("ProctrackType=proctrack/cgroup", "ProctrackType=proctrack/linuxproc"),
            {"slurmctld": ["proctracktype"], "slurmd": ["proctracktype"], "reconfigure": []},
        ),
        (
            edit("StateSaveLocation=/var/lib/slurm/slurmctld", "StateSaveLocation=/srv/slurm"),
            {"slurmctld": ["statesavelocation"], "slurmd": [], "reconfigure": []},
        ),
        (
            edit("MpiDefault=none", "MpiDefault=none\nTaskPlugin=task/affinity"),
            {"slurmctld": [], "slurmd": ["taskplugin"], "reconfigure": []},
        ),
        # A comment (the run's notes) is no change at all.
        (
            edit("# cgroups: proctrack", "# cgroups (again): proctrack"),
            {"slurmctld": [], "slurmd": [], "reconfigure": []},
        ),
    ],
)
def test_what_a_slurm_conf_change_needs(after: str, expected: dict) -> None:
    assert conf_changes(BEFORE, after) == expected


def result(name: str, before: str | None = None, after: str = "", changed: bool = True) -> dict:
    diff = {"before": before, "after": after} if name == "slurm.conf" else {}
    return {"item": {"key": name, "value": []}, "changed": changed, "diff": diff}


RUNNING = {"munge": "active", "slurmctld": "active", "slurmd": "active"}


def test_nothing_changed_nothing_restarted() -> None:
    plan = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], RUNNING, True, True)
    assert plan == {
        "state": {"munge": "started", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": False,
        "why": [],
    }


def test_a_new_partition_is_a_reconfigure_not_a_restart() -> None:
    after = edit("PartitionName=train Nodes=lab-node1,lab-node2", "PartitionName=train Nodes=lab-node1")
    plan = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan == {
        "state": {"munge": "started", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": True,
        "why": ["scontrol reconfigure for PartitionName train"],
    }


def test_prolog_flags_restart_both_daemons_the_prolog_itself_is_a_reconfigure() -> None:
    after = edit("ReturnToService=1", "ReturnToService=1\nPrologFlags=Alloc\nProlog=/usr/local/sbin/check")
    plan = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan["state"] == {"munge": "started", "slurmctld": "restarted", "slurmd": "restarted"}, plan
    assert conf_changes(BEFORE, edit("ReturnToService=1", "ReturnToService=1\nProlog=/x"))["reconfigure"] == ["prolog"]


def test_a_controller_key_restarts_slurmctld_only() -> None:
    after = edit("StateSaveLocation=/var/lib/slurm/slurmctld", "StateSaveLocation=/srv/slurm")
    ctl = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, False)
    assert ctl["state"] == {"munge": "started", "slurmctld": "restarted"}
    assert ctl["why"] == ["slurmctld restarted for statesavelocation (slurm.conf(5))"] and not ctl["reconfigure"]
    node = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, False, True)
    # The node's slurmd keeps running and re-reads its copy when slurmctld asks it to.
    assert node["state"] == {"munge": "started", "slurmd": "started"} and node["reconfigure"]


def test_a_node_change_restarts_both_and_a_gres_change_is_a_reconfigure() -> None:
    after = edit("lab-node2 NodeAddr=10.77.0.12 CPUs=2", "lab-node2 NodeAddr=10.77.0.12 CPUs=4")
    plan = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True)
    assert plan["state"] == {"munge": "started", "slurmctld": "restarted", "slurmd": "restarted"}
    assert not plan["reconfigure"]
    gres = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False), result("gres.conf")], RUNNING, False, True)
    assert gres["state"] == {"munge": "started", "slurmd": "started"}
    assert gres["reconfigure"] and gres["why"] == ["scontrol reconfigure for gres.conf"]


def test_first_start_and_a_new_key() -> None:
    """Daemons not running yet start with the new files: no restart, no reconfigure; a new MUNGE key restarts a
    running munged (the daemons talk to it through its socket)."""
    fresh = {"munge": "active", "slurmctld": "inactive", "slurmd": "inactive"}
    plan = apply_plan([result("slurm.conf", "", BEFORE), result("cgroup.conf")], fresh, True, True, key_changed=True)
    assert plan == {
        "state": {"munge": "restarted", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": False,
        "why": [],
    }


def test_slurmdbd_starts_first_restarts_for_its_file_and_stops_when_accounting_goes() -> None:
    """slurmdbd reads slurmdbd.conf only at start; slurmctld restarts when it is pointed at slurmdbd
    (AccountingStorageType), and that restart comes after slurmdbd in the loop's order."""
    after = edit("ReturnToService=1", "ReturnToService=1\nAccountingStorageType=accounting_storage/slurmdbd")
    first = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, True, dbd="changed")
    assert list(first["state"].items()) == [
        ("munge", "started"),
        ("slurmdbd", "started"),
        ("slurmctld", "restarted"),
        ("slurmd", "started"),
    ]
    assert first["why"][0] == "slurmctld restarted for accountingstoragetype (slurm.conf(5))", first
    running = {**RUNNING, "slurmdbd": "active"}
    same = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True, dbd="same")
    assert same["state"]["slurmdbd"] == "started" and same["why"] == [] and not same["reconfigure"]
    new_file = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True, dbd="changed")
    assert new_file["state"]["slurmdbd"] == "restarted" and new_file["state"]["slurmctld"] == "started"
    assert new_file["why"] == ["slurmdbd restarted for slurmdbd.conf (it reads it only at start)"]
    off = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], running, True, True)
    assert off["state"]["slurmdbd"] == "stopped" and off["why"] == ["slurmdbd stopped: accounting is off"]
    # A node never runs slurmdbd; a controller without one leaves the unit alone.
    assert "slurmdbd" not in apply_plan([], running, False, True, dbd="changed")["state"]
    assert "slurmdbd" not in apply_plan([], RUNNING, True, True)["state"]


NODE3 = (
    "NodeName=lab-node3 NodeAddr=10.77.0.13 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105 "
    "State=UNKNOWN"
)
ADDED = edit(
    "PartitionName=train Nodes=lab-node1,lab-node2", f"{NODE3}\nPartitionName=train Nodes=lab-node1,lab-node2,lab-node3"
)


def test_configless_a_new_node_restarts_slurmctld_alone_and_the_others_fetch_it() -> None:
    """The controller (a node too) restarts slurmctld for the new node and reconfigures; its own slurmd and every
    other node's take the new files from that reconfigure (tried on Slurm 22.05.8, docs/slurm.md)."""
    served = [result("slurm.conf", BEFORE, ADDED)]
    ctl = apply_plan(served, RUNNING, True, True, configless={"nodename": "lab-node1"})
    assert ctl["state"] == {"munge": "started", "slurmctld": "restarted", "slurmd": "started"}
    assert ctl["reconfigure"] and ctl["why"] == [
        "slurmctld restarted for NodeName lab-node3 (slurm.conf(5))",
        "scontrol reconfigure for NodeName lab-node3, PartitionName train",
    ]
    node = apply_plan([], RUNNING, False, True, configless={"nodename": "lab-node2", "served": served})
    assert node == {"state": {"munge": "started", "slurmd": "started"}, "reconfigure": False, "why": []}
    # The new node's slurmd is not running yet: it starts and fetches the files.
    fresh = {"munge": "active", "slurmd": "inactive"}
    new = apply_plan([], fresh, False, True, configless={"nodename": "lab-node3", "served": served, "dropin": True})
    assert new["state"] == {"munge": "started", "slurmd": "started"} and not new["reconfigure"]
    # Off: every slurmd restarts for a node line (slurm.conf(5)).
    assert apply_plan([result("slurm.conf", BEFORE, ADDED)], RUNNING, False, True)["state"]["slurmd"] == "restarted"


def test_configless_a_node_restarts_for_its_own_line_its_daemon_keys_and_its_drop_in() -> None:
    own = edit("lab-node2 NodeAddr=10.77.0.12 CPUs=2", "lab-node2 NodeAddr=10.77.0.12 CPUs=4")
    task = edit("TaskPlugin=task/cgroup,task/affinity", "TaskPlugin=task/affinity")
    for after, why in ((own, "NodeName lab-node2 (slurm.conf(5))"), (task, "taskplugin (slurm.conf(5))")):
        served = [result("slurm.conf", BEFORE, after)]
        node = apply_plan([], RUNNING, False, True, configless={"nodename": "lab-node2", "served": served})
        assert node["state"]["slurmd"] == "restarted" and node["why"] == [f"slurmd restarted for {why}"], node
        assert not node["reconfigure"]
        other = apply_plan([], RUNNING, False, True, configless={"nodename": "lab-node3", "served": served})
        assert other["state"]["slurmd"] == ("restarted" if after == task else "started"), other
    dropin = apply_plan([], RUNNING, False, True, configless={"nodename": "lab-node2", "served": [], "dropin": True})
    assert dropin["why"] == ["slurmd restarted for its drop-in (--conf-server)"]
    # Served files other than slurm.conf and keys a reconfigure applies: the controller's reconfigure, not the node's.
    served = [result("slurm.conf", BEFORE, edit("ReturnToService=1", "ReturnToService=2")), result("gres.conf")]
    quiet = apply_plan([], RUNNING, False, True, configless={"nodename": "lab-node2", "served": served})
    assert quiet == {"state": {"munge": "started", "slurmd": "started"}, "reconfigure": False, "why": []}
    ctl = apply_plan(served, RUNNING, True, False, configless={"nodename": ""})
    assert ctl["reconfigure"] and ctl["why"] == ["scontrol reconfigure for returntoservice, gres.conf"]


def test_configless_a_controller_that_restarts_still_reconfigures_the_nodes() -> None:
    after = edit("StateSaveLocation=/var/lib/slurm/slurmctld", "StateSaveLocation=/srv/slurm")
    ctl = apply_plan([result("slurm.conf", BEFORE, after)], RUNNING, True, False, configless={"nodename": ""})
    assert ctl["state"]["slurmctld"] == "restarted" and ctl["reconfigure"], ctl
    # Nothing changed: nothing to send.
    same = apply_plan([result("slurm.conf", BEFORE, BEFORE, changed=False)], RUNNING, True, True, configless={})
    assert same == {
        "state": {"munge": "started", "slurmctld": "started", "slurmd": "started"},
        "reconfigure": False,
        "why": [],
    }
