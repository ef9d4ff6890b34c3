"""rdma-node-check: one node's health, the rules the validation ladder and a scheduler's health check share.

  rdma-node-check --config /etc/rdma-llm/node-check.json [--root /] [--state-dir /var/lib/rdma-llm]
                  [--only fabric,gpu,counters,flaps,stack] [--dcgm-level 0-3] [--brief]

Prints one JSON object (schema rdma-llm-cluster/node-check/1; --brief: one line `<status>: <reason>`) and exits
0 pass, 1 warn, 2 fail, 3 when it could not check (bad config or usage). The reason is one line a scheduler can
put on a drained node (`rdma0: link down (operstate down, carrier 0)`, `GPU 3: XID 79 ...`). The same JSON, the
error included, is kept as `<state-dir>/node-check-result.json` where the state dir exists, for the metrics
collector (rdma-llm-metrics reads it; it never runs this stateful check itself).

The package module_utils/node, stdlib only, is the command: the role node_health installs it as one file,
/usr/local/sbin/rdma-node-check, a zipapp of this package built on the controller (node/build.py, the lookup
rdma_llm.cluster.node_check_zipapp) whose __main__ calls main() below; the module rdma_llm.cluster.node_check runs
the same code for the ladder's node_health rung (AnsiballZ ships it), and the tests import it. Every path starts at
`root` and every tool runs through `Tools`, so tests run it on fake sysfs trees with recorded tool outputs. Nothing
is guessed: no GPU, no RDMA device, no tool or no kernel log is a `skip` that says so, never a pass.
Thresholds and their sources: DEFAULTS in node/config.py and roles/node_health/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import (
    EXIT_ERROR,
    GROUPS,
    RESULT_FILE,
    SCHEMA,
    ConfigError,
    load_config,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.run import run
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.slurm import prolog_exit, slurm_apply
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.tools import Tools


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 3, never 2 (2 means "this node failed")
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="rdma-node-check", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="/etc/rdma-llm/node-check.json", help="thresholds file (node_health role)")
    ap.add_argument("--root", default="/", help="where /sys and /proc are (a fake tree in tests)")
    ap.add_argument("--state-dir", default="/var/lib/rdma-llm", help="where the last counter reading is kept")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"check groups, comma-separated: {','.join(GROUPS)}")
    ap.add_argument("--dcgm-level", type=int, choices=range(5), help="dcgmi diag level (0 off), over the config's")
    ap.add_argument("--brief", action="store_true", help="print `<status>: <reason>` instead of the JSON")
    slurm = "as Slurm's HealthCheckProgram: drain this node on fail, resume it when it passes again"
    ap.add_argument("--slurm", action="store_true", help=slurm)
    prolog = (
        "as Slurm's Prolog: as --slurm, and exit 0 unless the node fails (a warning or a check that cannot run "
        "lets the job start)"
    )
    ap.add_argument("--slurm-prolog", action="store_true", help=prolog)
    ap.add_argument("--slurm-node", default="", help="the node's Slurm NodeName (default: the short hostname)")
    return ap


def save_result(state_dir, doc: dict) -> str | None:
    """Keep the printed result as RESULT_FILE in `state_dir` (a temporary name of this process, then a rename: the
    health check and the prolog may run at once, and the collector never reads half a file). Only into a state dir
    that exists (the role creates it; the counters' reading does on its first run): a check run elsewhere, or
    with `--state-dir ''`, leaves none. Returns why it was not kept, or None."""
    if not state_dir or not Path(state_dir).is_dir():
        return None
    path = Path(state_dir) / RESULT_FILE
    tmp = path.with_name(f".{RESULT_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return f"result not kept in {state_dir}: {exc.strerror or exc}"
    return None


def _keep(state_dir, doc: dict) -> None:
    why = save_result(state_dir, doc)
    if why:
        print(f"rdma-node-check: {why}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_config(args.config)
        if args.dcgm_level is not None:
            config["thresholds"]["dcgm_level"] = args.dcgm_level
        result = run(config, args.root, args.state_dir, [g for g in args.only.split(",") if g])
    except ConfigError as exc:
        error = {"schema": SCHEMA, "status": "error", "exit": EXIT_ERROR, "reason": str(exc)}
        _keep(args.state_dir, error)
        print(f"error: {exc}" if args.brief else json.dumps(error))
        return prolog_exit(error) if args.slurm_prolog else EXIT_ERROR
    _keep(args.state_dir, result)
    print(f"{result['status']}: {result['reason']}" if args.brief else json.dumps(result))
    if args.slurm or args.slurm_prolog:
        print(slurm_apply(Tools(), args.slurm_node or socket.gethostname().split(".")[0], result), file=sys.stderr)
    return prolog_exit(result) if args.slurm_prolog else result["exit"]
