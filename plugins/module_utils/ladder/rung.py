"""One rung of the ladder: its record (pass, fail or skip, its value against its threshold, the hosts or pairs to
blame), the checks it is made of, its console line, and the rung made of per-host errors (`inventory`).

Part of the ladder's rules (docs/design.md, "Where each shared rule lives"); unit-tested on recorded outputs.
"""

from __future__ import annotations

STATUSES = ("pass", "fail", "skip")


def make_rung(name, status, reason=None, value=None, threshold=None, unit=None, **extra):
    """One rung of the ladder: status pass|fail|skip, the measured value, the threshold, the unit."""
    if status not in STATUSES:
        raise ValueError(f"rung {name}: status must be one of {STATUSES}, got {status!r}")
    rung = {
        "name": name,
        "status": status,
        "reason": reason,
        "value": value,
        "threshold": threshold,
        "unit": unit,
        "bad_hosts": sorted(extra.pop("bad_hosts", []) or []),
        "bad_pairs": [list(p) for p in extra.pop("bad_pairs", []) or []],
        "checks": extra.pop("checks", []) or [],
    }
    rung.update(extra)
    return rung


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


def console_line(rung):
    """One line per rung for the console: `[PASS] pairwise_bw  9.41 Gb/s (threshold 22.5)  reason`."""
    head = f"[{rung['status'].upper():4}] {rung['name']:<14}"
    if rung.get("value") is not None:
        head += f" {fmt(rung['value'])} {rung.get('unit') or ''}".rstrip()
        if rung.get("threshold") is not None:
            head += f" (threshold {fmt(rung['threshold'])})"
    if rung.get("bad_pairs"):
        head += " bad pairs: " + ", ".join("-".join(p) for p in rung["bad_pairs"])
    if rung.get("bad_hosts"):
        head += " bad hosts: " + ", ".join(rung["bad_hosts"])
    if rung.get("reason"):
        head += f" — {rung['reason']}"
    return head


def check(host, name, status, detail, value=None, threshold=None, unit=None):
    return {
        "host": host,
        "check": name,
        "status": status,
        "detail": detail,
        "value": value,
        "threshold": threshold,
        "unit": unit,
    }


def good_hosts(hosts, checks):
    """The hosts none of whose checks failed."""
    return [h for h in hosts if not any(c["host"] == h and c["status"] == "fail" for c in checks)]


def rung_from_checks(name, checks, value=None, threshold=None, unit=None, skip_reason=None, **extra):
    """Rung status from its checks: any fail fails; all skip skips; else pass."""
    failed = [c for c in checks if c["status"] == "fail"]
    if failed:
        status = "fail"
        reason = "; ".join((f"{c['host']}: " if c["host"] else "") + c["detail"] for c in failed[:6])
    elif checks and all(c["status"] == "skip" for c in checks):
        status = "skip"
        reason = skip_reason or "; ".join(sorted({c["detail"] for c in checks}))
    elif not checks:
        status, reason = "skip", skip_reason or "nothing to check"
    else:
        status = "pass"
        reason = extra.pop("pass_reason", None)
    extra.pop("pass_reason", None)
    return make_rung(
        name,
        status,
        reason=reason,
        value=value,
        threshold=threshold,
        unit=unit,
        checks=checks,
        bad_hosts=sorted({c["host"] for c in failed if c["host"]}),
        **extra,
    )


def evaluate_host_errors(name, errors, hosts, pass_reason=None, unreachable=None):
    """A rung from per-host error messages ({host: message or ''}): pass when no host has one.

    unreachable: {host: why} of the hosts that did not answer over SSH (unreachable_hosts): each fails the rung
    with why, and what the rung would have checked on it is said not to have run.
    """
    unreachable = unreachable or {}
    checks = []
    for h in hosts:
        if h in unreachable:
            checks.append(check(h, "ssh", "fail", f"unreachable over SSH ({unreachable[h]}); host checks not run"))
        else:
            checks.append(check(h, name, "fail" if errors.get(h) else "pass", errors.get(h) or "ok"))
    return rung_from_checks(name, checks, value=sum(1 for c in checks if c["status"] == "pass"), threshold=len(hosts),
                             unit="hosts", pass_reason=pass_reason)  # fmt: skip


# Filter name -> rule (plugins/filter/cluster_validate.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "cluster_validate_rung": make_rung,
    "cluster_validate_console_line": console_line,
    "cluster_validate_host_errors": evaluate_host_errors,
}
