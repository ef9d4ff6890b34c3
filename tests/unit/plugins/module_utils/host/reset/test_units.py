"""systemd units (module_utils/host/reset/units.py): added units go before their files, stopped ones come back."""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.record import Spec, record
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.reset.restore import restore

from tests.unit.plugins.module_utils.host.reset.fake import host


def test_units_the_project_added_go_and_units_it_stopped_come_back(root, system):
    system.units["opensm.service"] = {"load": "loaded", "enabled": "enabled", "active": "active", "vendor": "1"}
    h = host(root, system)
    record(
        h,
        "rdma_qos",
        Spec(paths=["/etc/systemd/system/rdma-qos.service"], services=["rdma-qos.service", "opensm.service"]),
    )
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/rdma-qos.service").write_text("[Unit]\n")
    system.units["rdma-qos.service"] = {"load": "loaded", "enabled": "enabled", "active": "active"}
    system.units["opensm.service"].update(enabled="disabled", active="inactive")
    system.calls.clear()
    result = restore(h, "rdma_qos")
    assert result["errors"] == []
    assert system.calls == [
        "systemctl show rdma-qos.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl show opensm.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl stop rdma-qos.service",
        "systemctl disable rdma-qos.service",
        "systemctl daemon-reload",
        "systemctl show opensm.service --property=LoadState --property=UnitFileState --property=ActiveState",
        "systemctl enable opensm.service",
        "systemctl start opensm.service",
    ]
    assert system.units["rdma-qos.service"]["load"] == "not-found"


def test_a_unit_the_project_started_and_enabled_at_runtime_is_stopped_socket_first(root, system):
    """netplan starts systemd-networkd (and its socket) on a host that did not run it, and links it under /run."""
    for unit in ("systemd-networkd.socket", "systemd-networkd.service"):
        system.units[unit] = {"load": "loaded", "enabled": "disabled", "active": "inactive", "vendor": "1"}
    h = host(root, system)
    record(h, "rdma_netplan", Spec(services=["systemd-networkd.socket", "systemd-networkd.service"]))
    system.units["systemd-networkd.socket"].update(active="active")
    system.units["systemd-networkd.service"].update(active="active", enabled="enabled-runtime")
    system.calls.clear()
    restore(h, "rdma_netplan", parts=["services"])
    assert [c for c in system.calls if not c.startswith("systemctl show")] == [
        "systemctl stop systemd-networkd.socket",
        "systemctl stop systemd-networkd.service",
        "systemctl disable --runtime systemd-networkd.service",
    ]
