"""Lookup rdma_llm.cluster.metrics_zipapp: rdma-llm-metrics as one file, a zipapp of module_utils/monitoring/cli.py
and the modules it imports, built on the controller (module_utils/node/build.py); the path, for
ansible.builtin.copy's `src` (the role monitoring installs it on every node)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: metrics_zipapp
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
short_description: rdma-llm-metrics as one file, built on the controller from the collection's monitoring package
description:
  - Builds C(rdma-llm-metrics), a Python zipapp (a C(#!/usr/bin/python3) line, then a zip whose C(__main__.py) runs
    the command) of C(plugins/module_utils/monitoring/cli.py) and the modules of C(plugins/module_utils) it imports,
    at their full names, so it runs on a node with the standard library only, and returns its path on the
    controller.
  - The same files give the same bytes (entries sorted, timestamps fixed, nothing compressed), so copying it again
    changes nothing.
options:
  _terms:
    description: None (the lookup takes no terms).
    required: false
  dir:
    description:
      - The directory on the controller to write it to, as C(rdma-llm-metrics-<hash>.pyz).
      - Default, this run's local temporary directory (removed when the run ends).
    type: path
"""

EXAMPLES = r"""
- name: Install rdma-llm-metrics
  ansible.builtin.copy:
    src: "{{ lookup('rdma_llm.cluster.metrics_zipapp') }}"
    dest: /usr/local/sbin/rdma-llm-metrics
    mode: "0755"
"""

RETURN = r"""
_raw:
  description: The path of the built command on the controller (one element).
  type: list
  elements: str
"""

from ansible_collections.rdma_llm.cluster.plugins.module_utils.monitoring.cli import ENTRY, NAME
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.zipapp import ZipappLookup


class LookupModule(ZipappLookup):
    lookup, entry, command = "metrics_zipapp", ENTRY, NAME
