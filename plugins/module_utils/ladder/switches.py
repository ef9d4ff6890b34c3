"""The rungs read from the switches: cabling (the inventory's port map against LLDP from both ends) and the
no-drop class's counters across the stress rungs, each port named by the host behind it, with the class the pair
tests' traffic rode.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder import cabling
from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import check, make_rung, rung_from_checks
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm import topology as slurm_rules


def stress_class(qos, rdma):
    """The switch class the pair tests' traffic rode: {"qos_group", "dscp", "what"}, from a node's QoS fact
    (rdma_qos: the host's DSCP-to-priority map, which the inventory contract makes the switch's qos-groups).

    rdma: perftest with the fact's traffic class (pair_rails), whose DSCP is the RoCE one: the no-drop priority.
    Otherwise iperf3, marked with fabric TCP's DSCP: its own priority, or the no-drop one where cluster_tcp_lossless
    marks it with the RoCE DSCP. Without the fact (rdma_qos did not run) the traffic carries DSCP 0: class 0."""
    qos = qos or {}
    env = qos.get("nccl_env") or {}
    if rdma and env.get("NCCL_IB_SL") is not None:
        return {"qos_group": qos.get("pfc_priority"), "dscp": None, "what": f"perftest on SL {env['NCCL_IB_SL']}"}
    if rdma:
        tos = env.get("NCCL_IB_TC")
        dscp, what = (int(tos) >> 2, f"perftest with ToS {tos}") if tos is not None else (0, "perftest, no ToS")
    elif qos.get("mark_tcp"):
        dscp, what = int(qos.get("tcp_mark_dscp", 0)), "iperf3"
    else:
        dscp, what = 0, "iperf3, TCP unmarked"
    by_dscp = {qos.get("tcp_dscp"): qos.get("tcp_priority"), qos.get("roce_dscp"): qos.get("pfc_priority")}
    group = by_dscp.get(dscp)
    return {"qos_group": 0 if group is None else int(group), "dscp": dscp, "what": f"{what} (DSCP {dscp})"}


def port_nodes(hostvars, switches, nodes) -> dict:
    """{switch: {port: {"node", "nic"}}} for each RoCE port whose far end in the port map (cabling.links, the one
    reading of it) is one of `nodes`; an uplink (another switch) or a port naming nobody is left out."""
    switches, nodes = list(switches or []), list(nodes or [])
    names = slurm_rules.host_aliases(hostvars, nodes, switches)
    out: dict = {sw: {} for sw in switches}
    for link in cabling.links(slurm_rules.switch_ports(hostvars, switches), names):
        if link["kind"] == "host" and link["peer"] in nodes:
            out[link["switch"]][link["port"]] = {"node": link["peer"], "nic": link["peer_port"] or ""}
    return out


def switch_port_hosts(hostvars, switches, nodes, override=None):
    """{"switch:port": node} for the host behind each RoCE port of each switch: the node the port's `peer` names, or
    its description's first word (`lab-node3 rdma0`; cabling.links, the one reading of the port map), else
    `override` (cluster_validate_switch_ports): `switch:port` keys as given, a bare port name only for a port that
    names nobody. A port whose far end is another switch (an uplink) names no host."""
    override = dict(override or {})
    ports = slurm_rules.switch_ports(hostvars, list(switches or []))
    owners = {(sw, port): far["node"] for sw, far_ends in port_nodes(hostvars, switches, nodes).items()
              for port, far in far_ends.items()}  # fmt: skip
    out = {}
    for sw, items in ports.items():
        for item in items:
            name = str(item.get("name") or "") if isinstance(item, dict) else ""
            if not name:
                continue
            owner = owners.get((sw, cabling.port_name(name)))
            if owner:
                out[f"{sw}:{name}"] = owner
            elif not item.get("description") and not item.get("peer") and name in override:
                out[f"{sw}:{name}"] = override[name]
    out.update({k: v for k, v in override.items() if ":" in str(k)})
    return out


def evaluate_switch(before, after, nodrop_group, port_hosts=None, skip_reason=None, stress=None):
    """Switch rung: drops in the no-drop class must not grow across the stress rungs; pauses and ECN marks reported.

    before/after: {switch: switch_counters(...)}; port_hosts: {"switch:port": host} (switch_port_hosts) to name the
    host; stress:
    stress_class() of the pair tests, whose class the rung names: the no-drop class is judged with the traffic it
    carried, and traffic that rode a lossy class is said to have (its drops reported, not judged: that class may
    drop), so a rung that stressed no lossless traffic does not read as if it had.
    """
    if skip_reason:
        return make_rung("switch", "skip", reason=skip_reason)
    if not any(k.startswith("drops_q") for ports in after.values() for c in ports.values() for k in c):
        return make_rung("switch", "skip", reason="the switch printed no per-qos-group drop counters (show queuing)")
    port_hosts = port_hosts or {}
    checks = []
    deltas = {}
    for switch, ports in after.items():
        for port, counters in ports.items():
            if not any(k.startswith("drops_q") for k in counters):
                continue  # listed by the PFC show only: not a RoCE port the ladder read (show queuing)
            old = before.get(switch, {}).get(port, {})
            delta = {k: v - old.get(k, 0) for k, v in counters.items()}
            deltas[f"{switch}:{port}"] = delta
            drops = delta.get(f"drops_q{nodrop_group}", 0) + delta.get("ingress_drops", 0)
            who = port_hosts.get(f"{switch}:{port}", "")
            label = f"{switch} {port}" + (f" ({who})" if who else "")
            checks.append(
                check(
                    who or f"{switch}:{port}",
                    "no-drop class drops",
                    "pass" if drops == 0 else "fail",
                    f"{label}: {drops} dropped in qos-group {nodrop_group}, "
                    f"{delta.get('pause_rx', 0)} PFC pauses received, {delta.get('pause_tx', 0)} sent, "
                    f"{delta.get(f'ecn_q{nodrop_group}', 0)} ECN-marked",
                    value=drops,
                    threshold=0,
                    unit="packets",
                )
            )
    total = sum(c["value"] for c in checks)
    pauses = sum(d.get("pause_rx", 0) + d.get("pause_tx", 0) for d in deltas.values())
    marked = sum(d.get(f"ecn_q{nodrop_group}", 0) for d in deltas.values())
    summary = f"no drops in qos-group {nodrop_group} on {len(checks)} port(s); {pauses} PFC pauses, {marked} ECN-marked"
    if stress and stress.get("qos_group") == nodrop_group:
        summary += f"; the pair tests' traffic ({stress['what']}) rode it"
    elif stress:
        group = stress.get("qos_group")
        lossy = sum(d.get(f"drops_q{group}", 0) for d in deltas.values())
        summary += (
            f"; the pair tests' traffic ({stress['what']}) rode lossy qos-group {group}, not the no-drop one: "
            f"{lossy} dropped there (reported, not judged)"
        )
    extra = {"stress": stress} if stress else {}
    return rung_from_checks(
        "switch", checks, value=total, threshold=0, unit="packets", deltas=deltas, pass_reason=summary, **extra
    )


def evaluate_cabling(hostvars, switches, nodes, switch_lldp, host_lldp=None, macs=None):
    """Rung cabling: the inventory's port map (cabling.links: each RoCE port's `peer`/`peer_port`, else its
    description's first two words) against LLDP from the switches (switch_lldp: switch -> `show lldp neighbors
    detail` text; a switch not read is absent) and from the hosts (host_lldp: host -> `lldpcli -f json0 show
    neighbors` text, None where lldpd is not installed). macs: host -> {interface: MAC}."""
    switches, nodes = list(switches or []), list(nodes or [])
    if not switches:
        return make_rung("cabling", "skip", reason="no switch in the inventory (group switches)")
    names = slurm_rules.host_aliases(hostvars, nodes, switches)
    links = cabling.links(slurm_rules.switch_ports(hostvars, switches), names)
    switch_seen = {sw: cabling.parse_nxos_lldp(text) for sw, text in (switch_lldp or {}).items() if text is not None}
    host_seen = {
        h: (cabling.parse_lldpcli(text) if text is not None else None) for h, text in (host_lldp or {}).items()
    }
    checks = [
        check(c["where"], "cabling", c["status"], c["detail"])
        for c in cabling.compare(links, switch_seen, host_seen, names, macs)
    ]
    failed = [c for c in checks if c["status"] == "fail"]
    bad = set()
    for link in links:
        if link["kind"] == "host" and any(c["host"] in (cabling.end(link), cabling.far(link)) for c in failed):
            bad.add(link["peer"])
    notes = cabling.strangers(links, switch_seen)
    passed = [c for c in checks if c["status"] == "pass"]
    if failed:
        status = "fail"
        reason = "; ".join(c["detail"] for c in failed[:6]) + (f"; {len(failed) - 6} more" if len(failed) > 6 else "")
    elif passed:
        status = "pass"
        reason = f"{len(passed)} link end(s) as the inventory says"
        skipped = sorted({c["detail"] for c in checks if c["status"] == "skip"})
        reason += f"; not seen: {', '.join(skipped[:4])}" if skipped else ""
    else:
        status = "skip"
        reason = "; ".join(sorted({c["detail"] for c in checks})[:6]) or "no RoCE port in the inventory's map"
    return make_rung(
        "cabling", status, reason=reason, value=len(failed), threshold=0, unit="links off the map",
        bad_hosts=sorted(bad), checks=checks, notes=notes, links=links,
    )  # fmt: skip


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_switch": evaluate_switch,
    "cluster_validate_switch_port_hosts": switch_port_hosts,
    "cluster_validate_cabling": evaluate_cabling,
    "cluster_validate_stress_class": stress_class,
}
