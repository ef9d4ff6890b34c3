"""The ladder's verdict: the rungs together (schema rdma-llm-cluster/validate-verdict/1), the pair matrix, the
nodes that did not answer or left the play, and the rungs that did not run.

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.ladder.rung import make_rung

SCHEMA = "rdma-llm-cluster/validate-verdict/1"


def bandwidth_matrix(hosts, pairs):
    """Symmetric host x host matrix of Gb/s (None where not measured) and the failing cells. A pair measured on
    several rails shows its slowest rail (None if one has no number) and fails if any rail failed."""
    index = {h: i for i, h in enumerate(hosts)}
    values = [[None] * len(hosts) for _ in hosts]
    cells = {}
    for p in pairs:
        a, b = p["pair"]
        if a in index and b in index:
            cells.setdefault((a, b), []).append(p)
    failed = []
    for (a, b), rails in cells.items():
        gbps = [r.get("gbps") for r in rails]
        values[index[a]][index[b]] = values[index[b]][index[a]] = None if None in gbps else min(gbps)
        if any(r.get("status") == "fail" for r in rails):
            failed.append([a, b])
    rails = sorted({str(p["rail"]) for p in pairs if p.get("rail")})
    return {"hosts": list(hosts), "unit": "Gb/s", "values": values, "failed": failed, "rails": rails}


def verdict(rungs, hosts, cluster="", started=None, finished=None, keep_going=False, left_out=None):
    """The ladder's verdict: overall status, the first failing rung, the hosts and pairs to blame.

    left_out: {host: why} of the hosts the rungs after `inventory` did not run on (unreachable over SSH), or
    after the rung they left the play in (mark_lost).
    """
    first_fail = next((r["name"] for r in rungs if r["status"] == "fail"), None)
    bad_pairs = sorted({tuple(p) for r in rungs for p in r.get("bad_pairs") or []})
    bad_hosts = sorted({h for r in rungs for h in r.get("bad_hosts") or [] if h in hosts})
    pair_rung = next((r for r in rungs if r.get("pairs")), None)
    return {
        "schema": SCHEMA,
        "cluster": cluster,
        "started": started,
        "finished": finished,
        "hosts": list(hosts),
        "status": "fail" if first_fail else "pass",
        "first_failure": first_fail,
        "stopped_early": bool(first_fail) and not keep_going,
        "bad_hosts": bad_hosts,
        "bad_pairs": [list(p) for p in bad_pairs],
        "left_out": dict(sorted((left_out or {}).items())),
        "rungs": rungs,
        "matrix": bandwidth_matrix(hosts, pair_rung["pairs"]) if pair_rung else None,
    }


def skipped_after(names, failed_at):
    """Rungs not run because the ladder stopped at `failed_at`."""
    return [make_rung(n, "skip", reason=f"not run: the ladder stopped at the failing rung {failed_at}") for n in names]


def mark_lost(rung, lost):
    """A rung during which nodes left the play fails and names them first, whatever it measured on the rest."""
    if not lost:
        return rung
    names = sorted(lost)
    why = "; ".join(f"{h}: left the play during this rung ({lost[h]})" for h in names)
    return dict(
        rung,
        status="fail",
        lost=names,
        bad_hosts=sorted(set(rung.get("bad_hosts") or []) | set(names)),
        reason=f"{why}; {rung['reason']}" if rung.get("reason") else why,
    )


def note_left_out(rung, left_out, lost_at=None):
    """A rung run without the unreachable hosts says which it left out (its status is about the others).

    lost_at: {host: rung} of the hosts that left the play during an earlier rung (mark_lost); the others did
    not answer at rung `inventory`.
    """
    if not left_out:
        return rung
    names, lost_at = sorted(left_out), lost_at or {}
    at_start = [h for h in names if h not in lost_at]
    notes = [f"left out {', '.join(at_start)} (unreachable over SSH, see inventory)"] if at_start else []
    for where in sorted({lost_at[h] for h in names if h in lost_at}):
        gone = ", ".join(h for h in names if lost_at.get(h) == where)
        notes.append(f"left out {gone} (left the play during {where})")
    note = "; ".join(notes)
    return dict(rung, left_out=names, reason=f"{rung['reason']}; {note}" if rung.get("reason") else note)


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_verdict": verdict,
    "cluster_validate_skipped_after": skipped_after,
    "cluster_validate_left_out": note_left_out,
    "cluster_validate_mark_lost": mark_lost,
}
