"""Plan the commands that take an NX-OS running config exactly to the nxos_roce_qos intent.

Pure Python (stdlib only), imported by the action plugin plugins/action/nxos_roce_qos_switch.py (which reads
the switch over the persistent connection and the rendered intent file) and by
tests/unit/plugins/module_utils/switch/test_plan.py.
`plan(running, intent, marking_policy, queuing_policy=None)` returns

- `commands`: the configuration lines in the order they are sent (flat, each lands in its parent's
  mode as on NX-OS), removals (`no ...`) before additions in every block, and `config`, the same lines
  indented under their parents (written to the commands file for review);
- `before`, `after` and `unified_diff`: the managed blocks as they are and as they will be (the action
  hands them to `--diff`).

Managed blocks are the intent's top-level lines (global PFC watchdog, the class-maps and policy-maps
it names, `system qos`, its interfaces) plus ports that carry the role's input policy but left the
port list (only those the intent releases, RELEASE_DIRECTIVE: any other stops the plan), and the
per-speed queuing policies (`<queuing_policy>_<N>G`) no port uses any more, which are deleted
after the ports left them. Inside class-maps, policy-maps and `system qos` the role owns every line;
inside an interface only the lines it sets (`OWNED_INTERFACE_KEYS`), so `shutdown`, addresses, `switchport`
and the like stay. Everything outside these blocks is never touched.
"""

from __future__ import annotations

import difflib
import re

from ansible_collections.rdma_llm.cluster.plugins.module_utils.errors import RuleError

# Lines that set one value: a new value replaces the old line, so the line is keyed by these words
# (the longest matching prefix). Any other line is its own key (several `match dscp` lines coexist).
SINGLE_VALUED = (
    "description",
    "mtu",
    "priority-flow-control mode",
    "priority-flow-control watch-dog-interval",
    "service-policy type qos input",
    "service-policy type network-qos",
    "service-policy type queuing output",
    "set qos-group",
    "pause pfc-cos",
    "pause buffer-size",
    "bandwidth",
    "priority",
    "random-detect",
    "shape",
)
# What the role owns inside an interface (the rest of the port's config is the user's).
OWNED_INTERFACE_KEYS = (
    "description",
    "mtu",
    "priority-flow-control mode",
    "priority-flow-control watch-dog-interval",
    "service-policy type queuing output",
    "service-policy type qos input",
)
# Lines that never count (comments, banners NX-OS prints before the config).
_SKIP = re.compile(r"^(!|version |Building configuration|Current configuration)")
# The intent's one comment the plan reads: the ports this run may take the role's policy off
# (nxos_roce_qos_release_interfaces, rendered by the role's template). Any other port that carries the policy and
# left the port lists stops the plan (`released`, `plan`): an emptied or mistyped list must not strip a live port.
RELEASE_DIRECTIVE = "! nxos_roce_qos_release_interfaces:"


class Node:
    __slots__ = ("children", "line")

    def __init__(self, line: str):
        self.line = line
        self.children: list[Node] = []


def parse(text: str) -> list[Node]:
    """Indented config text -> top-level nodes (order kept; comments, blank and `version` lines dropped)."""
    root = Node("")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in str(text).splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or _SKIP.match(stripped):
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        node = Node(stripped)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root.children


def key(line: str) -> str:
    """Identity of a line inside its block: the setting it sets, or the whole line."""
    words = line.split()
    if words[:2] == ["class-map", "type"] and len(words) >= 5:
        return f"class-map type {words[2]} {words[-1]}"  # match-all/match-any is not the identity
    best = None
    for prefix in SINGLE_VALUED:
        size = len(prefix.split())
        if words[:size] == prefix.split() and (best is None or size > len(best.split())):
            best = prefix
    return best or line


def flatten(node: Node, depth: int = 0) -> list[tuple[int, str]]:
    out = [(depth, node.line)]
    for child in node.children:
        out += flatten(child, depth + 1)
    return out


def render(nodes: list[Node], depth: int = 0) -> list[str]:
    out = []
    for node in nodes:
        out.append("  " * depth + node.line)
        out += render(node.children, depth + 1)
    return out


