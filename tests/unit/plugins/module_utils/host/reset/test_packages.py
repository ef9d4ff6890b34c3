"""Packages (module_utils/host/reset/packages.py, accounts.py): kept unless asked, never taking another package
along, the users and groups their installs created removed after them."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.store import Host, load

from tests.unit.plugins.module_utils.host.reset.fake import host


def test_packages_are_kept_unless_asked_and_never_take_another_package_along(root, system):
    h = host(root, system)
    record(h, "rdma_stack", Spec(packages=["opensm", "libopensm9"]))
    record(h, "rdma_stack", Spec(packages=["opensm", "iperf3"]))
    assert load(h, "rdma_stack")["packages"] == ["opensm", "libopensm9", "iperf3"]
    system.packages = {"opensm", "libopensm9", "iperf3", "bash"}
    kept = restore(h, "rdma_stack", keep=True)
    assert kept["notes"] == [
        "packages the project installed are kept (opensm libopensm9 iperf3); -e reset_packages=true removes them"
    ]
    system.apt_extra = ["slurm-wlm"]  # a package installed later that depends on one of them
    refused = restore(h, "rdma_stack", remove_packages=True)
    assert "would also remove slurm-wlm" in refused["errors"][0] and not refused["forgotten"]
    assert system.packages == {"opensm", "libopensm9", "iperf3", "bash"}
    # slurm-wlm installed by another concern: a dry run says the full reset removes it first; a real run refuses
    # (resetting this concern alone would take Slurm's package along) and names the concern.
    record(h, "slurm", Spec(packages=["slurm-wlm"]))
    dry = restore(Host(h.root, h.run, check_mode=True), "rdma_stack", remove_packages=True)
    assert dry["errors"] == [] and "which slurm installed; a full reset removes those first" in dry["notes"][0]
    assert any("purge opensm libopensm9 iperf3" in c for c in dry["changes"])
    refused = restore(h, "rdma_stack", remove_packages=True)
    assert "(slurm did: reset it too, or first)" in refused["errors"][0] and not refused["forgotten"]
    assert system.packages == {"opensm", "libopensm9", "iperf3", "bash"}
    system.apt_extra = []
    # The group libibverbs1's install made goes after the packages; one that is a user's primary group stays. A user
    # the install made (MariaDB's mysql: its purge keeps it) goes before the groups, so its group goes too.
    record(h, "rdma_stack", Spec(package_groups=["rdma", "munge", "mysql"], package_users=["mysql", "gone"]))
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "group").write_text("root:x:0:\nrdma:x:102:\nmunge:x:101:\nmysql:x:107:\n")
    (root / "etc" / "passwd").write_text(
        "root:x:0:0::/root:/bin/bash\nmunge:x:100:101::/nonexistent:/bin/false\nmysql:x:102:107::/nonexistent:/bin/false\n"
    )
    done = restore(h, "rdma_stack", remove_packages=True)
    assert done["errors"] == [] and system.packages == {"bash"}
    assert "groupdel rdma" in done["changes"] and not any("groupdel munge" in c for c in done["changes"])
    assert "group munge kept: it is the primary group of munge" in done["notes"]
    changes = [c for c in done["changes"] if c.split()[0] in ("userdel", "groupdel")]
    assert changes.index("userdel mysql") < changes.index("groupdel mysql") and "userdel gone" not in changes
    assert "env DEBIAN_FRONTEND=noninteractive apt-get --yes --quiet purge opensm libopensm9 iperf3" in done["changes"]
