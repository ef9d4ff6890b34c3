"""Strategy `host_linear`: the linear strategy, run through Mitogen when it is installed.

A no-change site.yml run is dozens of small module runs per node. With the stock connection each one starts
Python on the node and imports the module and its module_utils again (~0.2 CPU s per run); Mitogen keeps one
interpreter per node for the whole run and ships each module once, so the nodes' CPU stops growing with the
task count. Task order, check mode, --diff and the recap are the linear strategy's.

Without the `mitogen` package, or with RDMA_LLM_CLUSTER_MITOGEN=0, this is plain `ansible.builtin.linear`.
Connections Mitogen does not handle (network_cli, local) run as they would under linear.

Mitogen pins its connection multiplexer to CPU 0 and the controller, its workers and their ssh processes to the
other CPUs. On a controller with fewer than 4 CPUs that is one core (two-CPU machine) for all of Ansible but the
multiplexer, and a no-change site.yml run on 8 lab hosts took 1.5x as long: here the pinning is left off below
4 CPUs. RDMA_LLM_CLUSTER_MITOGEN_PINNING=1 keeps Mitogen's pinning anyway, =0 turns it off on any machine.

Either way the play's Jinja plugins are loaded once, in the controller process, before any worker forks.
ansible-core loads filter and test plugins lazily on first use, and each task on each host runs in a freshly
forked worker, so every worker imported them again: about a third of the workers' CPU in a no-change run.

And the play's templates are compiled once, in the controller, before the first worker of each task forks.
ansible-core compiles a template string every time it renders one (there is no compile cache), so each worker
compiled the task's arguments, conditionals and every role default they reach again, on every host. The
compiled templates are kept by source and compile options; a template with `{% include %}` or the like, whose
meaning depends on the caller's search path, is never shared. RDMA_LLM_CLUSTER_TEMPLATE_CACHE=0 turns it off.
"""

from __future__ import annotations

DOCUMENTATION = """
name: host_linear
short_description: linear, with Mitogen's persistent interpreters when available
description:
  - The linear strategy; when the mitogen package is importable and RDMA_LLM_CLUSTER_MITOGEN is not 0,
    Mitogen's strategy mixin runs each node's modules in one persistent interpreter.
"""

import multiprocessing
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ansible.plugins.strategy.linear import StrategyModule as _Linear
from ansible.utils.display import Display


def _switch(name: str) -> bool | None:
    """An RDMA_LLM_CLUSTER_* on/off variable: False for 0/false/no/off, True for 1/true/yes/on, else None."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return None


def _mitogen_mixin():
    """Mitogen's strategy mixin, or None (not installed, or turned off); the reason goes to -v output."""
    if _switch("RDMA_LLM_CLUSTER_MITOGEN") is False:
        Display().vv("host_linear: Mitogen turned off by RDMA_LLM_CLUSTER_MITOGEN")
        return None
    try:
        import ansible_mitogen.loaders  # checks the ansible version first
        import ansible_mitogen.strategy
    except ImportError as exc:
        Display().vv(f"host_linear: Mitogen not available ({exc}); running the plain linear strategy")
        return None
    pin = _switch("RDMA_LLM_CLUSTER_MITOGEN_PINNING")
    if pin is False or (pin is None and multiprocessing.cpu_count() < 4):
        import ansible_mitogen.affinity

        ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()  # the base policy pins nothing
        Display().vv("host_linear: Mitogen's CPU pinning left off")
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


# Tags that make a template's meaning depend on the loader's search path: such templates are not shared.
_LOADS_FILES = re.compile(r"\{%-?\s*(?:include|import|from|extends)\b")
# Task keywords that hold conditionals (compiled as expressions); `that` is the assert action's.
_CONDITIONAL_KEYWORDS = ("when", "changed_when", "failed_when", "until")


