"""The running-config tree and its NX-OS text rendering.

A config is a tree of `Node`s under a root. A node is one config line (`text`); a node that opens a
sub-mode (`interface Ethernet1/1`, `policy-map type qos X`) has a `kind` naming that mode and children.
`key` identifies what a line sets, so a new value replaces the old one in place (`mtu 9216` replaces
`mtu 2240`: both have key `mtu`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

INDENT = "  "


@dataclass
class Node:
    text: str
    key: str
    kind: str | None = None  # sub-mode kind for blocks, None for leaf lines
    children: list[Node] = field(default_factory=list)

    # -- lookup -----------------------------------------------------------------------------
    def find(self, key: str) -> Node | None:
        for child in self.children:
            if child.key == key:
                return child
        return None

    def find_all(self, prefix: str) -> list[Node]:
        return [c for c in self.children if c.key.startswith(prefix)]

    # -- edits ------------------------------------------------------------------------------
    def set_leaf(self, key: str, text: str) -> Node:
        """Set a leaf line: replace the line with the same key in place, or append it."""
        existing = self.find(key)
        if existing is not None:
            existing.text = text
            return existing
        node = Node(text=text, key=key)
        self.children.append(node)
        return node

    def block(self, key: str, text: str, kind: str) -> Node:
        """Find or create a sub-mode block."""
        existing = self.find(key)
        if existing is not None:
            return existing
        node = Node(text=text, key=key, kind=kind)
        self.children.append(node)
        return node

    def remove(self, key: str) -> bool:
        for index, child in enumerate(self.children):
            if child.key == key:
                del self.children[index]
                return True
        return False

    def clone(self) -> Node:
        return copy.deepcopy(self)

    def walk(self):
        """Yield (depth, node) for every descendant, depth 0 for top-level lines."""
        stack = [(0, child) for child in reversed(self.children)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, child) for child in reversed(node.children))


# -- rendering -------------------------------------------------------------------------------------
# NX-OS prints its running config grouped by component, not in the order it was typed.
_RANK = [
    ("hostname", 0),
    ("feature ", 1),
    ("priority-flow-control ", 2),
    ("class-map ", 3),
    ("policy-map type qos ", 4),
    ("policy-map type queuing ", 5),
    ("policy-map type network-qos ", 6),
    ("system qos", 7),
    ("vrf context ", 8),
    ("interface breakout ", 9),
    ("interface ", 10),
]
_BLANK_BEFORE = ("interface ", "vrf context ")


def _rank(node: Node) -> int:
    for prefix, rank in _RANK:
        if node.key.startswith(prefix) or node.key == prefix.strip():
            return rank
    return 50


def natural_key(text: str) -> list:
    """Sort `Ethernet1/10` after `Ethernet1/2`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _interface_sort(node: Node) -> list:
    name = node.key.split(" ", 1)[1]
    kind_order = {"Ethernet": 0, "port-channel": 1, "loopback": 2, "mgmt": 3}
    prefix = re.match(r"[A-Za-z-]+", name)
    return [kind_order.get(prefix.group(0) if prefix else "", 9), *natural_key(name)]


def ordered_top(root: Node) -> list[Node]:
    indexed = list(enumerate(root.children))

    def sort_key(item):
        index, node = item
        rank = _rank(node)
        if rank == 10:
            return (rank, _interface_sort(node), 0)
        return (rank, [], index)

    return [node for _, node in sorted(indexed, key=sort_key)]


# Inside a block NX-OS prints settings in a fixed order (its config is generated from the object
# model, not replayed as typed); lines of one kind (several `match`, the classes of a policy) keep
# the order they were entered in. Unknown lines sort after the known ones, in entry order.
_CHILD_RANK = [
    "description ",
    "switchport",
    "priority-flow-control mode ",
    "priority-flow-control watch-dog-interval ",
    "match ",
    "set ",
    "mtu ",
    "speed ",
    "pause buffer-size ",
    "pause ",
    "bandwidth ",
    "priority ",
    "shape ",
    "random-detect ",
    "congestion-control ",
    "service-policy type network-qos ",
    "service-policy type queuing ",
    "service-policy type qos ",
    "vrf member ",
    "shutdown",
]


_DEFAULT_CLASS = re.compile(r"class (class-default|type (queuing|network-qos) c-\S*-default)")


def _child_rank(node: Node) -> int:
    if _DEFAULT_CLASS.fullmatch(node.text):
        return len(_CHILD_RANK) + 1  # NX-OS keeps the default class last in a policy
    if node.children:
        return len(_CHILD_RANK)
    for rank, prefix in enumerate(_CHILD_RANK):
        if node.text.startswith(prefix) or node.text == prefix.strip():
            return rank
    return len(_CHILD_RANK)


def render_node(node: Node, depth: int = 0) -> list[str]:
    lines = [INDENT * depth + node.text]
    for child in sorted(node.children, key=_child_rank):
        lines.extend(render_node(child, depth + 1))
    return lines


def render_body(root: Node, top: list[Node] | None = None) -> list[str]:
    """The config lines NX-OS would print after its header, blank lines included."""
    lines: list[str] = []
    for node in top if top is not None else ordered_top(root):
        if node.key == "system qos" and not node.children:
            continue  # the default system policies: NX-OS prints no `system qos` without a service-policy under it
        if node.key.startswith(_BLANK_BEFORE):
            lines.append("")
        lines.extend(render_node(node))
    return lines


def parse_indented(text: str) -> list[tuple[int, str]]:
    """Split config text into (depth, line) pairs; comments, blank lines and `version` are dropped."""
    result = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("!") or stripped.startswith("version "):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        result.append((indent // len(INDENT), stripped))
    return result
