"""What the project's packages leave when purged: their data directories (packages.py removes them after the purge).

`apt-get purge` takes a package's files and conffiles; what its daemons or its maintainer scripts made stays:
MariaDB's databases (Debian's postrm keeps /var/lib/mysql unless debconf says otherwise) and debian.cnf, the logs
of Slurm, MUNGE and Prometheus, slurmctld's StateSaveLocation, slurmd's spool. Reset removes a directory of
DATA_DIRS only for a package the project installed that this reset purges, and keeps it while any package of the
table that uses it (or a directory inside it) is still installed: one that was there before the project, or one
another concern keeps.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.conf import (
    LOG_DIR,
    SLURMD_SPOOL_DIR,
    STATE_SAVE_LOCATION,
)

# package -> what it leaves. Slurm's directories are the ones module_utils/slurm/conf.py writes into slurm.conf and
# slurmdbd.conf (StateSaveLocation, SlurmdSpoolDir, the log files); the packages that share one each name it.
SLURM_HOME = STATE_SAVE_LOCATION.rsplit("/", 1)[0]  # /var/lib/slurm: the Debian packages' home for both
PROMETHEUS_HOME, PROMETHEUS_LOGS = "/var/lib/prometheus", "/var/log/prometheus"
DATA_DIRS: dict[str, tuple[str, ...]] = {
    "mariadb-server": ("/var/lib/mysql", "/var/log/mysql", "/etc/mysql/debian.cnf"),
    "mariadb-common": ("/etc/mysql",),
    "mysql-common": ("/etc/mysql",),
    "munge": ("/etc/munge", "/var/lib/munge", "/var/log/munge"),
    "slurmctld": (STATE_SAVE_LOCATION, SLURM_HOME, LOG_DIR),
    "slurmd": (SLURMD_SPOOL_DIR, SLURM_HOME, LOG_DIR),
    "slurmdbd": (LOG_DIR,),
    "slurm-client": (SLURM_HOME, LOG_DIR),
    "slurm-wlm-basic-plugins": (SLURM_HOME, LOG_DIR),
    # The prometheus user's home and the log directory the three packages share (their postrm purge removes only
    # their own data inside: metrics2/, alertmanager/, node-exporter/).
    "prometheus": (PROMETHEUS_HOME, PROMETHEUS_LOGS),
    "prometheus-alertmanager": (PROMETHEUS_HOME, PROMETHEUS_LOGS),
    "prometheus-node-exporter": (PROMETHEUS_HOME, PROMETHEUS_LOGS),
}


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def data_dirs(purged: list[str], installed: list[str]) -> list[str]:
    """The directories the `purged` packages leave that no `installed` package of the table still uses (the
    directory itself or one inside it), outer ones first and each once (one inside a removed one goes with it)."""
    needed = [d for p in installed for d in DATA_DIRS.get(p, ())]
    left = {d for p in purged for d in DATA_DIRS.get(p, ())}
    out: list[str] = []
    for path in sorted(left, key=lambda d: (d.count("/"), d)):
        if any(_inside(n, path) for n in needed) or any(_inside(path, o) for o in out):
            continue
        out.append(path)
    return out
