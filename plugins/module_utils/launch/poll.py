"""What the watch (plugins/action/train_launch_watch.py) reads on a host every poll, and how it reads it: the
host's share of the job (systemd's unit properties and its rejoin unit's, or the Slurm engine's records:
slurm_state.py), the fabric link, rank 0's latest metrics, this launch's worker failures (failures.py), the RDMA
ports' counters and the PFC pause counters of the no-drop priority."""

from __future__ import annotations

import json
import re
import shlex

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_state
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.failures import worker_failures
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.rejoin import (
    REJOIN_PROPS,
    WATCHED,
    rejoin_unit_name,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node import config as node_check

# Read by the watch action (plugins/action/train_launch_watch.py); here so pytest needs no ansible import.
PROPS = (
    "LoadState,ActiveState,SubState,Result,ExecMainCode,ExecMainStatus,ExecMainStartTimestamp,"
    "ExecMainExitTimestamp,NRestarts"
)


def poll_script(
    unit: str,
    run_dir: str,
    fabric_if: str,
    launch_id: str,
    engine: str = "systemd",
    job_id: str = "",
    nodrop_prio: int = 3,
) -> str:
    """The watch's one shell command per poll (parse_poll splits its output): the host's share of the job (the
    systemd engine: its unit's properties, read from the record saved beside its logs, logs/unit.show, once the unit
    was released after collection; the Slurm engine: slurm_state.poll_head), then poll_tail."""
    if engine == "slurm":
        head = slurm_state.poll_head(job_id, run_dir)
    else:
        q, saved = shlex.quote(unit), shlex.quote(run_dir + "/logs/unit.show")
        rejoin = shlex.quote(rejoin_unit_name(unit))
        watched = shlex.quote(f"{run_dir}/{WATCHED}")
        head = (
            # When the watch last read this host: a rejoin after a reboot starts only soon after (rejoin_check).
            f"touch {watched} 2>/dev/null; "
            f"p=$(systemctl show {q} --timestamp=us+utc -p {PROPS}); "
            f"if printf '%s\\n' \"$p\" | grep -qx LoadState=not-found && [ -s {saved} ]; then cat {saved}; "
            "else printf '%s\\n' \"$p\"; fi; "
            # The unit that brings the share back after a reboot (rejoin_unit_text), its keys prefixed `Rejoin`.
            f"systemctl show {rejoin} -p {REJOIN_PROPS} | sed 's/^/Rejoin/'; "
        )
    return head + poll_tail(run_dir, fabric_if, launch_id, nodrop_prio=nodrop_prio)


# The NIC counters every poll samples for the run's fabric account (fabric.py): rdma-node-check's error
# counters and the congestion counters it reports (CNPs, ECN marks, out-of-buffer drops).
SAMPLED_COUNTERS = (*node_check.DEFAULTS["error_counters"], *node_check.DEFAULTS["report_counters"])
_COUNTER_LINE = re.compile(r"/class/infiniband/([^/]+)/ports/(\d+)/(?:hw_)?counters/(\w+) (\d+)$")


def poll_tail(
    run_dir: str, fabric_if: str, launch_id: str, sysfs: str = "/sys", nodrop_prio: int = 3, ethtool: str = "ethtool"
) -> str:
    """What both engines' polls read after the host's share: the fabric link state, rank 0's latest metrics, the
    worker failures torchrun logged in this launch (after its marker in logs/torchrun.log), the RDMA ports'
    SAMPLED_COUNTERS (none without an RDMA device) and the fabric interface's PFC pause counters of the no-drop
    priority (`ethtool -S`: the pauses its switch port sent and received; none where the driver has no such
    counters). `sysfs`, `ethtool`: another root and a stand-in, for the tests."""
    marker = f"=== launch {launch_id} ==="
    names = " ".join(SAMPLED_COUNTERS)
    pause = node_check.PAUSE_COUNTER.format(prio=int(nodrop_prio))
    return (
        "echo @@link; "
        f"cat /sys/class/net/{shlex.quote(fabric_if)}/operstate 2>/dev/null; echo @@metrics; "
        f"tail -n 20 {shlex.quote(run_dir + '/out/metrics.jsonl')} 2>/dev/null; echo @@failures; "
        f"awk -v m={shlex.quote(marker)} '$0 == m {{f = 1; next}} "
        "f && (/failed \\(exitcode: / || /^(\\[rank[0-9]+\\]: *)?error: /)' "
        f"{shlex.quote(run_dir + '/logs/torchrun.log')} 2>/dev/null | tail -n 10; echo @@counters; "
        f"for d in {shlex.quote(sysfs)}/class/infiniband/*/ports/*; do for g in counters hw_counters; do "
        f'for n in {names}; do f=$d/$g/$n; [ -r $f ] && echo "$f $(cat $f)"; done; done; done; '
        # ethtool lives in sbin, which a non-login shell's PATH may lack.
        f"echo @@pause; PATH=$PATH:/usr/sbin:/sbin {shlex.quote(ethtool)} -S {shlex.quote(fabric_if)} 2>/dev/null "
        f"| grep -E {shlex.quote('^ *' + pause + ':')}; true"
    )


def parse_poll_counters(stdout: str, fabric_if: str = "") -> dict[str, dict[str, int]]:
    """The poll's `@@counters` section: {"mlx5_0:1": {counter: value}}, and its `@@pause` section under the fabric
    interface's name: {"rdma0": {"rx_prio3_pause": value}} ({} without an RDMA device or pause counters)."""
    out: dict[str, dict[str, int]] = {}
    counters, _, pause = stdout.partition("@@counters\n")[2].partition("@@pause\n")
    for line in counters.splitlines():
        m = _COUNTER_LINE.search(line.strip())
        if m:
            out.setdefault(f"{m.group(1)}:{m.group(2)}", {})[m.group(3)] = int(m.group(4))
    for line in pause.splitlines():
        name, _, value = line.strip().partition(":")
        if value.strip().isdigit():
            out.setdefault(fabric_if or "fabric", {})[name] = int(value)
    return out


def unit_state(props: dict[str, str]) -> str:
    """running | completed | failed | stopped | missing | rejoining, from `systemctl show` (the unit has
    RemainAfterExit); a Slurm share (props of slurm_state.share_props, `Engine=slurm`) by
    slurm_state.share_state, which adds `pending` while the job waits in the queue. `rejoining`: the host
    restarted (the transient unit went with the boot) and its rejoin unit has not run yet in this boot."""
    if props.get("Engine") == "slurm":
        return slurm_state.share_state(props)
    if props.get("LoadState") == "not-found":
        # Not yet run in this boot (its condition never checked: systemd keeps that per boot), or running now. A
        # rejoin its condition skipped (the run ended, or counted the host lost: rejoin_check) leaves it missing.
        unchecked = props.get("RejoinConditionTimestampMonotonic", "0") in ("", "0")
        rejoin = props.get("RejoinActiveState")
        waiting = rejoin == "activating" or (rejoin == "inactive" and unchecked)
        return "rejoining" if props.get("RejoinLoadState") == "loaded" and waiting else "missing"
    active = props.get("ActiveState")
    if active == "failed":
        return "failed"
    if active == "active" and props.get("SubState") == "exited":
        return "completed"
    if active in ("active", "activating", "deactivating", "reloading"):
        return "running"
    return "stopped"


def parse_poll(stdout: str) -> tuple[dict[str, str], str, dict | None, list[dict]]:
    """Split the poll command's output: the host's share (systemd's unit properties, or the Slurm engine's
    `@@step`/`@@job` head read by slurm_state.share_props), the fabric link state, rank 0's latest metrics, and
    the worker failures torchrun logged in this launch."""
    props_text, _, rest = stdout.partition("@@link\n")
    link, _, rest = rest.partition("@@metrics\n")
    metrics_text, _, failures_text = rest.partition("@@failures\n")
    failures_text = failures_text.partition("@@counters\n")[0]
    if props_text.startswith("@@step\n"):
        props = slurm_state.share_props(props_text)
    else:
        props = dict(line.split("=", 1) for line in props_text.splitlines() if "=" in line)
    metrics = None
    for line in metrics_text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("rank") == 0:
            metrics = record
    return props, link.strip(), metrics, worker_failures(failures_text)
