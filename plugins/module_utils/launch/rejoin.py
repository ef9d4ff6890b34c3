"""A host's share of a run after the host restarted (the systemd engine): the rejoin unit that starts it again at
boot, its condition script (rejoin_check) and the words of a unit file's command line."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

REJOIN_PROPS = "LoadState,ActiveState,Result,ConditionResult,ConditionTimestampMonotonic"
WATCHED = "logs/.watched"  # under the run's directory: touched by every poll of the watch
_EXECUTABLE = re.compile(r"[A-Za-z0-9/][A-Za-z0-9_./+-]*")  # no systemd prefix (-, @, !, ...)


def rejoin_unit_name(unit: str) -> str:
    """The unit that starts `unit` (a host's transient share of a run) again after the host restarted."""
    return f"{unit}-rejoin.service"


def systemd_quote(arg: str) -> str:
    """`arg` as one word of a unit file's command line (systemd.service(5) "Command lines"): in double quotes,
    backslash and double quote escaped, `%` (a specifier) and `$` (a variable) doubled."""
    text = str(arg)
    if any(c in text for c in "\n\r\0"):
        raise RuleError(f"{text!r}: a command line word cannot hold a line break or NUL")
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{text}"'


def rejoin_check(run_dir: str, until: Any, fresh: Any, store: str, port: Any, python: str, wait: Any = 60) -> str:
    """The rejoin unit's ExecCondition, a sh script: whether this boot may start the share again. Only before the
    launch's deadline (`until`, epoch), only while the watch read this host less than `fresh` seconds ago (each poll
    touches WATCHED: a host back later has been counted lost, or the run has ended without it), and only when the
    rendezvous store answers at `store`:`port` (gone once the run ended; tried for up to `wait` seconds while the
    fabric comes up, with `python`, the training venv's). Exit 1 with the reason otherwise: systemd skips the unit."""
    until, fresh, wait, port = int(float(until)), int(float(fresh)), int(float(wait)), int(port)
    q = shlex.quote
    watched = q(f"{run_dir}/{WATCHED}")
    probe = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()"
    return "\n".join(
        [
            "#!/bin/sh",
            "# Written by the launch (train_launch's rejoin unit): may this boot start the run's share again?",
            "now=$(date +%s)",
            f'[ "$now" -lt {until} ] || {{ echo "rejoin: skipped, the launch\'s deadline has passed"; exit 1; }}',
            f"seen=$(stat -c %Y {watched} 2>/dev/null) || "
            '{ echo "rejoin: skipped, no watch read this host"; exit 1; }',
            f'[ $((now - seen)) -lt {fresh} ] || {{ echo "rejoin: skipped, the watch last read this host '
            '$((now - seen)) s ago (the run counted it lost, or ended)"; exit 1; }',
            "i=0",
            f"while [ $i -lt {wait} ]; do",
            f"  {q(python)} -c {q(probe)} {q(store)} {port} 2>/dev/null && exit 0",
            "  i=$((i + 2)); sleep 2",
            "done",
            f'echo "rejoin: skipped, the rendezvous store {store}:{port} does not answer (the run has ended)"',
            "exit 1",
            "",
        ]
    )


def rejoin_unit_text(argv: list[str], run_id: str, node_rank: Any, log: str, check: str) -> str:
    """The unit file that brings a host's share of run `run_id` back after the host restarted: at boot, when the
    script `check` (rejoin_check, on the host) allows it, it marks the rejoin in the job's log and runs `argv`
    again (the systemd-run command line that started the share: the same transient unit, environment and torchrun
    command; torchrun's agent joins the rendezvous the survivors' agents wait in, or that they open once they see
    it waiting). The role removes it when the share ends or is stopped, and reset.yml any left behind."""
    rank = int(node_rank)
    if not argv or not _EXECUTABLE.fullmatch(str(argv[0])):
        raise RuleError(f"the rejoin unit's command must start with a plain executable, got {argv[:1]!r}")
    words = " ".join([str(argv[0]), *(systemd_quote(a) for a in argv[1:])])
    mark = 'echo "=== rejoin after a reboot at $(date -u +%FT%TZ) (node rank ' + str(rank) + ') ==="'
    return (
        "[Unit]\n"
        f"Description=rdma-llm training run {run_id} node rank {rank}: rejoin the run after a reboot\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"StandardOutput=append:{log}\n"
        f"StandardError=append:{log}\n"
        # A boot after the deadline, long after the watch last read the host, or once the store is gone starts nothing.
        f"ExecCondition=/bin/sh {systemd_quote(check)}\n"
        f"ExecStartPre=/bin/sh -c {systemd_quote(mark)}\n"
        f"ExecStart={words}\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


# Filter name -> rule (plugins/filter/train_launch.py exposes them as rdma_llm.cluster.<name>).
FILTERS = {
    "train_launch_rejoin_unit_text": rejoin_unit_text,
    "train_launch_rejoin_unit_name": rejoin_unit_name,
    "train_launch_rejoin_check": rejoin_check,
}
