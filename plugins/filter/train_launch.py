"""Filters: the launch's decisions (ranks, payload config, NCCL env, outcome, progress, manifest) and its Slurm
engine's (batch and step scripts, node checks).

The rules live in module_utils/launch/train.py, module_utils/launch/slurm_job.py and module_utils/launch/fabric.py (the
fabric's counters over a job).
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import fabric as train_fabric
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import slurm_job as slurm_launch
from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import train as train_launch
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt


class FilterModule:
    def filters(self):
        return adapt(train_launch.FILTERS | slurm_launch.FILTERS | train_fabric.FILTERS)
