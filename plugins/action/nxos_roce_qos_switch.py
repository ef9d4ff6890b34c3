"""Action: the role's conversation with one Nexus over the task's persistent network_cli connection.

Every call is JSON-RPC to the host's `ansible-connection` (cliconf `run_commands`, `edit_config`,
`set_cli_prompt_context`), made from this controller process: no module is packaged or started. One task
(one call of this action) does the whole run for a switch, because ansible-core starts a fresh
`ansible-connection` process (a Python interpreter importing ansible: ~0.6 s of CPU) for every task that
uses a persistent connection, even when the connection is already up; with separate plan and apply tasks
that was a second start per changed switch, the largest per-switch cost of a fabric run. The logic is
plain, tested Python:

1. Writes the rendered intent (`intent_text`, from the task's `template` lookup) to its file, checks
   that the connection has credentials (never printed), then the batched read and the plan
   (module_utils/nxos_roce_qos_session.py `read`, module_utils/nxos_roce_qos_plan.py `plan`) and
   the post-check of what was read (module_utils/nxos_roce_qos.py); returns the commands, the
   `--diff` before/after and the fact `nxos_roce_qos_result`. Up to here only show commands are sent.
2. Nothing to send, or check mode: reports that read (a converged switch must pass its post-check,
   except in check mode, where it is reported, not enforced); nothing else is sent.
3. Otherwise the transaction (`apply` in the session module): checkpoint, optional backup, the planned
   commands, post-check read and verdict, save; rollback to the checkpoint on any failure; checkpoint
   delete, a refused delete returned as `delete_error` and as a warning naming the file. Fails with the
   step and the switch's message; `rolled_back` says whether the running config is back at the
   checkpoint.

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
from ansible_collections.rdma_llm.cluster.plugins.module_utils import nxos_roce_qos_plan, nxos_roce_qos_session
from ansible_collections.rdma_llm.cluster.plugins.module_utils.nxos_roce_qos import nxos_roce_qos_postcheck

DOCUMENTATION = """
action: nxos_roce_qos_switch
short_description: Read, plan, apply and verify the nxos_roce_qos policy over the persistent network_cli connection
options:
  intent: {description: Rendered intent file (controller), written from intent_text., required: true, type: path}
  intent_text: {description: The rendered intent; written to intent (directories made)., type: str}
  marking_policy: {description: Input qos policy that marks a port as the role's., required: true, type: str}
  queuing_policy: {description: System queuing policy (per-speed variants are the role's)., type: str}
  commands_file: {description: Where to write the planned commands indented under their parents., type: path}
  expected: {description: What the post-check expects (__nxos_roce_qos_expected)., required: true, type: dict}
  checkpoint_file: {description: Checkpoint file on the switch., required: true, type: str}
  save: {description: Copy running to startup after a passed post-check., type: bool, default: true}
  backup_dir: {description: Back up the running config there (controller) before the push., type: path}
"""


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
        for name in ("intent", "marking_policy", "checkpoint_file"):
            if not args.get(name):
                raise AnsibleActionFail(f"nxos_roce_qos_switch: missing argument {name}")
        socket_path = getattr(self._connection, "socket_path", None)
        if not socket_path:
            raise AnsibleActionFail(
                "nxos_roce_qos_switch needs a persistent connection: set "
                "ansible_connection: ansible.netcommon.network_cli for the switch"
            )
        session = nxos_roce_qos_session
        postcheck = nxos_roce_qos_postcheck
        expected = args.get("expected") or {}
        host = (task_vars or {}).get("inventory_hostname", "switch")
        self._check_credentials(host)
        cli = _Cli(socket_path, session)
        try:
            intent = self._write_intent(args, session)
            running, pfc = session.read(cli)
            planned = nxos_roce_qos_plan.plan(running, intent, args["marking_policy"], args.get("queuing_policy"))
            if args.get("commands_file") and planned["commands"]:
                session.write_file(args["commands_file"], planned["config"])
        except session.DeviceError as exc:
            raise AnsibleActionFail(f"reading the switch: {exc}") from exc
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_switch: {exc}") from exc
        check_mode = bool(self._task.check_mode)
        result.update(planned)
        result["changed"] = bool(planned["commands"])
        result["diff"] = {
            "before": planned["before"],
            "after": planned["after"],
            "before_header": "running-config (managed blocks)",
            "after_header": "intended",
        }
        if not planned["commands"] or check_mode:
            # The read is the state to report: nothing is sent (converged, or a check run).
            checked = postcheck(running, pfc, expected)
            result["ansible_facts"] = {
                "nxos_roce_qos_result": _fact(checked, planned, changed=False, saved=False, check_mode=check_mode)
            }
            result["warnings"] = _warnings(checked, host)
            if not planned["commands"] and not check_mode and not checked["passed"]:
                result.update(failed=True, msg=f"Post-check failed: {session.failure_detail(checked)}")
            return result
        return self._apply(result, args, cli, session, postcheck, expected, host, planned)

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

    def _apply(self, result, args, cli, session, postcheck, expected, host, planned):
        commands = list(planned["commands"])
        checkpoint_file = args["checkpoint_file"]
        backup = None
        if args.get("backup_dir"):

            def backup(text: str) -> str:
                return session.write_backup(args["backup_dir"], host, text)

        outcome = session.apply(
            cli,
            commands,
            checkpoint_file,
            lambda running, pfc: postcheck(running, pfc, expected),
            save=bool(args.get("save", True)),
            backup=backup,
        )
        result.update(
            changed=outcome["pushed"] or outcome["rolled_back"],
            failed=outcome["failed"],
            msg=outcome["msg"] or f"{len(commands)} commands sent, post-check passed",
            step=outcome["step"],
            rolled_back=outcome["rolled_back"],
            saved=outcome["saved"],
            delete_error=outcome["delete_error"],
        )
        warnings = []
        if outcome["delete_error"]:
            warnings.append(
                f"could not delete the checkpoint file {checkpoint_file} on {host} ({outcome['delete_error']}); "
                f"delete it by hand: delete {checkpoint_file} no-prompt"
            )
        if outcome["backup_path"]:
            result["backup_path"] = outcome["backup_path"]
        if outcome["postcheck"] is not None and not outcome["failed"]:
            checked = outcome["postcheck"]
            fact = _fact(checked, planned, changed=True, saved=outcome["saved"], check_mode=False)
            if outcome["delete_error"]:
                fact["warnings"].append(f"checkpoint file {checkpoint_file} was not deleted")
            result["ansible_facts"] = {"nxos_roce_qos_result": fact}
            warnings = _warnings(checked, host) + warnings
        if warnings:
            result["warnings"] = warnings
        return result


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
