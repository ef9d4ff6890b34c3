"""The rendezvous store on a host of its own (plugins/module_utils/launch/rdzv.py; issue #46, item 6): the address
the nodes reach it at, the probe each node runs (here against real sockets on the loopback), the message naming
the address, port and likely cause, and which host's store unit the run-control playbooks remove."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import rdzv as R

pytestmark = pytest.mark.lint

NODES = ["lab-node1", "lab-node2"]
FABRIC3 = [{"name": "rdma0", "addresses": ["10.77.250.13/24"], "mtu": 9000}]


def hostvars(**store: dict) -> dict:
    """The launch's nodes (their fabric address from facts) and other inventory hosts as given."""
    hv = {
        "lab-node1": {"__train_launch_fabric_ip": "10.77.250.11", "ansible_host": "10.88.0.11"},
        "lab-node2": {"__train_launch_fabric_ip": "10.77.250.12", "ansible_host": "10.88.0.12"},
    }
    return hv | store


@pytest.mark.parametrize(
    ("rdzv_host", "store", "endpoint"),
    [
        ("", {}, {"address": "10.77.250.11", "network": "fabric"}),  # node rank 0's agent holds it
        ("lab-node2", {}, {"address": "10.77.250.12", "network": "fabric"}),
        # The case: a converged host outside the launch, reached at its fabric address, not at its
        # management address (its fabric firewall resets the rendezvous port there).
        (
            "lab-node3",
            {"lab-node3": {"ansible_host": "10.88.0.13", "cluster_fabric_interfaces": FABRIC3}},
            {"address": "10.77.250.13", "network": "fabric"},
        ),
        ("head1", {"head1": {"ansible_host": "10.88.0.9"}}, {"address": "10.88.0.9", "network": "management"}),
        ("head1", {"head1": {"cluster_fabric_interfaces": []}}, {"address": "head1", "network": "management"}),
    ],
)
def test_the_nodes_reach_the_store_at_its_fabric_address_where_it_has_one(rdzv_host, store, endpoint) -> None:
    assert R.rdzv_endpoint(rdzv_host, NODES, hostvars(**store)) == endpoint


def probe(port: int, seconds: float = 3) -> str:
    argv = R.rdzv_probe_argv(sys.executable, {"address": "127.0.0.1"}, port, seconds)
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def test_the_probe_says_ok_or_how_the_connection_failed() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert probe(listener.getsockname()[1]) == "ok"
    with socket.socket() as closed:  # a port nothing listens on: the kernel answers with a reset, refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    kind, _, words = probe(port, 1.5).partition(" ")
    assert kind == "refused" and words == "Connection refused"


STORE_UP = "@@unit\nActiveState=active\nResult=success\n@@listen\nLISTEN 0 128 *:29500 *:*\n@@log\nstore: listening\n"
STORE_DOWN = "@@unit\nActiveState=failed\nResult=exit-code\n@@listen\n@@log\nOSError: [Errno 98] Address in use\n"
FABRIC = {"address": "10.77.250.13", "network": "fabric"}
MGMT = {"address": "10.88.0.13", "network": "management"}


def test_the_store_hosts_report() -> None:
    assert R.store_state(STORE_UP) == {
        "unit": {"ActiveState": "active", "Result": "success"}, "listening": True, "log": "store: listening"
    }  # fmt: skip
    assert R.store_state(STORE_DOWN)["listening"] is False


@pytest.mark.parametrize(
    ("probe_out", "endpoint", "store", "cause"),
    [
        (
            "refused Connection refused",
            MGMT,
            STORE_UP,
            "connection refused although the store listens on port 29500 there: a firewall on lab-node3 rejects "
            "lab-node1 (the fabric firewall answers the project's ports from fabric sources on a fabric interface "
            "only); 10.88.0.13 is lab-node3's management address: give lab-node3 a fabric interface "
            "(cluster_fabric_interfaces), or take a store host the nodes reach there without a firewall",
        ),
        (
            "refused Connection refused",
            FABRIC,
            STORE_DOWN,
            "connection refused: nothing listens on port 29500 on lab-node3 (the store unit is failed (exit-code); "
            "its log: OSError: [Errno 98] Address in use)",
        ),
        (
            "reset Connection reset by peer",
            FABRIC,
            STORE_UP,
            "connection reset by lab-node3: a firewall there resets lab-node1, or the store dropped it",
        ),
        (
            "timeout timed out",
            FABRIC,
            STORE_UP,
            "no answer within 60 s: the packets are dropped on the way (a firewall that drops them, or no route "
            "from lab-node1 to 10.77.250.13)",
        ),
        (
            "unreachable No route to host",
            FABRIC,
            STORE_UP,
            "no route from lab-node1 to 10.77.250.13 (No route to host)",
        ),
    ],
)
def test_a_node_that_cannot_reach_the_store_is_told_where_and_why(probe_out, endpoint, store, cause) -> None:
    got = R.unreachable_message("lab-node1", "lab-node3", endpoint, 29500, probe_out, R.store_state(store), 60)
    where = f"{endpoint['address']}:29500 ({endpoint['network']} address)"
    assert got == f"lab-node1 cannot reach the rendezvous store on lab-node3 at {where}: {cause}"


def test_every_node_that_cannot_reach_the_store_is_named_and_only_those() -> None:
    hv = {
        "lab-node1": {"__train_launch_reg_rdzv_probe": {"stdout": "ok\n"}},
        "lab-node2": {"__train_launch_reg_rdzv_probe": {"stdout": "timeout timed out\n"}},
        "lab-node4": {"__train_launch_reg_rdzv_probe": {"skipped": True}},  # check mode
        "lab-node5": {"__train_launch_reg_rdzv_probe": {"stdout": "", "stderr": "python: not found"}},
    }
    got = R.rdzv_problems(list(hv), hv, "lab-node3", FABRIC, 29500, STORE_UP, 60)
    assert [p.split(" ", 1)[0] for p in got] == ["lab-node2", "lab-node5"]
    assert got[1].endswith(": python: not found (the store unit is active (success); its log: store: listening)")


@pytest.mark.parametrize(
    ("configured", "manifest", "host"),
    [
        ("", {"rdzv_host": "lab-node3"}, "lab-node3"),  # the launch's record wins over what is given now
        ("lab-node2", {"rdzv_host": ""}, ""),  # that launch had no store of its own
        ("lab-node3", {}, "lab-node3"),  # a manifest from before the record, or none: as given now
        ("lab-node3", None, "lab-node3"),
        ("", {}, ""),
    ],
)
def test_the_store_a_run_control_playbook_removes(configured, manifest, host) -> None:
    assert R.rdzv_store_host(configured, manifest) == host
