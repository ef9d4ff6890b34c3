"""The design's fabric address (module_utils/host/fabric.py): the first address of the first fabric interface."""

from __future__ import annotations

import pytest
from ansible_collections.rdma_llm.cluster.plugins.module_utils.host import fabric


@pytest.mark.parametrize(
    ("interfaces", "cidr", "address"),
    [
        (
            [{"name": "rdma0", "addresses": ["10.77.250.11/24", "fd00::b/64"]}, {"name": "rdma1"}],
            "10.77.250.11/24",
            "10.77.250.11",
        ),
        ([{"name": "rdma0", "addresses": []}, {"name": "rdma1", "addresses": ["10.0.0.1/24"]}], None, ""),
        ([], None, ""),
        (None, None, ""),
        (["rdma0"], None, ""),
    ],
)
def test_fabric_address_is_the_first_address_of_the_first_interface(interfaces, cidr, address) -> None:
    assert fabric.fabric_cidr(interfaces) == cidr
    assert fabric.fabric_address(interfaces) == address