def _owned(header: str, line: str, wanted_keys: set[str] | None = None) -> bool:
    """Whether the role owns `line` inside `header`. A port description is the role's only when the
    intent sets one (otherwise the user's description stays)."""
    if header.startswith("interface "):
        if key(line) == "description":
            return wanted_keys is not None and "description" in wanted_keys
        return key(line) in OWNED_INTERFACE_KEYS
    return True


def diff_children(
    header: str, running: list[Node], wanted: list[Node], depth: int = 1
) -> tuple[list[tuple[int, str]], list[Node]]:
    """Commands (depth, line) inside `header`'s mode and the resulting children of one block."""
    by_key = {key(n.line): n for n in running}
    wanted_keys = {key(n.line) for n in wanted}
    owned = [n for n in running if _owned(header, n.line, wanted_keys)]
    removed = [n for n in owned if key(n.line) not in wanted_keys]
    # A class leaves a policy only after the classes that replace it are in, and a match leaves a match-any
    # class-map only after the matches that replace it (make before break: a packet is never unclassified,
    # not even for one line), except in a queuing policy, where a removed class first frees its share. Other
    # lines go first: a value replaced in place may need the old line gone. (A match-all class-map whose
    # matches change is replaced beside itself instead: _replace_class_maps.)
    last = [
        n
        for n in removed
        if (n.line.startswith("class ") and not header.startswith("policy-map type queuing "))
        or (header.startswith("class-map ") and n.line.startswith("match "))
    ]
    commands = [(depth, f"no {n.line}") for n in removed if n not in last]
    after = [n for n in running if n not in owned]
    leaves = [w for w in wanted if not w.children]
    blocks = [w for w in wanted if w.children]
    for want in leaves:
        have = by_key.get(key(want.line))
        if have is None or have.line != want.line or have.children:
            commands.append((depth, want.line))
        after.append(want)
    changes = []  # (grows, commands) of each child block
    for want in blocks:
        have = by_key.get(key(want.line))
        if have is None:
            changes.append((_share(want) > 0, flatten(want, depth)))
            after.append(want)
            continue
        sub, sub_after = diff_children(want.line, have.children, want.children, depth + 1)
        if sub or have.line != want.line:
            changes.append((_share(want) > _share(have), [(depth, want.line), *sub]))
        merged = Node(want.line)
        merged.children = sub_after
        after.append(merged)
    # In a queuing policy the shares that shrink go first: the policy never holds more than 100 % between
    # two lines. Elsewhere the order is the intent's.
    if header.startswith("policy-map type queuing "):
        changes.sort(key=lambda change: change[0])
    for _, block_commands in changes:
        commands += block_commands
    commands += [(depth, f"no {n.line}") for n in last]
    return commands, after


def _share(cls: Node) -> int:
    """The `bandwidth remaining percent` of a queuing class (0 without one)."""
    for child in cls.children:
        if child.line.startswith("bandwidth remaining percent "):
            return int(child.line.rsplit(" ", 1)[1])
    return 0


def _temporary_name(name: str, taken: set[str]) -> str:
    """A class-map name beside `name` for the switch-over (40 characters at most, not in use)."""
    temp, number = f"{name[:36]}_mbb", 1
    while temp in taken:
        temp, number = f"{name[:34]}_mbb{number}", number + 1
    return temp


def _edited_in_place_with_a_gap(have: Node, want: Node) -> bool:
    """A match-all class-map whose matches change: every match must hold, so the old match and its
    replacement side by side (or neither, between two lines) classify nothing."""
    return "match-all" in want.line.split() and [c.line for c in have.children] != [c.line for c in want.children]


