"""The inventory contract's value checks: each takes a value and returns what is wrong with it, or None.

A row of contract/variables.py (or contract/slurm.py) pairs a variable with one of these; the rules across fields
and hosts use them too, so that a type is written once.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from ansible_collections.rdma_llm.cluster.plugins.module_utils.host.qos_values import (
    DSCP_RANGE,
    PERCENT_RANGE,
    PRIORITY_RANGE,
    PROFILES,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.numbers import as_int

# netplan accepts these interface names (Linux IFNAMSIZ - 1 characters).
IFNAME_RE = r"^[A-Za-z0-9_.-]{1,15}$"
DNS_LABEL_RE = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
DOMAIN_RE = (
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


Check = Callable[[Any], str | None]


def integer(lo: int | None = None, hi: int | None = None, even: bool = False) -> Check:
    span = f" {lo}-{hi}" if lo is not None and hi is not None else (f" >= {lo}" if lo is not None else "")
    want = f"must be {'an even' if even else 'an'} integer{span}"

    def check(value: Any) -> str | None:
        n = as_int(value)
        bad = n is None or (lo is not None and n < lo) or (hi is not None and n > hi) or (even and n % 2)
        return f"{want} (got {value!r})" if bad else None

    return check


TRUE_WORDS, FALSE_WORDS = ("true", "yes"), ("false", "no")


def boolean() -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, bool) or str(value).lower() in TRUE_WORDS + FALSE_WORDS
        return None if ok else f"must be true or false (got {value!r})"

    return check


def is_true(value: Any) -> bool:
    """A flag as boolean() accepts it, read as Ansible reads those words."""
    return value is True or str(value).lower() in TRUE_WORDS


def boolean_or(*options: str) -> Check:
    """true or false, or one of the words `options` (rdma_modules_gpudirect: auto)."""
    flag = boolean()

    def check(value: Any) -> str | None:
        if value in options or flag(value) is None:
            return None
        return f"must be true, false or {' or '.join(options)} (got {value!r})"

    return check


def choice(*options: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in options else f"must be one of {', '.join(options)} (got {value!r})"

    return check


def text(pattern: str = r"^[^\x00-\x1f\x7f]+$", what: str = "a non-empty single-line string") -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, str) and re.fullmatch(pattern, value) is not None
        return None if ok else f"must be {what} (got {value!r})"

    return check


def list_of(item: Check, nonempty: bool = False, what: str = "a list") -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"must be {what} (got {value!r})"
        if nonempty and not value:
            return f"must be a non-empty {what.removeprefix('a ')}"
        for i, v in enumerate(value):
            why = item(v)
            if why:
                return f"[{i}] {why}"
        return None

    return check


def mapping() -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, dict) else f"must be a mapping of name to value (got {value!r})"

    return check


def networks_by_family() -> Check:
    """{ipv4: [CIDR ...], ipv6: [CIDR ...]}: network addresses (no host bits) of the family their key names."""

    def check(value: Any) -> str | None:
        want = f"must be {{ipv4: [CIDR ...], ipv6: [CIDR ...]}} of network addresses (got {value!r})"
        if not isinstance(value, dict) or set(value) != {"ipv4", "ipv6"}:
            return want
        for key, version in (("ipv4", 4), ("ipv6", 6)):
            if not isinstance(value[key], list):
                return want
            for cidr in value[key]:
                try:
                    ok = isinstance(cidr, str) and ipaddress.ip_network(cidr, strict=True).version == version
                except ValueError:
                    ok = False
                if not ok:
                    return f"{key}: {cidr!r} is not an IPv{version} network in CIDR notation (no host bits)"
        return None

    return check


def opensm_ports() -> Check:
    def check(value: Any) -> str | None:
        guids = (
            isinstance(value, list)
            and value
            and all(isinstance(v, str) and re.fullmatch(r"0x[0-9a-fA-F]{16}", v) for v in value)
        )
        return (
            None
            if value == "ALL" or guids
            else f"must be ALL or a list of 0x<16 hex digits> port GUIDs (got {value!r})"
        )

    return check


# The one type of each kind of QoS value (ranges in module_utils/host/qos_values.py): every row and rule that carries
# one uses it.
DSCP = integer(*DSCP_RANGE)
PRIORITY = integer(*PRIORITY_RANGE)
PERCENT = integer(*PERCENT_RANGE)
PROFILE = choice(*PROFILES)
# NCCL_IB_QPS_PER_CONNECTION: 1 (NCCL's default) to NCCL's NCCL_IB_MAX_QPS (src/transport/net_ib).
QPS_PER_CONNECTION = integer(1, 128)
