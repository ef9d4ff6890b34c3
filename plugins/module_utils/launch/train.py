"""The launch's plan as pure functions (tested in tests/unit/plugins/module_utils/launch/test_train.py): the
rank order, the payload keys of a launch (resolved by the payload's own payload/config.py), the NCCL/gloo
environment and its QoS note, the elastic rendezvous, what is staged on the hosts and the checkpoint a resume
starts from.

The rest of the launch's decisions are their own modules of this package: preflight.py (the checks before
anything starts), poll.py (what the watch reads every poll), failures.py (torchrun's worker failures),
outcome.py (the job's outcome, progress line, gate and manifest), rejoin.py (a host's share after a reboot).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import nccl as nccl_rules

# Payload keys the role sets itself from its own variables (staged paths, the run directory).
ROLE_KEYS = {
    "data": "train_launch_data or train_launch_data_on_hosts",
    "out_dir": "train_launch_root (the run directory)",
}


def rank_order(hosts: list[str], hostvars: Any) -> list[str]:
    """Hosts sorted by node rank: `hostvars[host].cluster_node_rank` where set, else the position in `hosts`."""
    ranked = []
    for index, host in enumerate(hosts):
        value = hostvars.get(host, {}).get("cluster_node_rank")
        try:
            rank = index if value is None or value == "" else int(value)
        except (TypeError, ValueError) as e:
            raise RuleError(f"{host}: cluster_node_rank={value!r} is not an integer") from e
        ranked.append((rank, host))
    ranked.sort()
    got = [r for r, _ in ranked]
    if got != list(range(len(hosts))):
        listed = ", ".join(f"{h}={r}" for r, h in ranked)
        raise RuleError(
            f"node ranks must be 0..{len(hosts) - 1}, each once, for the hosts of this launch; got {listed}"
            " (cluster_node_rank from the inventory, else the position in the group)"
        )
    return [h for _, h in ranked]


def payload_values(
    payload: dict[str, Any] | None, overrides: dict[str, Any] | None, role_values: dict[str, Any]
) -> dict[str, Any]:
    """The payload keys of a launch: `payload` < `overrides` (short extra-vars, None = not given) < role values.

    Only merged here: the payload's own `config.py resolve` then judges them (unknown keys, types, choices,
    ranges, with the payload's messages) and returns the resolved config the launch keeps. A `model` that
    is a path (it has a `/` or starts with `.`; presets never do) becomes `init_from`, a local model dir."""
    if payload is not None and not isinstance(payload, dict):
        raise RuleError(f"train_launch_payload must be a mapping of payload keys, got {payload!r}")
    values = dict(payload or {})
    for key in ROLE_KEYS:
        if key in values:
            raise RuleError(f"train_launch_payload: {key!r} is set by the role; use {ROLE_KEYS[key]}")
    for key, value in (overrides or {}).items():
        if value is None or value == "":
            continue
        if key == "model" and ("/" in str(value) or str(value).startswith(".")):
            values.pop("model", None)
            key = "init_from"
        values[key] = value
    values.update(role_values)
    return values


def nccl_env(
    fabric_if: str,
    rdma: dict[str, Any],
    threads: int,
    gpus: int,
    qos_env: dict[str, Any] | None = None,
    allow_tcp: bool = False,
    host: str = "",
    log_dir: str = "",
    flight: Any = 0,
) -> dict[str, str]:
    """Environment of the job on one host.

    `rdma` is the endpoint rdma_stack_endpoint found for the fabric interface: an RDMA device present but no
    GID carrying the fabric address means NCCL would silently fall back to TCP (or pick a wrong GID): that fails
    unless the user opts into TCP. `qos_env` is the host's QoS fact (ansible_local.rdma_qos.nccl_env,
    NCCL_IB_TC ...). On GPUs NCCL writes its account of the transport it chose to `log_dir`/nccl.<host>.<pid>.log
    (INIT and NET lines, and its warnings) for the run report. `flight` entries (0: off) turn on PyTorch's flight
    recorder for every process group: each rank dumps it to `log_dir`/fr-rank<rank>.json when the watch touches
    `log_dir`/.fr-request (payload/flight.py), and NCCL's watchdog by itself at a collective's timeout
    (`log_dir`/nccl_trace_rank_<rank>, torch's pickle)."""
    env = {
        "GLOO_SOCKET_IFNAME": fabric_if,
        # Reliable restarts of the c10d rendezvous (the shared TCP store broke 2 of 5 restarts in the lab).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "OMP_NUM_THREADS": str(max(int(threads), 1)),
        "PYTHONUNBUFFERED": "1",
        # torch logs in local time without a zone: UTC on every host makes the hosts' logs comparable.
        "TZ": "UTC",
    }
    env.update(nccl_rules.nccl_env(rdma, qos_env, fabric_if))
    if not rdma.get("hca"):
        if rdma.get("devices") and not allow_tcp:
            raise RuleError(
                f"{host}: {rdma.get('note', 'no RDMA GID carries the fabric address')}; NCCL would fall back to TCP. "
                "Fix the fabric address / RoCE GID table (show_gids), or set train_launch_allow_tcp=true to train "
                "over TCP"
            )
        env["NCCL_IB_DISABLE"] = "1"
    if int(gpus) == 0:
        env.update(DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    elif log_dir:  # to a file: the job's own log stays readable
        env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=f"{log_dir}/nccl.%h.%p.log")
    entries = int(flight or 0)
    if entries < 0:
        raise RuleError(f"train_launch_flight_recorder={flight} must be 0 (off) or a number of entries")
    if entries and log_dir:
        # torch reads TORCH_FR_BUFFER_SIZE for every backend (2.6+), the NCCL name before it.
        env.update(TORCH_FR_BUFFER_SIZE=str(entries), TORCH_NCCL_TRACE_BUFFER_SIZE=str(entries))
        env["RDMA_LLM_FR_REQUEST"] = f"{log_dir}/.fr-request"
        if int(gpus):
            env.update(TORCH_NCCL_DUMP_ON_TIMEOUT="1", TORCH_NCCL_DEBUG_INFO_TEMP_FILE=f"{log_dir}/nccl_trace_rank_")
    return env


def qos_note(qos_env: dict[str, Any] | None, rdma: dict[str, Any]) -> str:
    """What the plan line says of the host's QoS fact (ansible_local.rdma_qos.nccl_env): the NCCL traffic class
    or service level the job gets, or why it gets none. nccl_env applies it only where NCCL uses RDMA."""
    if not qos_env:
        return "none (no rdma_qos fact on the host: NCCL traffic rides the default class)"
    text = " ".join(f"{k}={v}" for k, v in sorted(qos_env.items()))
    return text if rdma.get("hca") else f"{text} unused (NCCL does not use RDMA here)"


def elastic_plan(min_nodes: Any, nodes: int, max_restarts: Any, last_call: Any, engine: str = "ddp") -> dict[str, Any]:
    """torchrun's node count for a launch of `nodes` nodes that may go on with `min_nodes` (0 = all of them).

    Fewer than all makes the rendezvous elastic (`--nnodes=MIN:MAX`): when a node is lost for good, the
    survivors' agents restart their workers (one of `max_restarts`), the rendezvous drops the silent node
    after its heartbeats stop and completes with the survivors once `last_call` seconds have passed, and the
    payload resumes from its latest checkpoint at the new world size. A continuation is a restart, so it
    needs max_restarts >= 1. Only DDP: its checkpoint is whole on every node, while a DeepSpeed or FSDP
    checkpoint holds shards of the lost node that the survivors cannot read."""

    def number(name: str, value: Any) -> int:
        try:
            return int(str(value).strip())
        except ValueError as e:
            raise RuleError(f"{name}={value!r} is not a whole number") from e

    wanted, restarts, wait = (
        number("train_launch_min_nodes", min_nodes),
        number("train_launch_max_restarts", max_restarts),
        number("train_launch_rdzv_last_call", last_call),
    )
    if not 0 <= wanted <= nodes:
        raise RuleError(
            f"train_launch_min_nodes={wanted} must be between 1 and the {nodes} node(s) of this launch"
            " (0 = all of them)"
        )
    least = wanted or nodes
    if least < nodes and restarts < 1:
        raise RuleError(
            f"train_launch_min_nodes={least} below the {nodes} nodes of this launch needs train_launch_max_restarts"
            " >= 1: going on with fewer nodes is a restart of the survivors"
        )
    if least < nodes and engine != "ddp":
        raise RuleError(
            f"train_launch_min_nodes={least} below the {nodes} nodes of this launch needs engine ddp, not {engine}:"
            " a sharded checkpoint keeps part of the state on the node that would be lost"
        )
    if least < nodes and wait < 1:
        raise RuleError(f"train_launch_rdzv_last_call={wait} must be at least 1 second")
    elastic = least < nodes
    return {
        "min_nodes": least,
        "max_nodes": nodes,
        "elastic": elastic,
        "nnodes": f"{least}:{nodes}" if elastic else str(nodes),
        # Once min_nodes have joined, the rendezvous waits this long for the others (all joined: it completes).
        "rdzv_conf": f",last_call_timeout={wait}" if elastic else "",
    }


def stage_packs(payload_src: str, data_src: str = "", model_src: str = "") -> list[dict[str, str]]:
    """What the launch packs on the controller and stages on every host: the payload always, the corpus and the
    model directory where they come from the controller (absolute paths; empty: not staged). `top` is the
    directory's name inside its pack."""
    packs = [("payload", payload_src), ("data", data_src), ("model", model_src)]
    for name, src in packs:
        if src and not str(src).startswith("/"):
            raise RuleError(f"stage: the {name} source must be an absolute path on the controller, got {src!r}")
    top = posixpath.basename
    return [{"name": name, "src": str(src), "top": top(str(src).rstrip("/"))} for name, src in packs if src]


def staged_packs(packs: list[dict[str, str]], checksums: list[str], root: str) -> dict[str, dict[str, str]]:
    """Each pack's place on the hosts, named by its checksum (a re-run copies nothing; a changed source is a new
    directory): name -> {sha, dir, path (dir/top, what the payload reads)} plus the pack's own keys."""
    if len(packs) != len(checksums) or not all(checksums):
        raise RuleError(f"stage: {len(packs)} packs but checksums {checksums!r}")
    out = {}
    for pack, sha in zip(packs, checksums, strict=True):
        folder = f"{root}/stage/{pack['name']}-{sha[:16]}"
        out[pack["name"]] = {**pack, "sha": sha, "dir": folder, "path": f"{folder}/{pack['top']}"}
    return out


_STEP = re.compile(r"step_(\d+)$")


def common_checkpoint(per_host: list[list[str]]) -> str:
    """The newest checkpoint (`step_<n>` directory name) present on every host, by step number; "" when
    no checkpoint is on all of them (or there are no hosts)."""
    if not per_host:
        return ""
    common = set(per_host[0]).intersection(*per_host[1:])
    steps = [(int(m[1]), name) for name in common if (m := _STEP.search(name))]
    return max(steps)[1] if steps else ""


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_rank_order": rank_order,
    "train_launch_payload_values": payload_values,
    "train_launch_nccl_env": nccl_env,
    "train_launch_qos_note": qos_note,
    "train_launch_elastic_plan": elastic_plan,
    "train_launch_stage_packs": stage_packs,
    "train_launch_staged_packs": staged_packs,
    "train_launch_common_checkpoint": common_checkpoint,
}
