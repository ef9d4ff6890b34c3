"""The reset record's undo operations (`undo`): each puts back one value a concern changed (a `dcb ...` command, a
sysfs write, an rmdir of a configfs group), keyed; the first operation recorded for a key wins, and reset runs them
last recorded first."""

from __future__ import annotations

import os

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, Outcome, ResetError


def record_undo(manifest: dict, ops: list[dict], lines: list[str]) -> None:
    keys = {op.get("key") for op in manifest["undo"]}
    for op in ops:
        if not isinstance(op, dict) or not op.get("key") or not ({"argv", "write", "rmdir"} & set(op)):
            raise ResetError(f"an undo operation needs a key and one of argv, write or rmdir: {op!r}")
        if op["key"] not in keys:
            manifest["undo"].append(dict(op))
            keys.add(op["key"])
            lines.append(f"undo {op['key']}")


def run_undo(host: Host, ops: list[dict], out: Outcome) -> None:
    """The values the project changed back, last change first."""
    for op in reversed(ops):
        _run(host, op, out)


def _run(host: Host, op: dict, out: Outcome) -> None:
    if "argv" in op:
        out.cmd(host, [str(a) for a in op["argv"]])
    elif "write" in op:
        target = host.path(op["write"])
        value = str(op.get("value", ""))

        def write() -> None:
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(f"{value}\n")

        out.do(host, f"echo {value} > {op['write']}", write)
    else:
        target = host.path(op["rmdir"])
        if os.path.isdir(target):
            out.do(host, f"rmdir {op['rmdir']}", lambda: os.rmdir(target))
