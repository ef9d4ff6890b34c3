#!/usr/bin/python
"""Module rdma_llm.cluster.slurm_host: what the slurm role needs to know of a host (module_utils/slurm/probe.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_host
short_description: Read a host's CPUs, memory, cgroup mode, GPUs and Slurm daemons for slurm.conf
description:
  - Reads C(/proc/cpuinfo), C(/proc/meminfo), C(/proc/self/mountinfo), C(/proc/driver/nvidia/gpus), the
    C(/dev/nvidia<N>) device files, where NVML and the Slurm build's C(gpu_nvml.so) are, the container systemd
    detected, the short hostname and C(systemctl is-active) of munge, slurmctld and slurmd.
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
    (mode, usable, why), container, gpus, gpu_devices, nvml, slurm_nvml and units.
  type: dict
  returned: always
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.probe import UNITS, host_facts


def main() -> None:
    module = AnsibleModule(argument_spec={"root": {"type": "path", "default": "/"}}, supports_check_mode=True)
    units = {}
    for unit in UNITS:
        rc, out, _ = module.run_command(["systemctl", "is-active", unit])
        units[unit] = out.strip() or ("unknown" if rc else "active")
    facts = host_facts(module.params["root"], socket.gethostname(), units)
    module.exit_json(changed=False, ansible_facts={"slurm_host": facts})


if __name__ == "__main__":
    main()
