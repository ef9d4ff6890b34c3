"""What purged packages leave (module_utils/host/reset/data_dirs.py, packages.py): their data directories go with
a purge of packages the project installed, never with a package that was there before or stays."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.data_dirs import DATA_DIRS, data_dirs
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore

from tests.unit.plugins.module_utils.host.reset.fake import host

MARIADB = ["mariadb-server", "mariadb-common", "mysql-common", "slurmdbd", "slurmctld", "slurm-client", "munge"]


def test_a_purge_of_everything_takes_each_directory_once_outer_first():
    assert data_dirs(MARIADB, []) == [
        "/etc/munge",
        "/etc/mysql",
        "/var/lib/munge",
        "/var/lib/mysql",
        "/var/lib/slurm",
        "/var/log/munge",
        "/var/log/mysql",
        "/var/log/slurm",
    ]


def test_a_package_still_installed_keeps_what_it_uses():
    # MariaDB was there before the project: its config directory stays, the server's debian.cnf too.
    assert data_dirs(["slurmdbd"], ["mariadb-server", "mysql-common", "slurmctld"]) == []
    # mysql-common stays (another user of /etc/mysql): only what the server left goes, debian.cnf inside it.
    assert data_dirs(["mariadb-server"], ["mysql-common"]) == [
        "/etc/mysql/debian.cnf",
        "/var/lib/mysql",
        "/var/log/mysql",
    ]
    # slurmd stays on a host whose slurmctld goes: /var/lib/slurm (which holds slurmd's spool) and the logs stay.
    assert data_dirs(["slurmctld"], ["slurmd"]) == ["/var/lib/slurm/slurmctld"]


def test_a_package_outside_the_table_leaves_nothing_to_remove():
    assert data_dirs(["python3-pymysql"], []) == []
    assert "/var/lib/mysql" in DATA_DIRS["mariadb-server"]


def test_reset_removes_what_the_purged_packages_left(root, system):
    h = host(root, system)
    record(h, "slurm", Spec(packages=["slurmctld", "mariadb-server", "munge"]))
    system.packages = {"slurmctld", "mariadb-server", "munge", "mysql-common"}  # mysql-common: there before
    for d in ("var/lib/mysql/slurm_acct_db", "etc/mysql", "var/log/slurm", "var/lib/munge"):
        (root / d).mkdir(parents=True)
    (root / "etc/mysql/debian.cnf").write_text("[client]\n")
    (root / "var/lib/mysql/ibdata1").write_text("x")
    kept = restore(h, "slurm", keep=True)
    assert not any("left" in c for c in kept["changes"]) and (root / "var/lib/mysql").is_dir(), "not asked"
    dry = restore(host(root, system, check=True), "slurm", remove_packages=True, keep=True)
    assert "remove /var/lib/mysql (what mariadb-server left: purged)" in dry["changes"]
    assert (root / "var/lib/mysql").is_dir(), "check mode removes nothing"
    done = restore(h, "slurm", remove_packages=True)
    assert done["errors"] == []
    assert (
        [c for c in done["changes"] if "left:" in c]
        == [c for c in dry["changes"] if "left:" in c]
        == [
            "remove /etc/mysql/debian.cnf (what mariadb-server left: purged)",
            "remove /var/lib/munge (what munge left: purged)",
            "remove /var/lib/mysql (what mariadb-server left: purged)",
            "remove /var/log/slurm (what slurmctld left: purged)",
        ]
    )
    assert not (root / "var/lib/mysql").exists() and not (root / "etc/mysql/debian.cnf").exists()
    assert (root / "etc/mysql").is_dir(), "mysql-common was there before the project and stays"
    purge = next(i for i, c in enumerate(done["changes"]) if " purge " in c)
    assert purge < done["changes"].index("remove /var/lib/mysql (what mariadb-server left: purged)"), "after purge"


def test_a_package_that_was_there_before_keeps_its_data(root, system):
    h = host(root, system)
    record(h, "slurm", Spec(packages=["slurmctld"]))  # MariaDB was installed before: not the project's
    system.packages = {"slurmctld", "mariadb-server"}
    (root / "var/lib/mysql").mkdir(parents=True)
    done = restore(h, "slurm", remove_packages=True)
    assert done["errors"] == [] and (root / "var/lib/mysql").is_dir()
    assert not any("mysql" in c for c in done["changes"])


def test_a_failed_purge_removes_no_data(root, system):
    h = host(root, system)
    record(h, "slurm", Spec(packages=["mariadb-server"]))
    system.packages = {"mariadb-server"}
    system.apt_extra = ["bacula-director-mysql"]  # not the project's: the purge is refused
    (root / "var/lib/mysql").mkdir(parents=True)
    done = restore(h, "slurm", remove_packages=True)
    assert done["errors"] and (root / "var/lib/mysql").is_dir()


def test_prometheus_s_home_goes_with_the_last_of_its_three_packages():
    # A monitoring host purged whole: the prometheus user's home and the logs go.
    assert data_dirs(["prometheus", "prometheus-alertmanager", "prometheus-node-exporter"], []) == [
        "/var/lib/prometheus",
        "/var/log/prometheus",
    ]
    # node_exporter was there before the project (or another concern keeps it): its home stays.
    assert data_dirs(["prometheus", "prometheus-alertmanager"], ["prometheus-node-exporter"]) == []
