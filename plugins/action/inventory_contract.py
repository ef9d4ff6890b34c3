"""Action: check the whole inventory against the contract (docs/design.md) on the controller.

Every host of the contract's groups is read, whatever --limit says: uniqueness and the switch's view of
the hosts need all of them. Each host's variables are its role defaults (roles/<role>/defaults/main.yml,
read from there, never copied) under the inventory's values, templated in the host's context. The
rules themselves live in module_utils/contract/ (plain Python, tested by pytest; check.py runs them).
"""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.check import check, needed_variables, report
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.inventory import (
    NODES,
    SUBNET_MANAGERS,
    SWITCHES,
    UNGROUPED,
    Inventory,
)
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.monitoring import MONITORING
from ansible_collections.rdma_llm.cluster.plugins.module_utils.contract.slurm import SLURM_CONTROLLERS

# The collection's roles: their defaults are read where they are (roles/<role>/defaults/main.yml), never copied.
_ROLES = Path(__file__).resolve().parents[2] / "roles"


class ActionModule(ActionBase):
    """Arguments: roles (group -> role names whose defaults apply to its hosts), require_groups, and
    variables: prefixes of the variables to report on (a role used alone checks its own; empty: all)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles", "require_groups", "variables"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        roles = self._task.args.get("roles") or {}
        # Every group: slurm_partitions may name any of them.
        groups = {g: list(members) for g, members in task_vars["groups"].items()}
        for g in (NODES, SUBNET_MANAGERS, SWITCHES, UNGROUPED):
            groups.setdefault(g, [])
        defaults = {group: self._defaults(names) for group, names in roles.items()}
        hostvars, unreadable = {}, {}
        slurm = groups.get(SLURM_CONTROLLERS, [])
        monitors = groups.get(MONITORING, [])
        for host in dict.fromkeys(groups[NODES] + groups[SWITCHES] + slurm + monitors):
            group = next(g for g in (NODES, SWITCHES, SLURM_CONTROLLERS, MONITORING) if host in groups.get(g, []))
            # A switch runs no Slurm daemon: its copy of a group_vars/all munge key is not read (or decrypted).
            skip = ("slurm_",) if group == SWITCHES else ()
            hostvars[host], why = self._effective(task_vars["hostvars"], host, defaults.get(group, {}), skip)
            if why:
                unreadable[host] = why
        required = tuple(self._task.args.get("require_groups") or (NODES,))
        inventory = Inventory(groups, hostvars, unreadable, required)
        problems = check(inventory, tuple(self._task.args.get("variables") or ()))
        result["problems"] = [str(p) for p in problems]
        result["changed"] = False
        if problems:
            result["failed"] = True
            result["msg"] = report(problems)
        else:
            result["msg"] = f"inventory contract holds for {len(hostvars)} host(s)"
        return result

    def _defaults(self, names):
        merged = {}
        for name in names:
            path = _ROLES / name / "defaults" / "main.yml"
            merged.update(self._loader.load_from_file(str(path), trusted_as_template=True) or {})
        return merged

    def _effective(self, hostvars, host, defaults, skip=()):
        """The host's values of the variables the contract reads (but those starting with `skip`), templated; and
        what could not be read."""
        try:
            raw = dict(hostvars.raw_get(host))
        except AnsibleError as e:
            return {}, {"variables": _short(e)}
        merged = {**defaults, **raw}
        templar = self._templar.copy_with_new_env(available_variables=merged)
        values, unreadable = {}, {}
        for name in needed_variables():
            if name not in merged or name.startswith(tuple(skip)):
                continue
            try:
                values[name] = templar.template(merged[name])
            except AnsibleError as e:
                unreadable[name] = _short(e)
        return values, unreadable


def _short(e: Exception) -> str:
    return " ".join(str(getattr(e, "message", e)).split())[:300]
