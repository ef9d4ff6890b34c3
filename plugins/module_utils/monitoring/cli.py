"""rdma-llm-metrics: this host's metrics as Prometheus textfiles, for node_exporter's textfile collector.

  rdma-llm-metrics --config /etc/rdma-llm/metrics.json [--root /] [--once]

Runs the collectors the config names (monitoring/collect.py) and writes each one's file,
`<textfile_dir>/rdma_llm_<collector>.prom`, by rename (exposition.write_textfile): a collector that fails leaves
the others' files as they are, and its own says what the library says for a failed read (`rdma_llm_slurm_up 0`,
...). Then `rdma_llm_metrics.prom`: each collector's success, last run and duration (METRICS below). The file of a
collector the config no longer names is removed, so a host that stops being the controller stops exporting Slurm.

Exit status: 0 every collector read what it reads and its file was written; 1 one or more did not, one line each on
stderr (`rdma-llm-metrics: slurm: scontrol show nodes --oneliner: controller unreachable (...)`: the journal's
line of the timer's run); 2 the config or the command line cannot be used (one line on stderr), nothing written.
--once runs the collectors once (the role's systemd timer); without it they run every `interval_s` seconds until
the process is stopped. Every path starts at --root (a fake tree in tests); the tools are found on PATH.

The package module_utils/monitoring with the node modules it reads through, stdlib only, is the command: the
lookup rdma_llm.cluster.metrics_zipapp builds it as one file (node/build.py) whose __main__ calls main() below.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch.slurm_state import SCONTROL_TIMEOUT
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring import collect
from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.exposition import (
    Metric,
    render,
    table,
    write_textfile,
)

NAME = "rdma-llm-metrics"
ENTRY = "ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.cli"
EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
STATUS_FILE = "rdma_llm_metrics.prom"
SOURCE = "rdma-llm-metrics (its own run)"
METRICS = table(
    Metric("rdma_llm_collector_success", "gauge", "", ("collector",),
           "1 when the collector read everything it reads and wrote its file, 0 when not (the command's stderr "
           "says why)", SOURCE),
    Metric("rdma_llm_collector_last_run_timestamp_seconds", "gauge", "seconds", ("collector",),
           "When the collector last ran (Unix time)", SOURCE),
    Metric("rdma_llm_collector_duration_seconds", "gauge", "seconds", ("collector",),
           "How long the collector took (its tools' time included)", SOURCE),
)  # fmt: skip


def textfile_name(collector: str) -> str:
    return f"rdma_llm_{collector}.prom"


# ------------------------------------------------------------------------------------------------ the config
class ConfigError(ValueError):
    """A config the command cannot run with (exit 2)."""


REQUIRED = object()


def _path(value) -> str | None:
    if isinstance(value, str) and value.startswith("/") and "\x00" not in value:
        return None
    return "must be an absolute path"


def _seconds(minimum: float, strict: bool):
    def check(value) -> str | None:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if number and (value > minimum if strict else value >= minimum):
            return None
        return f"must be a number {'>' if strict else '>='} {minimum:g}"

    return check


def _interfaces(value) -> str | None:
    # IFNAMSIZ is 16 with the terminating NUL; '/' and whitespace are never in a name (dev_valid_name).
    if isinstance(value, list) and all(
        isinstance(v, str) and 0 < len(v) < 16 and not any(c == "/" or c.isspace() for c in v) and v not in (".", "..")
        for v in value
    ):
        return None
    return "must be a list of network interface names"


def _text(value) -> str | None:
    return None if isinstance(value, str) else "must be a string"


# Every key of the config: (check, default or REQUIRED). Top-level keys starting with `_` are comments (JSON has
# none: the role's `_managed`). timeout_s: the launch's SCONTROL_TIMEOUT, what a poll gives scontrol before the
# controller counts as silent, here for every tool; interval_s: Prometheus' default scrape interval (1m).
TOP = {
    "textfile_dir": (_path, REQUIRED),
    "timeout_s": (_seconds(0, True), SCONTROL_TIMEOUT),
    "interval_s": (_seconds(0, True), 60),
    "collectors": (None, REQUIRED),
}
# Each collector's options (collect.py says what each reads); a collector not under `collectors` does not run on this
# host. recent_s (ours): an ended run stays an hour, so a dashboard of the last hour still shows how it ended;
# hostname: the name the trainer's start records carry, "" for this host's (socket.gethostname(), as the trainer's).
OPTIONS = {
    "node_health": {"state_dir": (_path, REQUIRED)},
    "rdma": {"interfaces": (_interfaces, [])},
    "gpu": {},
    "slurm": {},
    "training": {"runs_dir": (_path, REQUIRED), "recent_s": (_seconds(0, False), 3600), "hostname": (_text, "")},
}


def _section(given, schema: dict, where: str) -> dict:
    if not isinstance(given, dict):
        raise ConfigError(f"{where or 'the config'} must be a JSON object, got {json.dumps(given)}")
    prefix = f"{where}." if where else ""
    unknown = sorted(k for k in given if k not in schema and not (not where and k.startswith("_")))
    if unknown:
        known = ", ".join(schema) or "none"
        raise ConfigError(f"unknown key {prefix}{unknown[0]} (known: {known})")
    out = {}
    for key, (check, default) in schema.items():
        if key not in given:
            if default is REQUIRED:
                raise ConfigError(f"{prefix}{key} is required")
            out[key] = default
            continue
        why = check(given[key]) if check else None
        if why:
            raise ConfigError(f"{prefix}{key} {why}, got {json.dumps(given[key])}")
        out[key] = given[key]
    return out


def resolve(config) -> dict:
    """The config with every default, checked: ConfigError naming the first key that is wrong."""
    out = _section(config, TOP, "")
    collectors = out["collectors"]
    if not isinstance(collectors, dict):
        raise ConfigError(f"collectors must be a JSON object of collector: options, got {json.dumps(collectors)}")
    unknown = sorted(set(collectors) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"unknown collector {unknown[0]} (known: {', '.join(OPTIONS)})")
    out["collectors"] = {
        name: _section(collectors[name], schema, f"collectors.{name}")
        for name, schema in OPTIONS.items()
        if name in collectors
    }
    return out


def load_config(path: str) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the config {path}: {exc.strerror or exc}") from exc
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the config {path} is not JSON: {exc}") from exc
    try:
        return resolve(doc)
    except ConfigError as exc:
        raise ConfigError(f"config {path}: {exc}") from exc


# ------------------------------------------------------------------------------------------------- one pass
def run_once(config: dict, root="/", run=None, clock=time.time) -> list:
    """Every collector of the config once, each file written by rename; the status file last. The problems, one
    `<collector>: <what>` line each ([] when every collector read everything)."""
    host_root = Path(root)
    run = run or collect.run_command
    out_dir = host_root / config["textfile_dir"].lstrip("/")
    problems, status = [], []
    for name, reader in collect.COLLECTORS.items():
        path = out_dir / textfile_name(name)
        if name not in config["collectors"]:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                problems.append(f"{name}: not configured, and its old {path} stays: {exc.strerror or exc}")
            continue
        started = clock()
        host = collect.Host(host_root, run, config["timeout_s"], started)
        try:
            text, said = reader(config["collectors"][name], host)
        except Exception as exc:  # one collector's fault must not stop the others or blank their files
            text, said = collect.FALLBACK[name](), [f"{type(exc).__name__}: {exc}"]
        try:
            write_textfile(path, text)
        except OSError as exc:
            said = [*said, f"cannot write {path}: {exc.strerror or exc}"]
        problems += [f"{name}: {line}" for line in said]
        labels = {"collector": name}
        status += [
            ("rdma_llm_collector_success", labels, int(not said)),
            ("rdma_llm_collector_last_run_timestamp_seconds", labels, started),
            ("rdma_llm_collector_duration_seconds", labels, round(max(clock() - started, 0.0), 6)),
        ]
    try:
        write_textfile(out_dir / STATUS_FILE, render(METRICS, status))
    except OSError as exc:
        problems.append(f"metrics: cannot write {out_dir / STATUS_FILE}: {exc.strerror or exc}")
    return problems


# ------------------------------------------------------------------------------------------------ the command
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (the config's code): the usage goes to --help
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=NAME, description=__doc__.splitlines()[0], allow_abbrev=False)  # a typo is not an option
    ap.add_argument("--config", default="/etc/rdma-llm/metrics.json", help="the collectors and their inputs (JSON)")
    ap.add_argument("--root", default="/", help="where every path of the config starts (a fake tree in tests)")
    ap.add_argument("--once", action="store_true", help="run the collectors once and exit (a systemd timer's run)")
    return ap


def main(argv: list | None = None, run=None, clock=time.time, sleep=time.sleep) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    while True:
        started = clock()
        problems = run_once(config, args.root, run, clock)
        for line in problems:
            print(f"{NAME}: {line}", file=sys.stderr, flush=True)
        if args.once:
            return EXIT_FAILED if problems else EXIT_OK
        sleep(max(config["interval_s"] - (clock() - started), 0))
