"""The rungs that run jobs: the scheduler (every node an idle Slurm node, one srun step on each, the topology
Slurm reports against the inventory's) and the short training run (train_launch's report).

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import (
    check,
    fmt,
    good_hosts,
    make_rung,
    rung_from_checks,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_nodes as slurm_launch
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import topology as slurm_rules


def slurm_topology(hostvars, groups, found, mode="auto"):
    """The topology.conf lines the inventory gives (the slurm role's rule, module_utils/slurm/topology.py, from
    the switches' RoCE ports), with each node under the NodeName Slurm knows it by (`found`: host -> its
    `scontrol show node` fields, slurm_launch.node_map; a node not found keeps its short name). None where the
    role writes no topology.conf (slurm_topology: none, or no switch in the inventory)."""
    if mode != "auto":
        return None
    nodes = list(groups.get(slurm_rules.NODES) or [])
    switches = list(groups.get(slurm_rules.SWITCHES) or [])
    if not switches:
        return None
    nodename = {h: (found.get(h) or {}).get("NodeName") or h.split(".")[0] for h in nodes}
    names = slurm_rules.host_aliases(hostvars, nodes, switches)
    return slurm_rules.topology(slurm_rules.switch_ports(hostvars, switches), nodes, names, nodename)["lines"]


# A node the ladder's srun may use: idle (a node running another job would share the ladder's stress tests).
SLURM_READY = ("IDLE",)


def evaluate_slurm(nodes, topology_text, srun, hosts, aliases, expected_topology=None, skip_reason=None):
    """The scheduler: every node of the ladder is a Slurm node, idle and neither down nor drained (a node
    rdma-node-check drained is named with the check's reason), one `srun` step answers from every node (its
    SLURMD_NODENAME), and the topology Slurm reports (`scontrol show topology`) equals the inventory's
    (slurm_topology's lines; None: no topology.conf is expected).

    nodes, srun: {"rc", "stdout", "stderr"} of `scontrol show nodes --oneliner` and of the step; aliases: host ->
    the names Slurm may know it by (slurm_launch.aliases)."""
    if skip_reason:
        return make_rung("slurm", "skip", reason=skip_reason, unit="hosts", threshold=len(hosts))
    if nodes.get("rc") != 0:
        why = " ".join((nodes.get("stderr") or nodes.get("msg") or "").split())[-300:]
        return make_rung(
            "slurm", "fail", reason=f"scontrol show nodes failed: {why}", unit="hosts", threshold=len(hosts),
            value=0, bad_hosts=[],
        )  # fmt: skip
    found = slurm_launch.node_map(nodes.get("stdout") or "", aliases)
    answered = set((srun.get("stdout") or "").split())
    srun_error = " ".join((srun.get("stderr") or "").split())[-300:] or f"srun exit {srun.get('rc')}"
    checks = []
    for host in hosts:
        fields = found.get(host)
        if not fields:
            names = ", ".join(aliases.get(host) or [host])
            checks.append(check(host, "slurm node", "fail", f"not a Slurm node (none is named {names})"))
            continue
        name, words = fields.get("NodeName", "?"), slurm_launch.node_words(fields)
        reason = f": {fields['Reason']}" if fields.get("Reason") else ""
        if [w for w in words if w in slurm_launch.UNUSABLE]:
            checks.append(check(host, "slurm node", "fail", f"Slurm node {name} is {fields.get('State')}{reason}"))
        elif words[:1] != ["IDLE"]:
            checks.append(
                check(host, "slurm node", "fail", f"Slurm node {name} is {fields.get('State')}, not idle: a job runs")
            )
        else:
            checks.append(check(host, "slurm node", "pass", f"Slurm node {name} idle"))
        if name in answered:
            checks.append(check(host, "srun", "pass", f"srun step ran on {name}"))
        else:
            checks.append(check(host, "srun", "fail", f"srun step did not run on {name}: {srun_error}"))
    if expected_topology is not None:
        differences = slurm_launch.topology_differences(list(expected_topology), topology_text or "")
        checks.append(
            check("", "topology", "fail" if differences else "pass", "; ".join(differences) or "as the inventory")
        )
    good = good_hosts(hosts, checks)
    topo = next((c for c in checks if c["check"] == "topology"), None)
    return rung_from_checks(
        "slurm",
        checks,
        value=len(good),
        threshold=len(hosts),
        unit="hosts",
        pass_reason="topology " + ("as the inventory" if topo else "not configured (no topology.conf)"),
        nodes={h: f.get("NodeName") for h, f in found.items()},
    )


def evaluate_train(report, floor_tokens_per_s, skip_reason=None, min_mfu=0.0):
    """Short training run: outcome completed, tokens/s (whole job) at or above the floor, and on GPUs MFU at or
    above min_mfu. On CPUs the payload's MFU is an estimate against a guessed peak: reported, never judged.

    report: the launch's report.json (plugins/module_utils/launch/report.py), its `results` the hosts' result.json.
    """
    unit = "tokens/s"
    if skip_reason:
        return make_rung("train", "skip", reason=skip_reason, unit=unit, threshold=floor_tokens_per_s)
    if not report or (report.get("error") and not report.get("outcome")):
        why = (report or {}).get("error") or "the training run left no report"
        return make_rung("train", "fail", reason=why, unit=unit, threshold=floor_tokens_per_s)
    tps = report.get("tokens_per_s_median", report.get("tokens_per_s"))
    if report.get("outcome") != "completed":
        return make_rung(
            "train",
            "fail",
            reason=f"training {report.get('outcome')}: {report.get('message') or report.get('error')}",
            value=tps,
            threshold=floor_tokens_per_s,
            unit=unit,
        )
    results = [r for r in (report.get("results") or {}).values() if isinstance(r, dict)]
    rank0 = next((r for r in results if r.get("mfu") is not None), results[0] if results else {})
    mfu, device = report.get("mfu", rank0.get("mfu")), rank0.get("device") or "?"
    problems = []
    if tps is None or tps < floor_tokens_per_s:
        problems.append(f"{fmt(tps) if tps is not None else 'no'} tokens/s below the floor {fmt(floor_tokens_per_s)}")
    if device == "cuda":
        if mfu is None:
            note = "MFU unknown (unknown GPU peak: give the payload peak_tflops)"
        else:
            note = f"MFU {mfu:.1%}" + (f" (floor {min_mfu:.0%})" if min_mfu else "")
            if min_mfu and mfu < min_mfu:
                problems.append(f"MFU {mfu:.1%} below {min_mfu:.0%}")
    else:
        note = f"{device}: MFU " + (f"{mfu:.1%} (estimated CPU peak, not judged)" if mfu is not None else "not known")
    world = rank0.get("world_size") or report.get("world_size")
    detail = f"{report.get('model')} on {world} rank(s), {report.get('final_step')} steps; {note}"
    return make_rung(
        "train",
        "fail" if problems else "pass",
        reason="; ".join([*problems, detail]),
        value=tps,
        threshold=floor_tokens_per_s,
        unit=unit,
        mfu=mfu,
        device=device,
        run_id=report.get("run_id"),
    )


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_train": evaluate_train,
    "cluster_validate_slurm": evaluate_slurm,
    "cluster_validate_slurm_topology": slurm_topology,
}
