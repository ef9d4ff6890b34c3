#!/usr/bin/python
"""Module rdma_llm.cluster.slurm_host: what the slurm role needs to know of a host (module_utils/slurm/probe.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_host
short_description: Read a host's CPUs, memory, cgroup mode, GPUs and Slurm daemons for slurm.conf
description:
  - Reads C(/proc/cpuinfo), C(/proc/meminfo), C(/proc/self/mountinfo), C(/proc/driver/nvidia/gpus), the
    C(/dev/nvidia<N>) device files, where NVML and the Slurm build's C(gpu_nvml.so) are, the container systemd
    detected, the short hostname, the state of munge, slurmdbd, slurmctld and slurmd (one C(systemctl show)),
    and whether munged started before its key file was last written.
  - Returns them as the fact C(slurm_host). Read-only; supports check mode.
options:
  root:
    description: Root of /proc, /dev and /usr (tests point it at a fake tree).
    type: path
    default: /
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Read the host for slurm.conf
  rdma_llm.cluster.slurm_host:
"""

RETURN = r"""
ansible_facts:
  description: C(slurm_host) with hostname, cpus, sockets, cores_per_socket, threads_per_core, memory_mb, cgroup
    (mode, usable, why), container, gpus, gpu_devices, nvml, slurm_nvml, units and munge_key_stale.
  type: dict
  returned: always
"""

import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.probe import (
    UNIT_PROPERTIES,
    UNITS,
    host_facts,
    munge_stale,
    parse_units,
)


def main() -> None:
    module = AnsibleModule(argument_spec={"root": {"type": "path", "default": "/"}}, supports_check_mode=True)
    argv = ["systemctl", "show", *(f"--property={p}" for p in UNIT_PROPERTIES), *UNITS]
    _, out, _ = module.run_command(argv)
    units = parse_units(out)
    offset = time.time() - time.monotonic()
    stale = munge_stale(module.params["root"], units["munge"], offset)
    facts = host_facts(module.params["root"], socket.gethostname(), {u: v["state"] for u, v in units.items()}, stale)
    module.exit_json(changed=False, ansible_facts={"slurm_host": facts})


if __name__ == "__main__":
    main()
