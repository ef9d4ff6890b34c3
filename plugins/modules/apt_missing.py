#!/usr/bin/python
"""Documentation of the action rdma_llm.cluster.apt_missing (plugins/action/apt_missing.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: apt_missing
short_description: Install with apt only the packages dpkg does not show installed
description:
  - Asks C(dpkg-query) which of the packages are installed, and runs C(ansible.builtin.apt) (state present) for
    the others only; a run with nothing to install costs the host one C(dpkg-query) and never loads the apt cache.
  - A name pinned to a version or release (C(pkg=1.2), C(pkg/bookworm-backports)) always goes to apt.
  - With O(cache_valid_time=0) (refresh the cache on every run) apt always runs.
  - In check mode the probe runs (it only reads) and apt says what it would install.
  - An action plugin; this file only documents it.
options:
  name:
    description: A package name or a list of them.
    type: list
    elements: str
    required: true
  update_cache:
    description: Update the apt cache first (when it is older than O(cache_valid_time)).
    type: bool
    default: true
  cache_valid_time:
    description: Seconds an apt cache stays fresh.
    type: int
    default: 3600
  install_recommends:
    description:
      - Install the packages' Recommends too. Off by default, so a role lists every package it uses (on bookworm
        the Slurm role's packages are 141 with Recommends and 33 without; the others are fonts, X11, codecs and
        monitoring plugins).
    type: bool
    default: false
  reset_concern:
    description:
      - Record what apt installed (dependencies included) under this concern for C(playbooks/reset.yml)
        (module C(rdma_llm.cluster.reset_record)); reset removes those packages on request only.
    type: str
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
"""

EXAMPLES = r"""
- name: Install the RDMA packages that are missing
  rdma_llm.cluster.apt_missing:
    name: [rdma-core, perftest, infiniband-diags]
    cache_valid_time: 3600
"""

RETURN = r"""
missing:
  description: The packages apt was asked for (not installed, or pinned).
  type: list
  elements: str
  returned: always
installed:
  description: What apt installed (with reset_concern), dependencies included.
  type: list
  elements: str
  returned: when apt ran with reset_concern
"""
