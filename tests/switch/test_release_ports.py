"""A port that left the port lists keeps the role's policy unless the inventory releases it (issue #46, item 7).

playbooks/switch.yml against an emulator: the port lists shrink (a host_vars file not read, a misspelt key) and the
run stops before any configuration command, naming the port; with nxos_roce_qos_release_interfaces naming it, the
port loses the role's lines. The plan's rule is tested in tests/unit/plugins/module_utils/switch/test_plan.py.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.switch


def test_a_port_left_out_is_refused_then_released(emulator, switch_run):
    first = switch_run(emulator)  # the lab's two RoCE ports, Ethernet1/1 and Ethernet1/2
    assert first.rc == 0, first.explain()
    assert "interface Ethernet1/2\n  priority-flow-control mode on\n" in emulator.running()

    one_port = {"nxos_roce_qos_interfaces": [{"name": "Ethernet1/1"}]}
    mark, before = len(emulator.log()), emulator.running()
    refused = switch_run(emulator, extra_vars=one_port)
    assert refused.rc != 0, refused.explain()
    report = refused.result("lab-switch", "push | Report the failure")["msg"]
    assert "off Ethernet1/2, which carry it now" in report and "nxos_roce_qos_release_interfaces" in report, report
    assert emulator.config_commands(since=mark) == [], "nothing is sent before the refusal"
    assert emulator.running() == before

    released = switch_run(emulator, extra_vars={**one_port, "nxos_roce_qos_release_interfaces": ["Ethernet1/2"]})
    assert released.rc == 0, released.explain()
    running = emulator.running()
    port = running.split("interface Ethernet1/2\n", 1)[1].split("interface ", 1)[0]
    assert "service-policy type qos input" not in port and "priority-flow-control" not in port, port
    assert "interface Ethernet1/1\n  priority-flow-control mode on\n" in running