def _replace_class_maps(running: list[Node], intent: list[Node]) -> list[tuple[int, str]]:
    """Commands that replace the class-maps whose match type differs from the intent (NX-OS cannot
    change it in place), or whose matches change under match-all (no order of in-place lines keeps it
    classifying), make before break: the intended class-map is built beside the old one under a
    temporary name, every qos policy class of the old one gets a twin on it (same actions) before the
    old class leaves; then the old class-map is replaced by the intended one under its own name, the
    classes move back and the temporary one goes. At every line each policy classifies the traffic.
    `running` is edited to match, so the rest of the plan sees the class-maps as intended."""
    commands: list[tuple[int, str]] = []
    by_key = {key(n.line): n for n in running}
    taken = {n.line.split()[-1] for n in running if n.line.startswith("class-map ")}
    for want in intent:
        have = by_key.get(key(want.line))
        if not want.line.startswith("class-map ") or have is None:
            continue
        if have.line == want.line and not _edited_in_place_with_a_gap(have, want):
            continue
        name = want.line.split()[-1]
        users = [
            (policy, cls)
            for policy in running
            if policy.line.startswith("policy-map type qos ")
            for cls in policy.children
            if cls.line == f"class {name}"
        ]
        temp = None
        if users:
            temp = _temporary_name(name, taken)
            taken.add(temp)
            commands += [(0, f"{want.line.rsplit(' ', 1)[0]} {temp}"), *((1, c.line) for c in want.children)]
            for policy, cls in users:
                commands += [(0, policy.line), (1, f"class {temp}"), *((2, c.line) for c in cls.children)]
                commands.append((1, f"no {cls.line}"))
        commands += [(0, f"no {have.line}"), *flatten(want)]
        for policy, cls in users:
            commands += [(0, policy.line), *flatten(cls, 1), (1, f"no class {temp}")]
        if temp:
            commands.append((0, f"no {want.line.rsplit(' ', 1)[0]} {temp}"))
        have.line = want.line
        have.children = [Node(c.line) for c in want.children]
    return commands


def released(intent_text: str) -> set[str]:
    """The ports the intent releases: the names on its RELEASE_DIRECTIVE lines."""
    return {
        name
        for line in str(intent_text).splitlines()
        if line.strip().startswith(RELEASE_DIRECTIVE)
        for name in line.strip()[len(RELEASE_DIRECTIVE) :].split()
    }


def plan(running_text: str, intent_text: str, marking_policy: str, queuing_policy: str | None = None) -> dict:
    """The commands to the intent; RuleError, before any command, when a port that carries the role's policy would
    lose it without the intent releasing it (RELEASE_DIRECTIVE)."""
    original = {key(n.line): n for n in parse(running_text)}
    running = parse(running_text)
    intent = parse(intent_text)
    commands = _replace_class_maps(running, intent)
    by_key = {key(n.line): n for n in running}
    before_nodes: list[Node] = []
    after_nodes: list[Node] = []
    for want in intent:
        have = by_key.get(key(want.line))
        shown = original.get(key(want.line))  # the before view shows the switch as it was read
        wanted_keys = {key(c.line) for c in want.children}
        if shown is not None:
            before = Node(shown.line)
            before.children = [c for c in shown.children if _owned(shown.line, c.line, wanted_keys)]
            before_nodes.append(before)
        if not want.children:
            if have is None or have.line != want.line:
                commands.append((0, want.line))
            after_nodes.append(want)
            continue
        if have is None:
            commands += flatten(want)
            after_nodes.append(want)
            continue
        sub, sub_after = diff_children(want.line, have.children, want.children)
        if sub:
            commands += [(0, want.line), *sub]
        after = Node(want.line)
        after.children = [c for c in sub_after if _owned(want.line, c.line, wanted_keys)]
        after_nodes.append(after)
    # Ports that carry the role's input policy but are no longer in the intent: take the role's
    # lines off (the port MTU stays: the role cannot know what it was before), only those the intent releases.
    marker = f"service-policy type qos input {marking_policy}"
    wanted_ports = {n.line for n in intent if n.line.startswith("interface ")}
    leaving = [
        have
        for have in running
        if have.line.startswith("interface ")
        and have.line not in wanted_ports
        and any(c.line == marker for c in have.children)
    ]
    kept = [have.line.split(None, 1)[1] for have in leaving if have.line.split(None, 1)[1] not in released(intent_text)]
    if kept:
        raise RuleError(
            f"the plan would take the role's policy ({marker}, PFC, the no-drop class) off {', '.join(kept)}, which "
            "carry it now and are in neither nxos_roce_qos_host_interfaces nor nxos_roce_qos_uplink_interfaces: list "
            "them there, or name them in nxos_roce_qos_release_interfaces if they are meant to lose it; nothing was "
            "sent to the switch"
        )
    for have in leaving:
        removed = [
            c
            for c in have.children
            if key(c.line) in OWNED_INTERFACE_KEYS and key(c.line) not in ("mtu", "description")
        ]
        commands += [(0, have.line), *((1, f"no {c.line}") for c in removed)]
        before = Node(have.line)
        before.children = [c for c in have.children if key(c.line) in OWNED_INTERFACE_KEYS]
        before_nodes.append(before)
        after = Node(have.line)
        after.children = [c for c in before.children if c not in removed]
        after_nodes.append(after)
    # Per-speed queuing policies of the role (`<queuing_policy>_<N>G`) that the intent no longer has:
    # deleted last, once no port carries them.
    if queuing_policy:
        stale = re.compile(rf"policy-map type queuing {re.escape(queuing_policy)}_\d+[GM]")
        intent_lines = {n.line for n in intent}
        for have in running:
            if stale.fullmatch(have.line) and have.line not in intent_lines:
                commands.append((0, f"no {have.line}"))
                before_nodes.append(have)
    return _plan_result(commands, before_nodes, after_nodes, "intended")


