"""What nxos_roce_qos says to the switch: the batched read, and the transaction that applies a plan.

Pure Python (stdlib only). The action plugin plugins/action/nxos_roce_qos_switch.py drives it over the
task's persistent network_cli connection (JSON-RPC to `ansible-connection`, no module execution);
tests/unit/plugins/module_utils/test_nxos_roce_qos_session.py drives it over an in-process lab.nxos_emu session.
`cli` is any object with

- `send(command) -> str`: one exec command, its output (stripped); raises `DeviceError` with the
  switch's answer when the switch rejects it;
- `configure(lines)`: `configure terminal`, the lines in order (each lands in its parent's mode, as
  NX-OS and `nxos_config` do), `end`; raises `DeviceError` at the first rejected line (the session is
  then left in a config mode);
- `leave_config()`: back to the exec prompt from whatever mode the session is in.

`read(cli)` is the one read a run needs to plan (running config, PFC table or None where the release
has no such show). `apply(...)` is the change: checkpoint, optional backup, push, post-check read and
verdict, save; any failure rolls back to the checkpoint (running == startup again), and the checkpoint
file is deleted in every case (a refused delete is reported, not raised).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

PFC_SHOW = "show interface priority-flow-control"
# What each step is called in the failure message (the rescue says which step failed).
STEPS = {
    "checkpoint": "taking the checkpoint",
    "backup": "backing up the running config",
    "push": "sending the planned commands",
    "post-check": "the post-check",
    "save": "saving the running config to startup",
}


class DeviceError(Exception):
    """The switch (or the connection to it) refused a command; the text is its answer."""


class CheckFailed(Exception):
    """The post-check after the push did not pass."""


def read(cli) -> tuple[str, str | None]:
    """(show running-config, show interface priority-flow-control or None when the release lacks it).
    Sent one after the other on the open session: two prompt round trips, nothing read twice."""
    running = cli.send("show running-config")
    try:
        pfc = cli.send(PFC_SHOW)
    except DeviceError:
        pfc = None
    return running, pfc


def failure_detail(result: dict) -> str:
    """The failed checks of a post-check result, as the assert used to print them."""
    return "; ".join(c["detail"] for c in result["checks"] if not c["passed"])


def write_file(path: str | Path, text: str) -> None:
    """Write a controller file only when its content differs (its time then says when it last changed)."""
    target = Path(path)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)


def write_backup(directory: str, hostname: str, text: str, now: float | None = None) -> str:
    """The running config as `<dir>/<host>_config.<YYYY-MM-DD@HH:MM:SS>` (nxos_config's backup name).
    Returns the path."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime(time.time() if now is None else now))
    path = Path(directory) / f"{hostname}_config.{stamp}"
    write_file(path, text)
    return str(path)


def apply(
    cli,
    commands: list[str],
    checkpoint_file: str,
    verify: Callable[[str, str | None], dict],
    save: bool = True,
    backup: Callable[[str], str] | None = None,
) -> dict:
    """Checkpoint, (backup), push `commands`, read again and `verify(running, pfc)`, (save); roll back on
    any failure; delete the checkpoint file. Returns
    `{failed, msg, step, checkpoint, pushed, rolled_back, saved, postcheck, delete_error, backup_path}`:
    `step` names the step that failed, `postcheck` is verify's result (None if it never ran),
    `delete_error` the switch's answer to a refused delete (else None)."""
    out = {
        "failed": False,
        "msg": "",
        "step": None,
        "checkpoint": False,
        "pushed": False,
        "rolled_back": False,
        "saved": False,
        "postcheck": None,
        "delete_error": None,
        "backup_path": None,
    }
    step = "checkpoint"
    try:
        try:
            cli.send("terminal dont-ask")
            cli.send(f"checkpoint file {checkpoint_file}")
            out["checkpoint"] = True
            if backup is not None:
                step = "backup"
                out["backup_path"] = backup(cli.send("show running-config"))
            step = "push"
            cli.configure(list(commands))
            out["pushed"] = True
            step = "post-check"
            running, pfc = read(cli)
            out["postcheck"] = verify(running, pfc)
            if not out["postcheck"]["passed"]:
                raise CheckFailed(f"Post-check failed: {failure_detail(out['postcheck'])}")
            if save:
                step = "save"
                cli.send("copy running-config startup-config")
                out["saved"] = True
        except (DeviceError, CheckFailed, OSError) as exc:
            out.update(failed=True, step=step, msg=f"{STEPS[step]}: {exc}")
            if out["checkpoint"]:
                _rollback(cli, checkpoint_file, out)
    finally:
        if out["checkpoint"]:
            try:
                cli.send(f"delete {checkpoint_file} no-prompt")
            except DeviceError as exc:
                out["delete_error"] = str(exc) or "no reason given"
    return out


def _rollback(cli, checkpoint_file: str, out: dict) -> None:
    """Back to the checkpoint from wherever the failed step left the session."""
    try:
        cli.leave_config()
        cli.send(f"rollback running-config file {checkpoint_file}")
        out["rolled_back"] = True
    except DeviceError as exc:
        out["msg"] += f"; the rollback to {checkpoint_file} failed too: {exc}"
