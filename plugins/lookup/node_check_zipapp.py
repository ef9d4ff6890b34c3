"""Lookup rdma_llm.cluster.node_check_zipapp: rdma-node-check as one file, a zipapp of module_utils/node built on the
controller (module_utils/node/build.py); the path, for ansible.builtin.copy's `src` (roles/node_health installs it as
/usr/local/sbin/rdma-node-check)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: node_check_zipapp
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
short_description: rdma-node-check as one file, built on the controller from the collection's node package
description:
  - Builds C(rdma-node-check), a Python zipapp (a C(#!/usr/bin/python3) line, then a zip whose C(__main__.py) runs
    the command) of the modules of C(plugins/module_utils/node) the command imports, at their full names, so it runs
    on a node with the standard library only, and returns its path on the controller.
  - The same files give the same bytes (entries sorted, timestamps fixed, nothing compressed), so copying it again
    changes nothing.
options:
  _terms:
    description: None (the lookup takes no terms).
    required: false
  dir:
    description:
      - The directory on the controller to write it to, as C(rdma-node-check-<hash>.pyz).
      - Default, this run's local temporary directory (removed when the run ends).
    type: path
"""

EXAMPLES = r"""
- name: Install rdma-node-check
  ansible.builtin.copy:
    src: "{{ lookup('rdma_llm.cluster.node_check_zipapp') }}"
    dest: /usr/local/sbin/rdma-node-check
    mode: "0755"
"""

RETURN = r"""
_raw:
  description: The path of the built command on the controller (one element).
  type: list
  elements: str
"""

from ansible_collections.rdma_llm.cluster.plugins.module_utils.node.build import ENTRY, NAME
from ansible_collections.rdma_llm.cluster.plugins.plugin_utils.zipapp import ZipappLookup


class LookupModule(ZipappLookup):
    lookup, entry, command = "node_check_zipapp", ENTRY, NAME
