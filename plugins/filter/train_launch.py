"""Filters: the launch's decisions (ranks, payload config, NCCL env, checks, outcome, progress, manifest, rejoin unit)
and its Slurm engine's (batch and step scripts, node checks).

The rules live in module_utils/launch/: train.py (the plan), preflight.py, rdzv.py (the store's own host),
failures.py, outcome.py, rejoin.py, slurm_script.py, slurm_state.py, slurm_nodes.py and fabric.py (the fabric's
counters over a job); each module's FILTERS names its own.
"""

from __future__ import annotations

from ansible_collections.rdma_llm.cluster.plugins.module_utils.launch import (
    fabric,
    failures,
    outcome,
    preflight,
    rdzv,
    rejoin,
    slurm_nodes,
    slurm_script,
    slurm_state,
    train,
)
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.filters import adapt

MODULES = (train, preflight, rdzv, failures, outcome, rejoin, slurm_script, slurm_state, slurm_nodes, fabric)


class FilterModule:
    def filters(self):
        return adapt({name: rule for module in MODULES for name, rule in module.FILTERS.items()})
