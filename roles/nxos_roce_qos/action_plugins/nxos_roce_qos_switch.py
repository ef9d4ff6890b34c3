"""Action: the role's conversation with one Nexus over the task's persistent network_cli connection.

Every step is a JSON-RPC call to the host's `ansible-connection` (cliconf `run_commands`, `edit_config`,
`set_cli_prompt_context`), made from this controller process: no module is packaged or started, which
was ~1 s of CPU per switch interaction (read, checkpoint, push, post-check read, save, delete) and
made a fabric of switches CPU-bound on the controller. The logic is plain, tested Python:

- `step: plan`: writes the rendered intent (`intent_text`, from the task's `template` lookup) to its
  file, checks that the connection has credentials (never printed), then the batched read and the
  plan (../module_utils/nxos_roce_qos_session.py `read`, ../module_utils/nxos_roce_qos_plan.py
  `plan`), the post-check of what was read
  (../filter_plugins/nxos_roce_qos.py); returns the commands, the `--diff` before/after and the fact
  `nxos_roce_qos_result`. Sends only show commands, in check mode too. A switch that needs nothing
  must pass the post-check of that read (outside check mode), else the task fails.
- `step: apply`: the transaction (`apply` in the session module): checkpoint, optional backup, the
  planned commands, post-check read and verdict, save; rollback to the checkpoint on any failure;
  checkpoint delete, a refused delete returned as `delete_error`. Fails with the step and the switch's
  message; `rolled_back` says whether the running config is back at the checkpoint.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.module_utils.connection import Connection, ConnectionError
from ansible.plugins.action import ActionBase

DOCUMENTATION = """
action: nxos_roce_qos_switch
short_description: Read, plan and apply the nxos_roce_qos policy over the persistent network_cli connection
options:
  step: {description: plan (read and plan) or apply (checkpoint, push, verify, save)., required: true, type: str}
  intent: {description: Rendered intent file (controller); read, or written from intent_text; step plan., type: path}
  intent_text: {description: The rendered intent; written to intent (directories made); step plan., type: str}
  marking_policy: {description: Input qos policy that marks a port as the role's; step plan., type: str}
  queuing_policy: {description: System queuing policy (per-speed variants are the role's); step plan., type: str}
  commands_file: {description: Where to write the planned commands indented under their parents; step plan., type: path}
  expected: {description: What the post-check expects (__nxos_roce_qos_expected)., required: true, type: dict}
  commands: {description: The planned commands; step apply., type: list}
  diff: {description: The unified diff of the plan (kept in the fact); step apply., type: str}
  checkpoint_file: {description: Checkpoint file on the switch; step apply., type: str}
  save: {description: Copy running to startup after a passed post-check; step apply., type: bool}
  backup_dir: {description: Back up the running config there (controller) before the push; step apply., type: path}
"""

_ROLE = Path(__file__).resolve().parents[1]


def _load(name: str, relative: str):
    """A plain-Python file of the role, imported once per process."""
    full = f"rdma_llm_nxos_roce_qos_{name}"
    if full not in sys.modules:
        spec = importlib.util.spec_from_file_location(full, _ROLE / relative)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return sys.modules[full]


class _Cli:
    """The session module's `cli` on the persistent connection's JSON-RPC."""

    def __init__(self, socket_path: str, session):
        self._conn = Connection(socket_path)
        self._error = session.DeviceError

    def send(self, command: str) -> str:
        try:
            return str(self._conn.run_commands(commands=[command], check_rc=True)[0]).strip()
        except ConnectionError as exc:
            raise self._error(str(getattr(exc, "err", exc))) from exc

    def configure(self, lines: list[str]) -> None:
        try:
            self._conn.edit_config(candidate=lines)
        except ConnectionError as exc:
            raise self._error(str(getattr(exc, "err", exc))) from exc

    def leave_config(self) -> None:
        try:
            self._conn.set_cli_prompt_context()
        except ConnectionError as exc:
            raise self._error(str(getattr(exc, "err", exc))) from exc


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        socket_path = getattr(self._connection, "socket_path", None)
        if not socket_path:
            raise AnsibleActionFail(
                "nxos_roce_qos_switch needs a persistent connection: set "
                "ansible_connection: ansible.netcommon.network_cli for the switch"
            )
        session = _load("session", "module_utils/nxos_roce_qos_session.py")
        postcheck = _load("postcheck", "filter_plugins/nxos_roce_qos.py").nxos_roce_qos_postcheck
        expected = args.get("expected") or {}
        cli = _Cli(socket_path, session)
        host = (task_vars or {}).get("inventory_hostname", "switch")
        step = args.get("step")
        if step == "plan":
            return self._plan(result, args, cli, session, postcheck, expected, host)
        if step == "apply":
            return self._apply(result, args, cli, session, postcheck, expected, host)
        raise AnsibleActionFail(f"nxos_roce_qos_switch: step must be plan or apply, got {step!r}")

    def _plan(self, result, args, cli, session, postcheck, expected, host):
        for name in ("intent", "marking_policy"):
            if not args.get(name):
                raise AnsibleActionFail(f"nxos_roce_qos_switch: missing argument {name}")
        self._check_credentials(host)
        try:
            if args.get("intent_text") is not None:
                intent = str(args["intent_text"])
                intent = intent if intent.endswith("\n") else intent + "\n"
                session.write_file(args["intent"], intent)
            else:
                intent = Path(args["intent"]).read_text(encoding="utf-8")
            running, pfc = session.read(cli)
            planned = _load("plan", "module_utils/nxos_roce_qos_plan.py").plan(
                running, intent, args["marking_policy"], args.get("queuing_policy")
            )
            if args.get("commands_file") and planned["commands"]:
                session.write_file(args["commands_file"], planned["config"])
        except session.DeviceError as exc:
            raise AnsibleActionFail(f"reading the switch: {exc}") from exc
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail(f"nxos_roce_qos_switch: {exc}") from exc
        checked = postcheck(running, pfc, expected)
        check_mode = bool(self._task.check_mode)
        result.update(planned)
        result["changed"] = bool(planned["commands"])
        result["diff"] = {
            "before": planned["before"],
            "after": planned["after"],
            "before_header": "running-config (managed blocks)",
            "after_header": "intended",
        }
        result["ansible_facts"] = {
            "nxos_roce_qos_result": _fact(checked, planned, changed=False, saved=False, check_mode=check_mode)
        }
        # The read is the state to report when nothing will be sent (no change, or a check run).
        if not planned["commands"] or check_mode:
            result["warnings"] = _warnings(checked, host)
            if not planned["commands"] and not check_mode and not checked["passed"]:
                result.update(failed=True, msg=f"Post-check failed: {session.failure_detail(checked)}")
        return result

    def _check_credentials(self, host: str) -> None:
        """Before the first command: a user and a password or key (the values are never shown)."""
        option = self._connection.get_option
        if not option("remote_user") or not (option("password") or option("private_key_file")):
            raise AnsibleActionFail(
                f"ansible_user and ansible_password (or a key) must be set for {host} "
                "(the example inventory takes them from vault.yml)"
            )

    def _apply(self, result, args, cli, session, postcheck, expected, host):
        if self._task.check_mode:
            result.update(skipped=True, msg="check mode: nothing is sent")
            return result
        for name in ("checkpoint_file", "commands"):
            if not args.get(name):
                raise AnsibleActionFail(f"nxos_roce_qos_switch: missing argument {name}")
        commands = [str(line) for line in args["commands"]]
        backup = None
        if args.get("backup_dir"):

            def backup(text: str) -> str:
                return session.write_backup(args["backup_dir"], host, text)

        outcome = session.apply(
            cli,
            commands,
            args["checkpoint_file"],
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
        if outcome["backup_path"]:
            result["backup_path"] = outcome["backup_path"]
        if outcome["postcheck"] is not None and not outcome["failed"]:
            checked = outcome["postcheck"]
            planned = {"commands": commands, "unified_diff": args.get("diff", "")}
            fact = _fact(checked, planned, changed=True, saved=outcome["saved"], check_mode=False)
            if outcome["delete_error"]:
                fact["warnings"].append(f"checkpoint file {args['checkpoint_file']} was not deleted")
            result["ansible_facts"] = {"nxos_roce_qos_result": fact}
            result["warnings"] = _warnings(checked, host)
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
