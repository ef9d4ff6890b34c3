"""The launch's checks before anything starts (tasks/assert.yml, tasks/check.yml): every reason not to launch on
the hosts (free space, the rendezvous port, the fabric between the peers), the pre-flight all-reduce's results and
the rendezvous host asked for."""

from __future__ import annotations

import json
from typing import Any


def preflight_problems(nodes: list[dict[str, Any]], min_free_mb: int, rdzv_port: int) -> list[str]:
    """Every reason not to launch, all hosts at once, each naming its host: too little free space where the
    checkpoints go, the rendezvous port already taken on node 0, a peer's fabric address that does not answer
    from this host's fabric NIC (or only below the NIC's MTU: a path with a smaller MTU drops full frames).

    Each node: `host`, `rank`, `ckpt_dir`, `df` (stdout of `df --output=avail -m`), `listeners` (stdout of
    `ss -Htln sport = :port`, node 0), `fabric_if`, `mtu`, `peers` (stdout of the peer probe: one line
    `<host> <ip> ok|small|none` per peer, see tasks/check.yml)."""
    out = []
    for node in nodes:
        host = node["host"]
        lines = [x.strip() for x in str(node.get("df") or "").splitlines() if x.strip()]
        try:
            free = int(lines[-1])
        except (IndexError, ValueError):
            out.append(f"{host}: free space in {node.get('ckpt_dir')} unknown (df said {' '.join(lines)[:120]!r})")
        else:
            if free < int(min_free_mb):
                out.append(
                    f"{host}: {free} MiB free in {node.get('ckpt_dir')} "
                    f"(need train_launch_min_free_mb={min_free_mb} for checkpoints)"
                )
        listeners = str(node.get("listeners") or "").strip()
        if int(node.get("rank", 1)) == 0 and listeners:
            out.append(f"{host}: rendezvous port {rdzv_port} is in use ({' '.join(listeners.split())[:160]})")
        for line in str(node.get("peers") or "").splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[2] == "ok":
                continue
            peer, ip, how = parts
            if how == "noping":
                out.append(f"{host}: ping is not installed: the fabric addresses cannot be checked (iputils-ping)")
            elif how == "small":
                out.append(
                    f"{host}: {peer} ({ip}) answers on {node.get('fabric_if')} only below its MTU {node.get('mtu')}"
                    " (a smaller MTU on the path drops full-size frames)"
                )
            else:
                out.append(f"{host}: {peer} ({ip}) does not answer on {node.get('fabric_if')}")
    return out


def peer_args(nodes: list[str], me: str, hostvars: Any) -> list[str]:
    """The peer probe's arguments on host `me` (tasks/check.yml): `host address` for every other launch node,
    flat, in rank order."""
    out = []
    for host in nodes:
        if host != me:
            out += [host, str(hostvars.get(host, {}).get("__train_launch_fabric_ip") or "")]
    return out


def preflight_nodes(hosts: list[str], hostvars: Any) -> list[dict[str, Any]]:
    """What preflight_problems judges, from each host's registered checks in tasks/check.yml."""
    out = []
    for host in hosts:
        hv = hostvars.get(host, {})
        fabric_if = hv.get("__train_launch_fabric_if")
        facts = (hv.get("ansible_facts") or {}).get(str(fabric_if).replace("-", "_")) or {}
        out.append(
            {
                "host": host,
                "rank": int(hv.get("__train_launch_node_rank")),
                "ckpt_dir": f"{hv.get('__train_launch_run_dir')}/out/checkpoints",
                "df": (hv.get("__train_launch_reg_df") or {}).get("stdout", ""),
                "listeners": (hv.get("__train_launch_reg_rdzv_port") or {}).get("stdout", ""),
                "fabric_if": fabric_if,
                "mtu": facts.get("mtu"),
                "peers": (hv.get("__train_launch_reg_peers") or {}).get("stdout", ""),
            }
        )
    return out


def allreduce_results(hosts: list[str], hostvars: Any) -> list[dict[str, Any]]:
    """Each host's pre-flight all-reduce from its registered command (`__train_launch_reg_allreduce`): `ok`
    (rc 0) and, for a failure, `detail`: the check's own error (its last JSON line on stdout), else the
    module's message, its stderr, or "no output"; `text` is "host: detail"."""
    out = []
    for host in hosts:
        reg = hostvars.get(host, {}).get("__train_launch_reg_allreduce") or {}
        ok = reg.get("rc", 1) == 0
        record = None
        for line in reg.get("stdout_lines") or []:
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
        if isinstance(record, dict) and record.get("error"):
            detail = str(record["error"])
        elif ok:
            detail = None
        else:
            detail = str(reg.get("msg") or reg.get("stderr") or "no output")[:300]
        out.append({"host": host, "ok": ok, "detail": detail, "text": f"{host}: {detail}"})
    return out


def rdzv_host_problems(rdzv_host: str, inventory_hosts: list[str], scheduler: str) -> list[str]:
    """What is wrong with train_launch_rdzv_host (the rendezvous store's own host; "" keeps it in node rank 0's
    agent), before anything is staged."""
    if not rdzv_host:
        return []
    out = []
    if rdzv_host not in inventory_hosts:
        out.append(f"train_launch_rdzv_host={rdzv_host} is not a host of the inventory")
    if scheduler == "slurm":
        out.append(
            "train_launch_rdzv_host (a rendezvous that outlives any node) is not offered through Slurm: Slurm ends the "
            "whole job when one of its nodes fails; use train_launch_scheduler=systemd"
        )
    return out


def payload_refusal(result: dict[str, Any], what: str = "payload/config.py") -> str:
    """Why the payload's own check refused (a registered command: rc, stdout, stderr), in its own words first: its
    `error:` lines (payload/config.py's usage_error, an argparse `prog: error:`), else the last line of stderr (a
    traceback's exception), else of stdout; then the exit status. "" when it passed."""
    rc = result.get("rc")
    if rc == 0:
        return ""
    err = [line.strip() for line in str(result.get("stderr") or "").splitlines() if line.strip()]
    said = [line.split("error:", 1)[1].strip() for line in err if line.startswith("error:") or ": error:" in line]
    if not said:
        out = [line.strip() for line in str(result.get("stdout") or "").splitlines() if line.strip()]
        said = (err or out or [str(result.get("msg") or "no output")])[-1:]
    status = f"exit code {rc}" if rc is not None else "did not run"
    return f"{'; '.join(said)} ({what} refused the payload config, {status})"


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_payload_refusal": payload_refusal,
    "train_launch_preflight_problems": preflight_problems,
    "train_launch_peer_args": peer_args,
    "train_launch_preflight_nodes": preflight_nodes,
    "train_launch_allreduce_results": allreduce_results,
    "train_launch_rdzv_host_problems": rdzv_host_problems,
}
