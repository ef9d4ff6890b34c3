"""Action: the role's conversation with one Nexus over the task's persistent network_cli connection.

Every call is JSON-RPC to the host's `ansible-connection` (cliconf `run_commands`, `edit_config`,
`set_cli_prompt_context`), made from this controller process: no module is packaged or started. A task
that uses a persistent connection costs a fresh `ansible-connection` process (a Python interpreter
importing ansible: ~0.6 s of CPU) even when the connection is already up, so a switch's run is one task
of this action, plus, only for a switch that changed, the finishing task of
plugins/action/nxos_roce_qos_finish.py, which reuses the connection this task left open. The logic is
plain, tested Python:

1. Writes the rendered intent (`intent_text`, from the task's `template` lookup) to its file, checks
   that the connection has credentials (never printed), then the batched read and the plan
   (module_utils/switch/session.py `read`, module_utils/switch/plan.py `plan`) and
   the post-check of what was read (module_utils/switch/postcheck.py); returns the commands, the
   `--diff` before/after and the fact `nxos_roce_qos_result`. Up to here only show commands are sent.
2. Nothing to send, or check mode: reports that read (a converged switch must pass its post-check,
   except in check mode, where it is reported, not enforced); nothing else is sent.
3. Otherwise phase 1 of the fabric's transaction (`stage` in the session module): checkpoint (beside,
   never over, a file an earlier run left), optional backup, the planned commands, post-check read and
   verdict. Nothing is saved. A failure rolls this switch back at once and fails the task with the
   step and the switch's message. The result's `transaction` ({ok, staged, reason}) is what the
   fabric's verdict reads; `checkpoint` and `socket_path` are what phase 2 needs.

With `finish` (phase 2 over a new connection, when the one phase 1 left has gone idle and closed):
the fabric's verdict from every switch's `transaction`, then save or roll back, and delete the checkpoint.

`baseline_file` (a controller path): before the first change this switch ever gets from the role, the running
config it read is kept there (never overwritten), for playbooks/reset.yml. With `reset: true` the plan is the way
back to that config (`plan_restore` of the diff engine: the managed blocks as they were before the first apply;
without the file, the switch without any managed block), staged, verified (a second plan back must be empty) and
finished exactly like an apply: checkpoint, push, post-check, the fabric's verdict, save or roll back.

plugins/action/nxos_roce_qos_render.py (review only, `--tags nxos_roce_qos_render`) is this class
without a connection: it only writes the intent, with the same code.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.module_utils.connection import Connection, ConnectionError
from ansible.plugins.action import ActionBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import plan as nxos_roce_qos_plan
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch import session as nxos_roce_qos_session
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.postcheck import nxos_roce_qos_postcheck


class _Cli:
    """The session module's `cli` on the persistent connection's JSON-RPC."""

    def __init__(self, socket_path: str, session):
        self._conn = Connection(socket_path)
        self._error = session.DeviceError

    def send(self, command: str) -> str:
        try:
            return str(self._conn.run_commands(commands=[command], check_rc=True)[0]).strip()
        except ConnectionError as exc:
            raise self._error(_answer(exc)) from exc

    def configure(self, lines: list[str]) -> None:
        try:
            self._conn.edit_config(candidate=lines)
        except ConnectionError as exc:
            raise self._error(_answer(exc)) from exc

    def leave_config(self) -> None:
        try:
            self._conn.set_cli_prompt_context()
        except ConnectionError as exc:
            raise self._error(_answer(exc)) from exc


def _answer(exc: ConnectionError) -> str:
    """The switch's answer in a failed call, on one line. network_cli reports the bytes it read as their
    repr (`b"delete ...\\r\\n% Invalid command ..."`), which is turned back into text."""
    err = str(getattr(exc, "err", None) or exc)
    if err[:2] in ('b"', "b'"):
        with contextlib.suppress(ValueError, SyntaxError):
            err = ast.literal_eval(err).decode("utf-8", "replace")
    return " ".join(line.strip() for line in err.splitlines() if line.strip())


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        host = (task_vars or {}).get("inventory_hostname", "switch")
        socket_path = getattr(self._connection, "socket_path", None)
        if not socket_path:
            raise AnsibleActionFail(
                "nxos_roce_qos_switch needs a persistent connection: set "
                "ansible_connection: ansible.netcommon.network_cli for the switch"
            )
        if args.get("finish"):
            return self._finish(result, args["finish"], _Cli(socket_path, nxos_roce_qos_session), host)
        reset = bool(args.get("reset"))
        for name in ("intent", "marking_policy", "checkpoint_file", *(() if reset else ("expected",))):
            if not args.get(name):
                raise AnsibleActionFail(f"nxos_roce_qos_switch: missing argument {name}")
        session = nxos_roce_qos_session
        expected = args.get("expected")
        self._check_credentials(host)
        cli = _Cli(socket_path, session)
        check_mode = bool(self._task.check_mode)
        baseline_file = args.get("baseline_file")
        try:
            intent = self._write_intent(args, session)
            running, pfc = session.read(cli)
            if reset:
                baseline = _read_baseline(baseline_file)
                postcheck = _restored_check(baseline, intent, args["marking_policy"], args.get("queuing_policy"))
                planned = nxos_roce_qos_plan.plan_restore(
                    running, baseline, intent, args["marking_policy"], args.get("queuing_policy")
                )
                result["baseline"] = baseline_file if baseline is not None else None
            else:
                postcheck = nxos_roce_qos_postcheck
                planned = nxos_roce_qos_plan.plan(running, intent, args["marking_policy"], args.get("queuing_policy"))
                if baseline_file and planned["commands"] and not check_mode and not Path(baseline_file).exists():
                    # The switch as the role found it, before its first change: what reset goes back to.
                    session.write_file(baseline_file, running if running.endswith("\n") else running + "\n")
                    result["baseline"] = baseline_file
            if args.get("commands_file") and planned["commands"]:
                session.write_file(args["commands_file"], planned["config"])
        except session.DeviceError as exc:
            raise AnsibleActionFail(f"reading the switch: {exc}") from exc
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_switch: {exc}") from exc
        result.update(planned)
        result["changed"] = bool(planned["commands"])
        result["diff"] = {
            "before": planned["before"],
            "after": planned["after"],
            "before_header": "running-config (managed blocks)",
            "after_header": "before the first apply" if reset else "intended",
        }
        if not planned["commands"] or check_mode:
            # The read is the state to report: nothing is sent (converged, or a check run).
            checked = postcheck(running, pfc, expected)
            result["ansible_facts"] = {
                "nxos_roce_qos_result": _fact(checked, planned, changed=False, saved=False, check_mode=check_mode)
            }
            result["warnings"] = _warnings(checked, host) + _baseline_warning(reset, result, baseline_file, host)
            ok = check_mode or checked["passed"]
            reason = "" if ok else f"Post-check failed: {session.failure_detail(checked)}"
            result["transaction"] = {"ok": ok, "staged": False, "reason": reason}
            if not ok:
                result.update(failed=True, msg=reason)
            return result
        if reset:
            result["warnings"] = _baseline_warning(reset, result, baseline_file, host)
        return self._stage(result, args, cli, session, postcheck, expected, host, planned)

    def _write_intent(self, args, session) -> str:
        """The rendered intent, written to its controller file when `intent_text` is given (else read
        from it). Shared with the review-only render action."""
        if args.get("intent_text") is None:
            return Path(args["intent"]).read_text(encoding="utf-8")
        intent = str(args["intent_text"])
        intent = intent if intent.endswith("\n") else intent + "\n"
        session.write_file(args["intent"], intent)
        return intent

    def _check_credentials(self, host: str) -> None:
        """Before the first command: a user and a password or key (the values are never shown)."""
        option = self._connection.get_option
        if not option("remote_user") or not (option("password") or option("private_key_file")):
            raise AnsibleActionFail(
                f"ansible_user and ansible_password (or a key) must be set for {host} "
                "(the example inventory takes them from vault.yml)"
            )

    def _stage(self, result, args, cli, session, postcheck, expected, host, planned):
        commands = list(planned["commands"])
        backup = None
        if args.get("backup_dir"):

            def backup(text: str) -> str:
                return session.write_backup(args["backup_dir"], host, text)

        outcome = session.stage(
            cli,
            commands,
            args["checkpoint_file"],
            lambda running, pfc: postcheck(running, pfc, expected),
            backup=backup,
        )
        warnings = list(result.pop("warnings", None) or [])
        failed = outcome["failed"]
        result.update(
            changed=outcome["pushed"] or outcome["rolled_back"],
            failed=failed,
            msg=outcome["msg"]
            or f"{len(commands)} commands sent, post-check passed; saved once every switch of the play passed",
            step=outcome["step"],
            rolled_back=outcome["rolled_back"],
            checkpoint=None if failed else outcome["checkpoint"],
            socket_path=self._connection.socket_path,
            transaction={"ok": not failed, "staged": not failed, "reason": outcome["msg"] if failed else ""},
        )
        warnings += [
            f"{host}: the checkpoint file {left} was left by an earlier run (its delete failed); it is kept, this "
            f"run checkpoints to {outcome['checkpoint']}: look at it and delete it by hand: delete {left} no-prompt"
            for left in outcome["leftovers"] or []
        ]
        if outcome["listing_error"]:
            warnings.append(
                f"{host}: bootflash could not be listed ({outcome['listing_error']}): a checkpoint file "
                f"{args['checkpoint_file']} left by an earlier run would have been overwritten"
            )
        if outcome["delete_error"]:
            warnings.append(_delete_warning(host, outcome["checkpoint"], outcome["delete_error"]))
        if outcome["backup_path"]:
            result["backup_path"] = outcome["backup_path"]
        if not failed:
            checked = outcome["postcheck"]
            fact = _fact(checked, planned, changed=True, saved=False, check_mode=False)
            fact["warnings"] += [f"checkpoint file {left} left by an earlier run" for left in outcome["leftovers"]]
            result["ansible_facts"] = {"nxos_roce_qos_result": fact}
            warnings = _warnings(checked, host) + warnings
        if warnings:
            result["warnings"] = warnings
        return result

    def _finish(self, result, args, cli, host):
        """Phase 2: the fabric's verdict over every switch's phase-1 `transaction`, then save (all passed)
        or roll back to the checkpoint, and delete it."""
        for name in ("checkpoint", "stages"):
            if not args.get(name):
                raise AnsibleActionFail(f"nxos_roce_qos finish: missing {name}")
        session = nxos_roce_qos_session
        decision = session.verdict(args["stages"])
        save = bool(args.get("save", True))
        done = session.finish(cli, args["checkpoint"], decision["commit"], save=save)
        if not decision["commit"]:
            why = "; ".join(f"{switch}: {reason}" for switch, reason in decision["failed"].items())
            msg = (
                f"the fabric's transaction failed ({why}): {host} was rolled back to {args['checkpoint']}"
                if done["rolled_back"]
                else f"the fabric's transaction failed ({why}); {done['msg'].lstrip('; ')}"
            )
        elif done["failed"]:
            msg = f"{done['msg']}; {host} alone was rolled back (the other switches keep their saved change)"
        else:
            msg = "every switch of the play passed: " + (
                "saved to startup" if done["saved"] else "not saved (nxos_roce_qos_save is false)"
            )
        result.update(
            changed=True,
            failed=done["failed"] or not decision["commit"],
            msg=msg,
            saved=done["saved"],
            rolled_back=done["rolled_back"],
            delete_error=done["delete_error"],
            transaction=decision,
        )
        fact = dict(args.get("fact") or {})
        fact.update(saved=done["saved"], rolled_back=done["rolled_back"], transaction=decision)
        if done["delete_error"]:
            fact["warnings"] = [*fact.get("warnings", []), f"checkpoint file {args['checkpoint']} was not deleted"]
            result["warnings"] = [_delete_warning(host, args["checkpoint"], done["delete_error"])]
        result["ansible_facts"] = {"nxos_roce_qos_result": fact}
        return result


def _read_baseline(path: str | None) -> str | None:
    """The running config kept before the role's first apply, None where there is none."""
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _restored_check(baseline: str | None, intent: str, marking: str, queuing: str | None):
    """The post-check of a reset: the plan back to the baseline, made again on what the switch shows now, is empty."""

    def check(running: str, pfc: str | None, expected=None) -> dict:
        left = nxos_roce_qos_plan.plan_restore(running, baseline, intent, marking, queuing)["commands"]
        detail = (
            "the managed blocks are as before the first apply"
            if not left
            else f"{len(left)} line(s) still differ from before the first apply: {'; '.join(left[:5])}"
        )
        entry = {"name": "reset", "passed": not left, "detail": detail}
        return {
            "passed": not left,
            "failed": [] if not left else ["reset"],
            "checks": [entry],
            "warnings": [],
            "unverified": [],
        }

    return check


