"""validate.yml with a node that does not answer, on the controller alone (no lab): the ladder still writes its
verdict, rung `inventory` fails naming the node and why, the later rungs skip (or, keep going, run on the node
that answers and say which they left out), and the exit code is non-zero.

The node that answers is the controller itself (local connection); the other one points at a closed loopback
port and comes first in the inventory, so the ladder's run_once tasks land on the node that is down.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, ladder_rungs, playbook, tail

pytestmark = pytest.mark.lint

REFUSED = "ssh: connect to host 127.0.0.1 port 9: Connection refused"


LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "iface": "lo"}
# A node that answers until rung `inventory` has recorded its fabric address, then points at the closed port:
# it stops answering at the first task of rung `reachability`, in the middle of the ladder.
GOES = {
    **LOCAL,
    "ansible_connection": "{{ 'ssh' if hostvars['goes']['__cluster_validate_addr'] is defined else 'local' }}",
    # Not 127.0.0.1 while it answers over the local connection: its fabric interface here is `lo`, and preflight
    # refuses a fabric interface that holds the host's ansible_host (it carries the connection).
    "ansible_host": "{{ '127.0.0.1' if hostvars['goes']['__cluster_validate_addr'] is defined else 'goes' }}",
    "ansible_port": 9,
}


def inventory(tmp_path: Path, first: tuple[str, dict] | None = None) -> Path:
    """The node `first` (default: down1, which never answers) before the node that answers, `here`."""
    inv = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventory" / "lab" / "group_vars", inv / "group_vars")
    name, spec = first or ("down1", {"ansible_host": "127.0.0.1", "ansible_port": 9, "iface": "rdma0"})
    nodes = {name: {**spec, "addr": "10.99.0.1/24"}, "here": {**LOCAL, "addr": "10.99.0.2/24"}}
    hosts = {
        name: {
            **{k: v for k, v in spec.items() if k.startswith("ansible_")},
            "cluster_fabric_interfaces": [{"name": spec["iface"], "addresses": [spec["addr"]], "mtu": 9000}],
        }
        for name, spec in nodes.items()
    }
    data = {
        "all": {
            "children": {
                "rdma_nodes": {"hosts": hosts},
                "subnet_managers": {"hosts": {"here": None}},
                "switches": {"hosts": {}},
            }
        }
    }
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))
    return inv


def validate(tmp_path: Path, *args: str, first: tuple[str, dict] | None = None):
    out = tmp_path / "validate"
    # The scratch directory of the probes, per test: the node that answers is this machine.
    extra = ["-e", f"cluster_validate_artifacts_dir={out}", "-e", f"__cluster_validate_scratch={tmp_path / 'scratch'}"]
    proc = playbook("playbooks/validate.yml", *extra, *args, inventory=inventory(tmp_path, first), timeout=300)
    folders = sorted(out.iterdir()) if out.exists() else []
    assert len(folders) == 1, "validate.yml wrote no verdict:\n" + tail(proc)
    verdict = json.loads((folders[0] / "verdict.json").read_text())
    return proc, verdict, (folders[0] / "report.md").read_text()


def test_unreachable_node_fails_inventory_and_stops(tmp_path: Path) -> None:
    proc, verdict, report = validate(tmp_path)
    assert proc.returncode == 2, tail(proc)
    assert verdict["status"] == "fail" and verdict["first_failure"] == "inventory" and verdict["stopped_early"]
    assert verdict["hosts"] == ["down1", "here"] and verdict["bad_hosts"] == ["down1"]
    assert verdict["left_out"] == {"down1": REFUSED}
    first, *later = verdict["rungs"]
    assert first["name"] == "inventory" and first["status"] == "fail", first
    assert first["reason"] == f"down1: unreachable over SSH ({REFUSED}); host checks not run", first
    # The node that answers passed its preflight checks (the inventory contract was checked too).
    assert [c["status"] for c in first["checks"] if c["host"] == "here"] == ["pass"], first["checks"]
    assert [r["name"] for r in later] == ladder_rungs()[1:] and all(r["status"] == "skip" for r in later), later
    assert {r["reason"] for r in later} == {"not run: the ladder stopped at the failing rung inventory"}
    flat = " ".join(proc.stdout.split())
    assert f"[FAIL] inventory 1 hosts (threshold 2) bad hosts: down1 — down1: unreachable over SSH ({REFUSED})" in flat
    assert "[SKIP] tcp_bw — not run: the ladder stopped at the failing rung inventory" in flat
    assert "verdict: FAIL at inventory; bad host(s): down1" in flat
    assert "Bad host(s): down1;" in report and f"down1 ({REFUSED})" in report


def test_unreachable_node_keep_going_runs_the_rest_without_it(tmp_path: Path) -> None:
    proc, verdict, _ = validate(tmp_path, "-e", "keep_going=true")
    assert proc.returncode == 2, tail(proc)
    assert verdict["first_failure"] == "inventory" and not verdict["stopped_early"], verdict["rungs"]
    by = {r["name"]: r for r in verdict["rungs"]}
    # Every later rung ran (it has a decision time) on the node that answers, and says it left down1 out.
    for name in ("reachability", "node_health", "path_mtu", "tcp_bw", "allreduce", "switch", "nic_counters", "train"):
        assert "at" in by[name] and by[name]["left_out"] == ["down1"], by[name]
        assert "left out down1 (unreachable over SSH, see inventory)" in by[name]["reason"], by[name]
    assert by["reachability"]["status"] == "pass" and by["node_health"]["status"] == "pass", verdict["rungs"]
    assert verdict["bad_hosts"] == ["down1"]
    assert not (tmp_path / "scratch").exists(), "the probes' scratch directory was not removed"


@pytest.mark.parametrize("keep_going", [False, True])
def test_node_lost_mid_ladder_fails_its_rung_naming_it(tmp_path: Path, keep_going: bool) -> None:
    """A node that passed rung `inventory` and stops answering in rung `reachability`: Ansible drops it from the
    play; that rung fails naming it and why, the ladder stops there (or, keep going, runs the rest without it and
    says so), the verdict is written. Exit code 4 (Ansible's, for an unreachable host)."""
    proc, verdict, report = validate(tmp_path, "-e", f"keep_going={keep_going}", first=("goes", GOES))
    assert proc.returncode == 4, tail(proc)
    by = {r["name"]: r for r in verdict["rungs"]}
    assert by["inventory"]["status"] == "pass", by["inventory"]
    lost = by["reachability"]
    assert lost["status"] == "fail" and lost["lost"] == ["goes"] and lost["bad_hosts"] == ["goes"], lost
    assert lost["reason"].startswith(f"goes: left the play during this rung (unreachable over SSH: {REFUSED})"), lost
    assert verdict["first_failure"] == "reachability" and verdict["bad_hosts"] == ["goes"], verdict
    assert verdict["left_out"] == {"goes": f"unreachable over SSH: {REFUSED}"}, verdict["left_out"]
    flat = " ".join(proc.stdout.split())
    assert "verdict: FAIL at reachability; bad host(s): goes" in flat, tail(proc)
    assert "Bad host(s): goes;" in report
    if not keep_going:
        assert verdict["stopped_early"], verdict
        assert all(r["status"] == "skip" for r in verdict["rungs"][2:]), verdict["rungs"]
        return
    # The node that answers ran every later rung alone; each says which node it left out and since when.
    for name in ("node_health", "path_mtu", "tcp_bw", "allreduce", "switch", "nic_counters", "train"):
        assert "at" in by[name] and by[name]["left_out"] == ["goes"], by[name]
        assert "left out goes (left the play during reachability)" in by[name]["reason"], by[name]
    assert by["node_health"]["status"] == "pass", by["node_health"]
    assert not (tmp_path / "scratch").exists(), "the probes' scratch directory was not removed"
