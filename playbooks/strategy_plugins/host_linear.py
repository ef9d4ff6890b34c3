"""Strategy `host_linear`: the linear strategy, run through Mitogen when it is installed.

A no-change site.yml run is dozens of small module runs per node. With the stock connection each one starts
Python on the node and imports the module and its module_utils again (~0.2 CPU s per run); Mitogen keeps one
interpreter per node for the whole run and ships each module once, so the nodes' CPU stops growing with the
task count. Task order, check mode, --diff and the recap are the linear strategy's.

Without the `mitogen` package, or with RDMA_LLM_CLUSTER_MITOGEN=0, this is plain `ansible.builtin.linear`.
Connections Mitogen does not handle (network_cli, local) run as they would under linear.

Either way the play's Jinja plugins are loaded once, in the controller process, before any worker forks.
ansible-core loads filter and test plugins lazily on first use, and each task on each host runs in a freshly
forked worker, so every worker imported them again: about a third of the workers' CPU in a no-change run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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

# A collection plugin named in a template: `| ns.coll.filter`, `is [not] ns.coll.test`, `lookup('ns.coll.x'`.
_PLUGIN_USE = re.compile(
    r"(?P<kind>\||\bis\b(?:\s+not\b)?|\b(?:lookup|query|q)\(\s*['\"])\s*(?P<name>[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+)\b"
)
# Where a role keeps templates.
_ROLE_DIRS = ("tasks", "handlers", "defaults", "vars", "templates")


def plugin_uses(text: str) -> dict[str, set[str]]:
    """The collection filters, tests and lookups a text names, by plugin type."""
    uses: dict[str, set[str]] = {"filter": set(), "test": set(), "lookup": set()}
    for m in _PLUGIN_USE.finditer(text):
        kind = m["kind"]
        uses["filter" if kind == "|" else "test" if kind.startswith("is") else "lookup"].add(m["name"])
    return uses


def _play_texts(play):
    """The play itself, and every role beside its roles (the roles they include are usually there)."""
    yield repr(play.get_ds())
    for roles_dir in sorted({Path(role.get_role_path()).parent for role in play.get_roles()}):
        for sub in _ROLE_DIRS:
            for path in sorted(roles_dir.glob(f"*/{sub}/**/*")):
                if path.is_file():
                    yield path.read_text(errors="replace")


def load_template_plugins(play) -> None:
    """Load the play's Jinja plugins in this process, so the workers forked from it inherit them: every builtin
    and playbook-adjacent filter and test (one pass each), and the collection plugins its roles name. A name the
    scan gets wrong costs nothing: the worker loads what it needs, as it would without this."""
    from ansible.plugins.loader import filter_loader, lookup_loader, test_loader

    loaders = {"filter": filter_loader, "test": test_loader, "lookup": lookup_loader}
    for loader in (filter_loader, test_loader):
        for _ in loader.all():
            pass
    uses: dict[str, set[str]] = {kind: set() for kind in loaders}
    for text in _play_texts(play):
        for kind, names in plugin_uses(text).items():
            uses[kind] |= names
    for kind, names in uses.items():
        for name in sorted(names):
            try:
                loaders[kind].get(name)
            except Exception as exc:  # a worker that needs it reports the real error
                Display().vvv(f"host_linear: {kind} {name} not preloaded ({exc})")


if _Mixin is None:

    class StrategyModule(_Linear):
        def run(self, iterator, play_context):
            load_template_plugins(iterator._play)
            return super().run(iterator, play_context)

else:

    class StrategyModule(_Mixin, _Linear):
        def run(self, iterator, play_context):
            load_template_plugins(iterator._play)
            return super().run(iterator, play_context)