# ----------------------------------------------------------------------------------------- reset
def managed_keys(
    running: list[Node],
    intent: list[Node],
    marking_policy: str,
    queuing_policy: str | None,
    baseline: list[Node] | None = None,
) -> list[str]:
    """The blocks the role manages on this switch: the intent's top-level lines, and in the running config (or the
    baseline reset goes back to) the ports that carry the role's input policy and the role's per-speed queuing
    policies. In the order NX-OS can build them: class-maps, policy-maps, `system qos`, ports (then the rest)."""
    keys = list(dict.fromkeys(key(n.line) for n in intent))
    marker = f"service-policy type qos input {marking_policy}"
    stale = re.compile(rf"policy-map type queuing {re.escape(queuing_policy)}_\d+[GM]") if queuing_policy else None
    for node in [*running, *(baseline or [])]:
        k = key(node.line)
        port = node.line.startswith("interface ") and any(c.line == marker for c in node.children)
        if k not in keys and (port or (stale is not None and stale.fullmatch(node.line))):
            keys.append(k)
    order = (
        "class-map ",
        "policy-map type qos ",
        "policy-map type queuing ",
        "policy-map type network-qos ",
        "system qos",
    )
    rank = {prefix: i for i, prefix in enumerate(order)}
    return sorted(keys, key=lambda k: next((rank[p] for p in order if k.startswith(p)), len(order)))


