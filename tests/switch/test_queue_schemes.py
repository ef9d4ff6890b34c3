"""The role's queue schemes (plugins/module_utils/switch/queues.py) against the emulator's own copy (lab/nxos_emu).

The emulator plays the switch and keeps its own system classes on purpose (an emulator reading the role's table could
not catch the role getting it wrong); this test says where the two would part: every class the role can render in
either scheme is one the emulator's NX-OS knows, and nothing beyond the scheme's queues is.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.switch.queues import QUEUE_SCHEMES

from lab.nxos_emu import grammar
from lab.nxos_emu.device import Device, DeviceInfo

pytestmark = pytest.mark.switch


def test_the_emulator_knows_exactly_the_classes_of_both_schemes():
    network, queuing = set(), set()
    for scheme in QUEUE_SCHEMES.values():
        for prefix, classes in ((scheme["network_class"], network), (scheme["queuing_class"], queuing)):
            classes |= {f"{prefix}{queue}" for queue in scheme["queues"]} | {f"{prefix}-default"}
    assert network == grammar.NQ_CLASSES
    assert queuing == grammar.QUEUE_CLASSES


@pytest.mark.parametrize("name", sorted(QUEUE_SCHEMES))
def test_the_emulator_counts_the_queues_of_each_scheme(name):
    """A queuing policy written in the scheme's class names gets the scheme's queues (and queue 0) on the emulator."""
    scheme = QUEUE_SCHEMES[name]
    device = Device(DeviceInfo(hostname="leaf1"))
    device.boot()
    cli = device.new_session()
    lines = ["configure terminal", "policy-map type queuing Q"]
    for queue in scheme["queues"]:
        lines += [f"class type queuing {scheme['queuing_class']}{queue}", "bandwidth remaining percent 0"]
    lines += [f"class type queuing {scheme['queuing_class']}-default", "bandwidth remaining percent 100"]
    lines += ["system qos", "service-policy type queuing output Q", "end"]
    output = [line for typed in lines for line in cli.handle(typed)]
    assert [line for line in output if line.startswith(("%", "ERROR"))] == []
    queues, _ = device.queue_table()
    assert sorted(queues) == [0, *scheme["queues"]]
