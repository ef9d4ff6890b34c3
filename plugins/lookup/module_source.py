"""Lookup rdma_llm.cluster.module_source: the source text of a module_utils module of this collection, found by
importing it by name (so a role installs a stdlib-only module as a host-side script without a path into the
collection: roles/node_health installs module_utils/node_check.py as /usr/local/sbin/rdma-node-check)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: module_source
author: rdma-llm-cluster maintainers (@rdma-llm-cluster)
short_description: The source text of a module_utils module of rdma_llm.cluster, by name
description:
  - Imports C(ansible_collections.rdma_llm.cluster.plugins.module_utils.<name>) and returns its source text,
    as the collection installed it (checkout link or installed artifact).
options:
  _terms:
    description: Module names (C(node_check)).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Install rdma-node-check
  ansible.builtin.copy:
    content: "{{ lookup('rdma_llm.cluster.module_source', 'node_check') }}"
    dest: /usr/local/sbin/rdma-node-check
    mode: "0755"
"""

RETURN = r"""
_raw:
  description: The source text of each module.
  type: list
  elements: str
"""

import importlib
import inspect
import re

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

PACKAGE = "ansible_collections.rdma_llm.cluster.plugins.module_utils"


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        out = []
        for name in terms:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", str(name)):
                raise AnsibleLookupError(f"module_source: {name!r} is not a module name")
            try:
                module = importlib.import_module(f"{PACKAGE}.{name}")
                out.append(inspect.getsource(module))
            except (ImportError, OSError, TypeError) as exc:
                raise AnsibleLookupError(f"module_source: cannot read module_utils {name}: {exc}") from exc
        return out