def plan_restore(
    running_text: str,
    baseline_text: str | None,
    intent_text: str,
    marking_policy: str,
    queuing_policy: str | None = None,
) -> dict:
    """The commands that take the role's managed blocks back to the switch's configuration before the role's first
    apply (`baseline_text`, the running config the role read then), for playbooks/reset.yml. Returns the same keys as
    `plan`.

    Every managed block (`managed_keys`) becomes what the baseline had: a block the baseline had is diffed back to it
    (make before break for a class-map whose match type the role changed, shares that shrink first); a port the
    baseline had loses the lines the role owns that the baseline did not set (its MTU included) and gets back those
    it did. Blocks the baseline did not have go, in the order NX-OS allows: first every reference to them (ports,
    `system qos`, policies the baseline had), then the policy-maps, then the class-maps, then the global lines.

    Without a baseline (`None`: it was not kept, or the switch was configured by a version of the role that kept
    none) the target is the switch without any managed block, the same as a baseline that had none of them: ports
    lose every line the role sets (their MTU then falls back to the NX-OS default). A `feature` the role enables
    stays on then: it may have been on before, and other config may use it."""
    original = {key(n.line): n for n in parse(running_text)}
    running = parse(running_text)
    intent = parse(intent_text)
    baseline = parse(baseline_text) if baseline_text is not None else []
    base = {key(n.line): n for n in baseline}
    keys = managed_keys(running, intent, marking_policy, queuing_policy, baseline)
    wanted = {key(n.line): n for n in intent}
    # A class-map whose match type the role changed comes back make before break (the policies keep classifying).
    commands = _replace_class_maps(running, [base[k] for k in keys if k in base and k.startswith("class-map ")])
    by_key = {key(n.line): n for n in running}
    before_nodes: list[Node] = []
    after_nodes: list[Node] = []
    deletes: list[tuple[int, str]] = []
    globals_gone: list[tuple[int, str]] = []
    for k in keys:
        have, target, shown = by_key.get(k), base.get(k), original.get(k)
        if k.startswith("feature ") and baseline_text is None:
            target = have  # no kept config shows the feature off: it may predate the role, and others use it
        target_keys = {key(c.line) for c in target.children} if target is not None else set()
        owned = _restore_owner(k, wanted.get(k), target_keys)
        for node, views in ((shown, before_nodes), (target, after_nodes)):
            if node is not None:
                view = Node(node.line)
                view.children = [c for c in node.children if owned(c.line)]
                views.append(view)
        if have is None:
            if target is not None:  # the role's run removed it: it comes back
                commands += flatten(target)
            continue
        if k.startswith(("class-map ", "policy-map ")):
            if target is None:
                deletes.append((0, f"no {have.line}"))
                continue
            sub, _ = diff_children(target.line, have.children, target.children)
            if sub or have.line != target.line:
                commands += [(0, target.line), *sub]
            continue
        if not k.startswith(("interface ", "system qos")):  # a global line (the PFC watchdog, feature lldp)
            if target is None:
                globals_gone.append((0, f"no {have.line}"))
            elif target.line != have.line:
                commands.append((0, target.line))
            continue
        # A port or `system qos`: the lines the role owns that the baseline did not set go, the baseline's come back.
        goal = [c for c in (target.children if target is not None else []) if owned(c.line)]
        goal_keys = {key(g.line) for g in goal}
        present = {c.line for c in have.children}
        sub = [(1, f"no {c.line}") for c in have.children if owned(c.line) and key(c.line) not in goal_keys]
        sub += [(1, g.line) for g in goal if g.line not in present]
        if sub:
            commands += [(0, have.line), *sub]
    # Deletes: policy-maps before the class-maps they use; the global lines last.
    deletes.sort(key=lambda c: 0 if c[1].startswith("no policy-map ") else 1)
    commands += deletes + globals_gone
    return _plan_result(commands, before_nodes, after_nodes, "before the first apply")


def _restore_owner(block_key: str, intent_block: Node | None, baseline_keys: set[str]):
    """Which lines of a managed block reset puts back: every line of a class-map, policy-map or `system qos`; on a
    port the lines the role sets, the description only where the role's intent sets one or the baseline had one."""
    port = block_key.startswith("interface ")
    role_description = intent_block is not None and any(key(c.line) == "description" for c in intent_block.children)

    def owned(line: str) -> bool:
        if not port:
            return True
        if key(line) == "description":
            return role_description or "description" in baseline_keys
        return key(line) in OWNED_INTERFACE_KEYS

    return owned


def _plan_result(commands: list[tuple[int, str]], before_nodes: list, after_nodes: list, after_label: str) -> dict:
    """A plan as the switch action reads it: the commands (flat, and indented under their parents: what a reviewer
    reads in the commands file) and the managed lines before and after, with their unified diff."""
    before_text = "\n".join(render(before_nodes)) + "\n"
    after_text = "\n".join(render(after_nodes)) + "\n"
    unified = "".join(
        difflib.unified_diff(before_text.splitlines(True), after_text.splitlines(True), "running-config", after_label)
    )
    return {
        "commands": [line for _, line in commands],
        "config": "".join(f"{'  ' * depth}{line}\n" for depth, line in commands),
        "before": before_text,
        "after": after_text,
        "unified_diff": unified,
    }
