"""GPU nodes' gres.conf and declared GPUs (plugins/module_utils/slurm/nodes.py).

Recorded samples and where they come from: tests/fixtures/slurm/README.md.
"""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError
from ansible_collections.rdma_llm.cluster.plugins.module_utils.slurm.nodes import gres_conf, node_gpus

from tests.unit.plugins.module_utils.slurm.samples import facts

pytestmark = pytest.mark.lint


def test_gres_nvml_only_where_the_library_and_the_slurm_plugin_are() -> None:
    gpu = facts("g1", gpus=2, gpu_devices=["/dev/nvidia0", "/dev/nvidia1"], nvml=True, slurm_nvml=True)
    assert gres_conf("g1", gpu, 2) == (["AutoDetect=nvml"], None)
    debian = {**gpu, "slurm_nvml": False}
    assert gres_conf("g1", debian, 2) == (
        ["Name=gpu File=/dev/nvidia0", "Name=gpu File=/dev/nvidia1"],
        "g1: 2 GPU(s) listed by device file in gres.conf (this Slurm build has no gpu/nvml plugin)",
    )
    assert gres_conf("g1", {**debian, "nvml": False}, 2)[1].endswith("(no NVML library (libnvidia-ml.so.1))")
    assert gres_conf("c1", facts("c1"), 0) == ([], None)
    with pytest.raises(RuleError, match=r"g1: 3 GPU\(s\) but only 2 /dev/nvidia<N> device file\(s\)"):
        gres_conf("g1", debian, 3)
    # More device files than GPUs: the first ones, as many as the GPUs.
    three = {**debian, "gpu_devices": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"]}
    assert gres_conf("g1", three, 2)[0] == ["Name=gpu File=/dev/nvidia0", "Name=gpu File=/dev/nvidia1"]


def test_declared_gpus_must_be_the_gpus_the_host_shows() -> None:
    assert node_gpus("g1", facts("g1", gpus=8), None) == 8
    assert node_gpus("g1", facts("g1", gpus=8), 8) == 8
    with pytest.raises(RuleError, match=r"g1: slurm_node_gpus is 8 but the host shows 0 GPU\(s\)"):
        node_gpus("g1", facts("g1"), 8)
    # Declared below what the host shows: refused as well (slurm.conf and slurmd must agree exactly).
    with pytest.raises(RuleError, match=r"g1: slurm_node_gpus is 4 but the host shows 8 GPU\(s\)"):
        node_gpus("g1", facts("g1", gpus=8), 4)
    with pytest.raises(RuleError, match=r"g1: slurm_node_gpus is 0 but the host shows 8 GPU\(s\)"):
        node_gpus("g1", facts("g1", gpus=8), 0)
