"""The queue schemes of a Cisco Nexus 9000, defined once: the system class names of each and the qos-groups that
exist in it (each qos-group is the egress queue of the same number).

NX-OS runs one of two layouts. `8q` (the default on current Nexus 9000 releases): qos-groups 1-7 besides the default
class, network-qos classes c-8q-nq<N>, queuing classes c-out-8q-q<N>. `4q` (older releases, and the field switch):
qos-groups 1-3 only, classes c-nq<N> and c-out-q<N>. Either way `<prefix>-default` is the class of qos-group 0, which
every other traffic shares.

Read by the value rules (switch/values.py: the no-drop, CNP and fabric TCP qos-groups must be queues of the scheme)
and, through the `nxos_roce_qos_scheme` filter (values.FILTERS, plugins/filter/nxos_roce_qos_validate.py), by the
role: roles/nxos_roce_qos/vars/main.yml hands the scheme to the template and to the post-check's expected class
names. The NX-OS emulator (lab/nxos_emu/grammar.py, device.py) keeps its own copy on purpose: it plays the switch,
and an emulator that read the role's table could not catch the role getting it wrong. Stdlib only.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import PRIORITY_RANGE

# The priorities that are a class of their own (host/qos_values.py): one queue each on an 8-queue switch, the
# first three on a 4-queue one.
_PRIORITIES = range(PRIORITY_RANGE[0], PRIORITY_RANGE[1] + 1)

# Scheme (nxos_roce_qos_queue_scheme) -> {network_class, queuing_class: the class-name prefixes, to which the
# qos-group number or "-default" is appended; queues: the qos-groups besides 0 that exist}.
QUEUE_SCHEMES = {
    "8q": {"network_class": "c-8q-nq", "queuing_class": "c-out-8q-q", "queues": list(_PRIORITIES)},
    "4q": {"network_class": "c-nq", "queuing_class": "c-out-q", "queues": list(_PRIORITIES[:3])},
}


def queue_scheme(name):
    """The scheme `name` as a new dict {network_class, queuing_class, queues} (a copy: the caller may change it);
    a RuleError for a name that is no scheme (the value rules report it first, naming the variable)."""
    scheme = QUEUE_SCHEMES.get(name) if isinstance(name, str) else None
    if scheme is None:
        raise RuleError(f"queue scheme {name!r} must be one of {sorted(QUEUE_SCHEMES)}")
    return {**scheme, "queues": list(scheme["queues"])}