def _baseline_warning(reset: bool, result: dict, baseline_file: str | None, host: str) -> list[str]:
    if not reset or result.get("baseline"):
        return []
    return [
        f"{host}: no copy of its configuration before the first apply ({baseline_file}): reset removes every block the "
        "role manages, and its ports lose every line the role sets (their MTU goes back to the NX-OS default)"
    ]


def _delete_warning(host: str, checkpoint: str, error: str) -> str:
    return (
        f"could not delete the checkpoint file {checkpoint} on {host} ({error}); "
        f"delete it by hand: delete {checkpoint} no-prompt"
    )


def _fact(checked: dict, planned: dict, changed: bool, saved: bool, check_mode: bool) -> dict:
    """nxos_roce_qos_result: the post-check's verdict with what this run planned and did."""
    return {
        **checked,
        "commands": planned["commands"],
        "diff": planned["unified_diff"],
        "changed": changed,
        "saved": saved,
        "check_mode": check_mode,
        "warnings": list(checked.get("warnings", [])),
    }


def _warnings(checked: dict, host: str) -> list[str]:
    out = []
    if checked.get("unverified"):
        out.append(f"not verified on {host}: {'; '.join(checked['unverified'])}")
    if checked.get("warnings"):
        out.append(f"{host}: {'; '.join(checked['warnings'])}")
    return out