class TemplateCache:
    """Compiled templates and expressions by (source, compile options), filled in the controller before the
    workers fork, so each worker finds what the play will render already compiled."""

    def __init__(self) -> None:
        from ansible._internal._templating._engine import TemplateEngine, TemplateOptions
        from ansible._internal._templating._jinja_bits import AnsibleTemplate, AnsibleTemplateExpression

        self._shareable = (AnsibleTemplate, AnsibleTemplateExpression)
        self._engine_cls = TemplateEngine
        self._options = TemplateOptions
        self._compiled: dict[tuple, object] = {}
        self._seen: set[str] = set()
        compile_template, compile_expression = TemplateEngine._compile_template, TemplateEngine._compile_expression
        cache = self

        def _compile_template(engine, template, options):
            key = cache._key("t", template, options)
            return cache._get(key, lambda: compile_template(engine, template, options))

        def _compile_expression(engine, expression, options):
            key = cache._key("e", expression, options)
            return cache._get(key, lambda: compile_expression(engine, expression, options))

        TemplateEngine._compile_template = _compile_template
        TemplateEngine._compile_expression = _compile_expression

    @staticmethod
    def _key(kind, source, options):
        if not isinstance(source, str) or _LOADS_FILES.search(source):
            return None
        return (kind, str(source), options.overrides, options.escape_backslashes)

    def _get(self, key, compile_it):
        if key is None:
            return compile_it()
        found = self._compiled.get(key)
        if found is not None:
            return found
        compiled = compile_it()
        # A failed compile comes back as a function that reports the error with its origin: never shared.
        if isinstance(compiled, self._shareable):
            self._compiled[key] = compiled
        return compiled

    def add(self, engine, value, conditional: bool = False) -> None:
        """Compile every template string in a value (nested lists and dicts) the way a worker will."""
        from ansible._internal._templating._jinja_bits import is_possibly_template

        if isinstance(value, str):
            if conditional and value.strip():
                options = self._options(escape_backslashes=False, preserve_trailing_newlines=False)
                engine._compile_expression(value.strip(), options)
            elif is_possibly_template(value):
                engine._compile_template(value, self._options.DEFAULT)
        elif isinstance(value, Mapping):
            for item in value.values():
                self.add(engine, item, conditional)
        elif isinstance(value, (list, tuple)):
            for item in value:
                self.add(engine, item, conditional)

    def add_task(self, engine, task) -> None:
        """A task's arguments, loop, vars and conditionals, and its role's defaults and vars; once each."""
        if task._uuid in self._seen:
            return
        self._seen.add(task._uuid)
        role = task._role
        if role is not None and role._uuid not in self._seen:
            self._seen.add(role._uuid)
            self.add(engine, role._default_vars)
            self.add(engine, role._role_vars)
        self.add(engine, [task.args, task.loop, task.vars])
        self.add(engine, [getattr(task, name, None) for name in _CONDITIONAL_KEYWORDS], conditional=True)
        if task.action in ("assert", "ansible.builtin.assert"):
            self.add(engine, task.args.get("that"), conditional=True)


def _template_cache():
    if _switch("RDMA_LLM_CLUSTER_TEMPLATE_CACHE") is False:
        return None
    try:
        return TemplateCache()
    except (ImportError, AttributeError) as exc:  # another ansible-core: render as it does
        Display().vv(f"host_linear: no template cache ({exc})")
        return None


_CACHE = _template_cache()


class _HostLinear:
    def run(self, iterator, play_context):
        load_template_plugins(iterator._play)
        inventory_vars = [group.vars for group in self._inventory.groups.values()]
        inventory_vars += [host.vars for host in self._inventory.get_hosts(iterator._play.hosts)]
        self._precompile("the play", _CACHE and _CACHE.add, [iterator._play.vars, inventory_vars])
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        self._precompile(task.get_name(), _CACHE and _CACHE.add_task, task)
        return super()._queue_task(host, task, task_vars, play_context)

    def _precompile(self, what, add, value) -> None:
        if not add:
            return
        if getattr(self, "_cache_engine", None) is None:
            self._cache_engine = _CACHE._engine_cls(loader=self._loader)
        try:
            add(self._cache_engine, value)
        except Exception as exc:  # the worker compiles what it needs, as it would without this
            Display().vvv(f"host_linear: {what} not precompiled ({exc})")


if _Mixin is None:

    class StrategyModule(_HostLinear, _Linear):
        pass

else:

    class StrategyModule(_HostLinear, _Mixin, _Linear):
        pass
