"""Strategy `host_linear`: the linear strategy, run through Mitogen when it is installed.

A no-change site.yml run is dozens of small module runs per node. With the stock connection each one starts
Python on the node and imports the module and its module_utils again (~0.2 CPU s per run); Mitogen keeps one
interpreter per node for the whole run and ships each module once, so the nodes' CPU stops growing with the
task count. Task order, check mode, --diff and the recap are the linear strategy's.

Without the `mitogen` package, or with RDMA_LLM_CLUSTER_MITOGEN=0, this is plain `ansible.builtin.linear`.
Connections Mitogen does not handle (network_cli, local) run as they would under linear.
"""

from __future__ import annotations

import os

from ansible.plugins.strategy.linear import StrategyModule as _Linear
from ansible.utils.display import Display

DOCUMENTATION = """
name: host_linear
short_description: linear, with Mitogen's persistent interpreters when available
description:
  - The linear strategy; when the mitogen package is importable and RDMA_LLM_CLUSTER_MITOGEN is not 0,
    Mitogen's strategy mixin runs each node's modules in one persistent interpreter.
"""

_OFF = ("0", "false", "no", "off")


def _mitogen_mixin():
    """Mitogen's strategy mixin, or None (not installed, or turned off); the reason goes to -v output."""
    if os.environ.get("RDMA_LLM_CLUSTER_MITOGEN", "1").strip().lower() in _OFF:
        Display().vv("host_linear: Mitogen turned off by RDMA_LLM_CLUSTER_MITOGEN")
        return None
    try:
        import ansible_mitogen.loaders  # checks the ansible version first
        import ansible_mitogen.strategy
    except ImportError as exc:
        Display().vv(f"host_linear: Mitogen not available ({exc}); running the plain linear strategy")
        return None
    return ansible_mitogen.strategy.StrategyMixin


_Mixin = _mitogen_mixin()

if _Mixin is None:

    class StrategyModule(_Linear):
        pass

else:

    class StrategyModule(_Mixin, _Linear):
        pass
