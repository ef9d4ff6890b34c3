"""rdma-node-check's config (plugins/module_utils/node/config.py): what it cannot check against."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.config import ConfigError

from tests.unit.plugins.module_utils.node.helpers import config


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"link_layer": "roce"}, "link_layer must be ethernet or infiniband"),
        ({"thresholds": {"xid_window": 1}}, "unknown thresholds xid_window"),
        ({"thresholds": {"sw_power_cap": "fail"}}, "thresholds.sw_power_cap must be one of report, warn"),
        ({"thresholds": {"flap_max": -1}}, "thresholds.flap_max must be an integer >= 0"),
        ({"interfaces": [{"mtu": 9000}]}, "every interface needs a name"),
    ],
)
def test_config_it_cannot_check_against(change, message) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**change)
