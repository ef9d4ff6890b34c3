"""The rendezvous store on a host of its own (train_launch_rdzv_host, tasks/rdzv_start.yml): the address the nodes
reach it at, the probe each node runs against it and, when one cannot, the message naming the address, the port
and the likely cause; which host's store unit a run-control playbook removes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.fabric import fabric_address


def rdzv_endpoint(rdzv_host: str, nodes: list[str], hostvars: Any) -> dict[str, str]:
    """Where the agents reach the rendezvous: {"address", "network"}. No store host: node rank 0's fabric address
    (its agent holds the store). A store host among the nodes: its fabric address from its facts. Another host: its
    fabric address from the inventory (cluster_fabric_interfaces) where it has one - a converged host's fabric
    firewall answers the rendezvous port from fabric sources on a fabric interface only, so its management address
    resets the nodes -, else its management address (ansible_host): a host without a fabric has no fabric firewall."""
    if not rdzv_host:
        return {"address": str(hostvars[nodes[0]]["__train_launch_fabric_ip"]), "network": "fabric"}
    hv = hostvars[rdzv_host]
    if rdzv_host in nodes:
        return {"address": str(hv["__train_launch_fabric_ip"]), "network": "fabric"}
    fabric = fabric_address(hv.get("cluster_fabric_interfaces"))
    if fabric:
        return {"address": fabric, "network": "fabric"}
    return {"address": str(hv.get("ansible_host") or rdzv_host), "network": "management"}


# One node's look at the store (argv[1:]: address, port, seconds): connect until it answers or the time is up, then
# print `ok` or the last failure's kind (refused, reset, timeout, unreachable) and the system's words. Standard
# library only: it runs on the training venv's python.
PROBE = r"""
import errno, socket, sys, time
host, port, until = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
KINDS = {errno.ECONNREFUSED: "refused", errno.ECONNRESET: "reset", errno.ETIMEDOUT: "timeout",
         errno.EHOSTUNREACH: "unreachable", errno.ENETUNREACH: "unreachable"}
last = "timeout no attempt"
while time.monotonic() < until:
    try:
        socket.create_connection((host, port), timeout=max(min(5.0, until - time.monotonic()), 0.1)).close()
        print("ok")
        sys.exit(0)
    except socket.timeout:
        last = "timeout timed out"
    except OSError as e:
        last = f"{KINDS.get(e.errno, 'error')} {e.strerror or e}"
    time.sleep(min(1.0, max(until - time.monotonic(), 0)))
print(last)
"""


def rdzv_probe_argv(python: str, endpoint: Mapping[str, str], port: Any, seconds: Any) -> list[str]:
    """The probe's command line on a node (tasks/rdzv_start.yml)."""
    return [python, "-c", PROBE, str(endpoint["address"]), str(int(port)), str(float(seconds))]


def store_state(output: str) -> dict[str, Any]:
    """The store host's report (rdzv_start.yml: `@@unit` systemctl show, `@@listen` ss -Htln on the port, `@@log`
    the unit's log tail): {"unit": {ActiveState, Result}, "listening", "log"}."""
    unit_text, _, rest = (output or "").partition("@@listen\n")
    listen, _, log = rest.partition("@@log\n")
    unit = dict(line.split("=", 1) for line in unit_text.partition("@@unit\n")[2].splitlines() if "=" in line)
    tail = [line.strip() for line in log.splitlines() if line.strip()]
    return {"unit": unit, "listening": bool(listen.strip()), "log": " | ".join(tail[-3:])}


def unreachable_message(
    node: str, store: str, endpoint: Mapping[str, str], port: Any, probe: str, state: Mapping[str, Any], seconds: Any
) -> str:
    """Why `node` could not reach the store on `store`: the address and port it tried and the likely cause, from
    its probe's last failure and the store host's own report (store_state)."""
    kind, _, words = (probe or "").strip().partition(" ")
    where = f"{endpoint['address']}:{int(port)}"
    unit = state.get("unit") or {}
    running = f"the store unit is {unit.get('ActiveState', '?')} ({unit.get('Result', '?')})"
    log = f"; its log: {state['log']}" if state.get("log") else ""
    management = (
        f"; {endpoint['address']} is {store}'s management address: give {store} a fabric interface "
        "(cluster_fabric_interfaces), or take a store host the nodes reach there without a firewall"
        if endpoint.get("network") == "management"
        else ""
    )
    if kind == "refused" and state.get("listening"):
        cause = (
            f"connection refused although the store listens on port {int(port)} there: a firewall on {store} "
            f"rejects {node} (the fabric firewall answers the project's ports from fabric sources on a fabric "
            f"interface only){management}"
        )
    elif kind == "refused":
        cause = f"connection refused: nothing listens on port {int(port)} on {store} ({running}{log})"
    elif kind == "reset":
        cause = f"connection reset by {store}: a firewall there resets {node}, or the store dropped it{management}"
    elif kind == "timeout":
        cause = (
            f"no answer within {float(seconds):.0f} s: the packets are dropped on the way (a firewall that drops "
            f"them, or no route from {node} to {endpoint['address']}){management}"
        )
    elif kind == "unreachable":
        cause = f"no route from {node} to {endpoint['address']} ({words})"
    else:
        cause = f"{words or kind or 'no answer from the probe'} ({running}{log})"
    return (
        f"{node} cannot reach the rendezvous store on {store} at {where} ({endpoint.get('network')} address): {cause}"
    )


def rdzv_problems(
    hosts: list[str], hostvars: Any, store: str, endpoint: Mapping[str, str], port: Any, output: str, seconds: Any
) -> list[str]:
    """Every node that could not reach the store (its registered probe, __train_launch_reg_rdzv_probe), with why."""
    state = store_state(output)
    out = []
    for host in hosts:
        probe = hostvars[host].get("__train_launch_reg_rdzv_probe") or {}
        if probe.get("skipped") or str(probe.get("stdout", "")).strip() == "ok":
            continue
        said = str(probe.get("stdout") or "").strip() or f"error {str(probe.get('stderr') or '').strip()[-200:]}"
        out.append(unreachable_message(host, store, endpoint, port, said, state, seconds))
    return out


def rdzv_store_host(configured: str, manifest: Mapping[str, Any] | None) -> str:
    """The host whose store unit a run-control playbook (train_status, train_stop, train_collect) looks at and
    removes: the one the launch recorded in its manifest (`rdzv_host`), else train_launch_rdzv_host as given now
    (a launch that failed before it wrote a manifest)."""
    recorded = (manifest or {}).get("rdzv_host")
    return str(recorded if recorded is not None else configured or "")


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_rdzv_endpoint": rdzv_endpoint,
    "train_launch_rdzv_probe_argv": rdzv_probe_argv,
    "train_launch_rdzv_problems": rdzv_problems,
    "train_launch_rdzv_store_host": rdzv_store_host,
}
