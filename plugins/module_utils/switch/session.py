"""What nxos_roce_qos says to the switch: the batched read, and the transaction that applies a plan.

Pure Python (stdlib only). The action plugins (plugins/action/nxos_roce_qos_switch.py, _finish.py) drive it
over the task's persistent network_cli connection (JSON-RPC to `ansible-connection`, no module
execution); tests/unit/plugins/module_utils/switch/test_session.py drives it over an in-process
lab.nxos_emu session. `cli` is any object with

- `send(command) -> str`: one exec command, its output (stripped); raises `DeviceError` with the
  switch's answer when the switch rejects it;
- `configure(lines)`: `configure terminal`, the lines in order (each lands in its parent's mode, as
  NX-OS and `nxos_config` do), `end`; raises `DeviceError` at the first rejected line (the session is
  then left in a config mode);
- `leave_config()`: back to the exec prompt from whatever mode the session is in.

`read(cli)` is the one read a run needs to plan (running config, PFC table or None where the release
has no such show). The change is a transaction in two phases, so that a fabric commits as one:
`stage(...)` checkpoints (to a file no earlier run left behind), backs up, pushes and verifies, and
rolls back at once on any failure; `finish(...)` then either saves (the fabric's verdict, `verdict`,
says every switch passed) or rolls back to the checkpoint, and deletes it (a refused delete is
reported, not raised). `apply(...)` is both phases for one switch on its own.
"""

from __future__ import annotations

import os
import re
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


def checkpoint_files(listing: str, checkpoint_file: str) -> list[str]:
    """The role's checkpoint files a `dir bootflash:` listing shows: the configured one and the
    `<stem>-<n><suffix>` ones runs take while an earlier one is left (NX-OS prints each file's name as
    the last word of its line)."""
    name = checkpoint_file.removeprefix("bootflash:").lstrip("/")
    stem, dot, suffix = name.rpartition(".") if "." in name else (name, "", "")
    pattern = re.compile(rf"{re.escape(stem)}(-\d+)?{re.escape(dot + suffix)}")
    found = []
    for line in listing.splitlines():
        words = line.split()
        last = words[-1].removeprefix("bootflash:").lstrip("/") if words else ""
        if pattern.fullmatch(last):
            found.append(f"bootflash:{last}")
    return sorted(set(found), key=lambda file: (file != f"bootflash:{name}", len(file), file))


def free_checkpoint(checkpoint_file: str, taken: list[str]) -> str:
    """The configured checkpoint file, or the first `<stem>-<n><suffix>` not taken (never overwrite one)."""
    if checkpoint_file not in taken:
        return checkpoint_file
    stem, dot, suffix = checkpoint_file.rpartition(".")
    if not dot or ":" in suffix:
        stem, dot, suffix = checkpoint_file, "", ""
    number = 1
    while f"{stem}-{number}{dot}{suffix}" in taken:
        number += 1
    return f"{stem}-{number}{dot}{suffix}"


def _outcome() -> dict:
    return {
        "failed": False,
        "msg": "",
        "step": None,
        "checkpoint": None,
        "leftovers": [],
        "pushed": False,
        "rolled_back": False,
        "saved": False,
        "postcheck": None,
        "delete_error": None,
        "backup_path": None,
        "listing_error": None,
    }


def stage(
    cli,
    commands: list[str],
    checkpoint_file: str,
    verify: Callable[[str, str | None], dict],
    backup: Callable[[str], str] | None = None,
) -> dict:
    """Phase 1: list bootflash for checkpoint files earlier runs left (kept, reported in `leftovers`, and
    this run takes a free name), checkpoint, (backup), push `commands`, read again and `verify(running,
    pfc)`. Nothing is saved. On any failure: roll back at once and delete the checkpoint. Returns
    `{failed, msg, step, checkpoint (the file this run took, kept for phase 2 when it passed),
    leftovers, listing_error, pushed, rolled_back, saved, postcheck, delete_error, backup_path}`."""
    out = _outcome()
    step = "checkpoint"
    try:
        cli.send("terminal dont-ask")
        try:
            out["leftovers"] = checkpoint_files(cli.send("dir bootflash:"), checkpoint_file)
        except DeviceError as exc:  # cannot tell: this run takes the configured name, the caller warns
            out["listing_error"] = str(exc) or "no reason given"
        name = free_checkpoint(checkpoint_file, out["leftovers"])
        cli.send(f"checkpoint file {name}")
        out["checkpoint"] = name
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
    except (DeviceError, CheckFailed, OSError) as exc:
        out.update(failed=True, step=step, msg=f"{STEPS[step]}: {exc}")
        if out["checkpoint"]:
            _rollback(cli, out["checkpoint"], out)
            _delete(cli, out["checkpoint"], out)
    return out


def finish(cli, checkpoint: str, commit: bool, save: bool = True) -> dict:
    """Phase 2 on a switch that staged its change: the fabric's verdict `commit` saves it (when `save`),
    otherwise it is rolled back to `checkpoint`; the checkpoint file is deleted either way. Returns
    `{failed, msg, step, saved, rolled_back, delete_error}`; a refused save rolls this switch back."""
    out = {"failed": False, "msg": "", "step": None, "saved": False, "rolled_back": False, "delete_error": None}
    try:
        if commit and save:
            try:
                cli.send("copy running-config startup-config")
                out["saved"] = True
            except DeviceError as exc:
                out.update(failed=True, step="save", msg=f"{STEPS['save']}: {exc}")
                _rollback(cli, checkpoint, out)
        elif not commit:
            _rollback(cli, checkpoint, out)
    finally:
        _delete(cli, checkpoint, out)
    return out


def apply(
    cli,
    commands: list[str],
    checkpoint_file: str,
    verify: Callable[[str, str | None], dict],
    save: bool = True,
    backup: Callable[[str], str] | None = None,
) -> dict:
    """Both phases for one switch on its own: stage, then save and delete (the verdict of a fabric of
    one is its own post-check). Returns stage's keys, with `saved` and the delete's outcome."""
    out = stage(cli, commands, checkpoint_file, verify, backup)
    if out["failed"]:
        return out
    done = finish(cli, out["checkpoint"], commit=True, save=save)
    out.update(
        failed=done["failed"],
        step=done["step"],
        msg=done["msg"],
        saved=done["saved"],
        rolled_back=done["rolled_back"],
        delete_error=done["delete_error"],
    )
    return out


def verdict(stages: dict[str, dict | None]) -> dict:
    """The fabric's decision from every switch's phase-1 summary (`{ok, staged, reason}`, None for a
    switch that never got there: failed or unreachable before, or not yet run): commit only when every
    one is ok. Returns `{commit, failed: {switch: reason}}`."""
    failed = {}
    for host, summary in stages.items():
        if not summary:
            failed[host] = "did not get to the push (failed or unreachable before it)"
        elif not summary.get("ok"):
            failed[host] = summary.get("reason") or "failed"
    return {"commit": not failed, "failed": failed}


def _rollback(cli, checkpoint_file: str, out: dict) -> None:
    """Back to the checkpoint from wherever the failed step left the session."""
    try:
        cli.leave_config()
        cli.send(f"rollback running-config file {checkpoint_file}")
        out["rolled_back"] = True
    except DeviceError as exc:
        out["msg"] += f"; the rollback to {checkpoint_file} failed too: {exc}"


def _delete(cli, checkpoint_file: str, out: dict) -> None:
    try:
        cli.send(f"delete {checkpoint_file} no-prompt")
    except DeviceError as exc:
        out["delete_error"] = str(exc) or "no reason given"
