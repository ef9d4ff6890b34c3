"""Configuration-mode command grammar.

`apply_line` runs one config line against a mode stack (a list of `Node`s: the config root, then the
blocks entered). Like NX-OS, a line not valid in the current sub-mode falls through to the parent modes;
the mode it matched in becomes the current one (and a block it opens is entered). This is what lets
`cisco.nxos.nxos_config` send a policy as a flat list with no `exit`.

Errors are `CliError`s carrying the NX-OS message and the column of the `^` marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .config import Node
from .words import (
    INCOMPLETE,
    INVALID,
    Args,
    CliError,
    NoMatch,
    format_list,
    parse_interface,
    tokenize,
)

MUTEX = "ERROR: bandwidth and priority are mutually exclusive in a class; remove {} first"

# Mode kind -> prompt suffix shown as `host(<suffix>)#`.
PROMPTS = {
    "config": "config",
    "if": "config-if",
    "cmap-qos": "config-cmap-qos",
    "pmap-qos": "config-pmap-qos",
    "pmap-c-qos": "config-pmap-c-qos",
    "pmap-nqos": "config-pmap-nqos",
    "pmap-c-nqos": "config-pmap-nqos-c",
    "pmap-que": "config-pmap-que",
    "pmap-c-que": "config-pmap-c-que",
    "sys-qos": "config-sys-qos",
    "vrf": "config-vrf",
}

# System-defined classes of the two queueing schemes of a Nexus 9000 (4 or 8 queues).
NQ_CLASSES = {f"c-nq{i}" for i in range(1, 4)} | {"c-nq-default"}
NQ_CLASSES |= {f"c-8q-nq{i}" for i in range(1, 8)} | {"c-8q-nq-default"}
QUEUE_CLASSES = {f"c-out-q{i}" for i in range(1, 4)} | {"c-out-q-default"}
QUEUE_CLASSES |= {f"c-out-8q-q{i}" for i in range(1, 8)} | {"c-out-8q-q-default"}
SYSTEM_POLICIES = {
    "queuing": {"default-out-policy", "default-8q-out-policy"},
    "network-qos": {"default-nq-policy", "default-8q-nq-policy"},
    "qos": set(),
}
BREAKOUT_MAPS = {"10g-4x": 4, "25g-4x": 4, "50g-2x": 2, "100g-4x": 4, "100g-2x": 2}
# Bytes a `pause buffer-size` value may take (assumed: the emulator's bound, not a Cisco range).
PAUSE_BUFFER_MAX = 16 * 1024 * 1024


# -- references (what uses what) ---------------------------------------------------------------------
def class_map_users(root: Node, name: str) -> list[str]:
    users = []
    for node in root.find_all("policy-map type qos "):
        if node.find(f"class {name}") is not None:
            users.append(node.key.rsplit(" ", 1)[1])
    return users


def policy_users(root: Node, ptype: str, name: str) -> list[str]:
    wanted = {
        "qos": "service-policy type qos input",
        "network-qos": "service-policy type network-qos",
        "queuing": "service-policy type queuing output",
    }[ptype]
    users = []
    for node in root.children:
        if node.kind in ("if", "sys-qos"):
            attached = node.find(wanted)
            if attached is not None and attached.text.rsplit(" ", 1)[1] == name:
                users.append(node.text)
    return users


# -- modes ---------------------------------------------------------------------------------------------
Handler = Callable[[Node, Node, Args, bool], "Node | None"]


def _config(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    cmd = args.first(
        "hostname",
        "feature",
        "interface",
        "class-map",
        "policy-map",
        "system",
        "priority-flow-control",
        "vrf",
    )
    if cmd == "hostname":
        if negate:
            node.set_leaf("hostname", "hostname switch")
            return None
        name = args.word()
        args.end()
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
            raise CliError("% Invalid hostname at '^' marker.", args.tokens[args.pos - 1].col)
        node.set_leaf("hostname", f"hostname {name}")
        return None
    if cmd == "feature":
        name = args.kw("lldp", "lacp", "interface-vlan", "udld", "bfd", "ospf", "bgp", "nxapi", "scp-server")
        args.end()
        if negate:
            node.remove(f"feature {name}")
        else:
            node.set_leaf(f"feature {name}", f"feature {name}")
        return None
    if cmd == "interface":
        return _config_interface(root, node, args, negate)
    if cmd == "class-map":
        return _config_class_map(root, node, args, negate)
    if cmd == "policy-map":
        return _config_policy_map(root, node, args, negate)
    if cmd == "system":
        args.kw("qos")
        args.end()
        if negate:
            node.remove("system qos")
            return None
        return node.block("system qos", "system qos", "sys-qos")
    if cmd == "vrf":
        args.kw("context")
        name = args.word()
        args.end()
        if negate:
            node.remove(f"vrf context {name}")
            return None
        return node.block(f"vrf context {name}", f"vrf context {name}", "vrf")
    # priority-flow-control (global PFC watchdog)
    args.kw("watch-dog-interval")
    key = "priority-flow-control watch-dog-interval"
    if negate:
        args.try_kw("on", "off")
        args.end()
        node.remove(key)
        return None
    state = args.kw("on", "off")
    args.end()
    node.set_leaf(key, f"{key} {state}")
    return None


def _config_interface(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    if args.try_kw("breakout"):
        args.kw("module")
        module = args.number(1, 32)
        args.kw("port")
        port = args.number(1, 64)
        key = f"interface breakout module {module} port {port}"
        parent = f"Ethernet{module}/{port}"
        if negate:
            args.try_kw("map")
            if args.try_kw(*BREAKOUT_MAPS):
                pass
            args.end()
            if node.remove(key):
                for child in node.find_all(f"interface {parent}/"):
                    node.remove(child.key)
                node.block(f"interface {parent}", f"interface {parent}", "if")
            return None
        args.kw("map")
        mapping = args.kw(*BREAKOUT_MAPS)
        args.end()
        if node.find(f"interface {parent}") is None and node.find(key) is None:
            raise CliError(f"ERROR: Interface {parent} does not exist")
        if node.find(key) is None:
            node.remove(f"interface {parent}")
            for lane in range(1, BREAKOUT_MAPS[mapping] + 1):
                name = f"{parent}/{lane}"
                node.block(f"interface {name}", f"interface {name}", "if")
        node.set_leaf(key, f"{key} map {mapping}")
        return None
    name, tok = parse_interface(args)
    args.end()
    key = f"interface {name}"
    existing = node.find(key)
    if negate:
        if name.startswith(("Ethernet", "mgmt")):
            raise CliError(f"ERROR: Cannot remove physical interface {name}")
        node.remove(key)
        return None
    if existing is None and name.startswith(("Ethernet", "mgmt")):
        raise CliError("% Invalid interface format at '^' marker.", tok.col)
    return node.block(key, key, "if")


def _config_class_map(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.kw("type")
    ctype = args.kw("qos")
    match_type = args.try_kw("match-all", "match-any")
    name = args.word()
    args.end()
    key = f"class-map type {ctype} {name}"
    existing = node.find(key)
    if negate:
        if existing is None:
            raise CliError(f"ERROR: class-map {name} does not exist")
        users = class_map_users(root, name)
        if users:
            raise CliError(f"ERROR: class-map {name} is being referenced by policy-map {', '.join(users)}")
        node.remove(key)
        return None
    match_type = match_type or "match-all"
    text = f"class-map type {ctype} {match_type} {name}"
    if existing is not None and existing.text != text:
        raise CliError(f"ERROR: class-map {name} exists with a different match type")
    return node.block(key, text, "cmap-qos")


def _config_policy_map(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.kw("type")
    ptype = args.kw("qos", "network-qos", "queuing")
    name = args.word()
    args.end()
    key = f"policy-map type {ptype} {name}"
    if name in SYSTEM_POLICIES[ptype]:
        raise CliError(f"ERROR: {name} is a system-defined policy-map and cannot be modified")
    if negate:
        if node.find(key) is None:
            raise CliError(f"ERROR: policy-map {name} does not exist")
        users = policy_users(root, ptype, name)
        if users:
            raise CliError(f"ERROR: policy-map {name} is attached to {', '.join(users)}")
        node.remove(key)
        return None
    kind = {"qos": "pmap-qos", "network-qos": "pmap-nqos", "queuing": "pmap-que"}[ptype]
    return node.block(key, key, kind)


PORT_SPEEDS = ("100", "1000", "10000", "25000", "40000", "50000", "100000", "200000", "400000", "800000")


def _interface(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    cmd = args.first(
        "mtu",
        "description",
        "shutdown",
        "priority-flow-control",
        "service-policy",
        "speed",
        "vrf",
        "switchport",
    )
    is_mgmt = node.key.startswith("interface mgmt")
    if cmd == "speed":
        # Nexus 9000 port speeds in Mb/s; `auto` (the default) is not shown.
        tok = args.peek()
        word = args.word() if not (negate and args.done()) else "auto"
        args.end()
        if negate or word == "auto":
            node.remove("speed")
            return None
        if word not in PORT_SPEEDS:
            raise CliError(INVALID, tok.col if tok else None)
        node.set_leaf("speed", f"speed {word}")
        return None
    if cmd == "mtu":
        if negate:
            if not args.done():
                args.number(576, 9216)
            args.end()
            node.remove("mtu")
            return None
        tok = args.peek()
        mtu = args.number(576, 9216)
        args.end()
        if mtu % 2:
            raise CliError("% Invalid value, MTU must be an even number at '^' marker.", tok.col if tok else None)
        if mtu == 1500:
            node.remove("mtu")  # the default is not shown in the running config
        else:
            node.set_leaf("mtu", f"mtu {mtu}")
        return None
    if cmd == "description":
        if negate:
            node.remove("description")
            return None
        node.set_leaf("description", f"description {args.rest()}")
        return None
    if cmd == "shutdown":
        args.end()
        if negate:
            node.remove("shutdown")
        else:
            node.set_leaf("shutdown", "shutdown")
        return None
    if cmd == "vrf":
        args.kw("member")
        name = args.word()
        args.end()
        if negate:
            node.remove("vrf member")
        else:
            node.set_leaf("vrf member", f"vrf member {name}")
        return None
    if cmd == "switchport":
        if is_mgmt:
            raise CliError(INVALID, args.tokens[args.pos - 1].col)
        args.end()
        if negate:
            node.remove("switchport")
        else:
            node.set_leaf("switchport", "switchport")
        return None
    if is_mgmt:
        raise CliError(INVALID, args.tokens[args.pos - 1].col)
    if cmd == "priority-flow-control":
        sub = args.kw("mode", "watch-dog-interval")
        if sub == "mode":
            key = "priority-flow-control mode"
            if negate:
                args.try_kw("auto", "on", "off")
                args.end()
                node.remove(key)
                return None
            mode = args.kw("auto", "on", "off")
            args.end()
            if mode == "auto":
                node.remove(key)  # auto is the default
            else:
                node.set_leaf(key, f"{key} {mode}")
            return None
        key = "priority-flow-control watch-dog-interval"
        if negate:
            args.try_kw("on", "off")
            args.end()
            node.remove(key)
            return None
        state = args.kw("on", "off")
        args.end()
        node.set_leaf(key, f"{key} {state}")
        return None
    # service-policy type qos input NAME
    args.kw("type")
    ptype = args.kw("qos", "queuing")
    direction = args.kw("input", "output") if ptype == "queuing" else args.kw("input")
    key = f"service-policy type {ptype} {direction}"
    if negate:
        if not args.done():
            name = args.word()
            args.end()
            current = node.find(key)
            if current is None or current.text.rsplit(" ", 1)[1] != name:
                raise CliError(f"ERROR: policy-map {name} is not attached to this interface")
        node.remove(key)
        return None
    tok = args.peek()
    name = args.word()
    args.end()
    if root.find(f"policy-map type {ptype} {name}") is None and name not in SYSTEM_POLICIES[ptype]:
        raise CliError(f"% policy-map {name} does not exist at '^' marker.", tok.col if tok else None)
    node.set_leaf(key, f"{key} {name}")
    return None


def _cmap_qos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    if args.first("match", "description") == "description":
        if negate:
            node.remove("description")
        else:
            node.set_leaf("description", f"description {args.rest()}")
        return None
    what = args.kw("dscp", "cos", "precedence")
    limits = {"dscp": 63, "cos": 7, "precedence": 7}[what]
    # NX-OS keeps several match statements side by side (match-all: all must hold; match-any: one),
    # so each line is its own setting; `no match dscp V` removes that line, `no match dscp` all.
    if negate:
        values = None if args.done() else args.number_list(0, limits)
        args.end()
        for child in list(node.children):
            if child.key.startswith(f"match {what} ") and (
                values is None or child.key == f"match {what} {format_list(values)}"
            ):
                node.remove(child.key)
        return None
    values = args.number_list(0, limits)
    args.end()
    text = f"match {what} {format_list(values)}"
    node.set_leaf(text, text)
    return None


def _pmap_qos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.first("class")
    if args.try_kw("type"):
        args.kw("qos")
    tok = args.peek()
    name = args.word()
    args.end()
    key = f"class {name}"
    if negate:
        if not node.remove(key):
            raise CliError(f"ERROR: class {name} is not in this policy-map")
        return None
    if name != "class-default" and root.find(f"class-map type qos {name}") is None:
        raise CliError(f"% class-map {name} does not exist at '^' marker.", tok.col if tok else None)
    return node.block(key, key, "pmap-c-qos")


def _pmap_c_qos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.first("set")
    what = args.kw("qos-group", "dscp", "cos")
    key = f"set {what}"
    if negate:
        if not args.done():
            args.number(0, 63)
        args.end()
        node.remove(key)
        return None
    value = args.number(0, 63 if what == "dscp" else 7)
    args.end()
    node.set_leaf(key, f"set {what} {value}")
    return None


def _system_class(node: Node, args: Args, negate: bool, kind: str, valid, mode: str) -> Node | None:
    """`class type <kind> <name>` inside a network-qos or queuing policy: only the system classes exist."""
    args.first("class")
    args.kw("type")
    args.kw(kind)
    tok = args.peek()
    name = args.word()
    args.end()
    key = f"class type {kind} {name}"
    if name not in valid:
        raise CliError(f"% Invalid class-map {name} at '^' marker.", tok.col if tok else None)
    if negate:
        if not node.remove(key):
            raise CliError(f"ERROR: class {name} is not in this policy-map")
        return None
    return node.block(key, key, mode)


def _pmap_nqos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    return _system_class(node, args, negate, "network-qos", NQ_CLASSES, "pmap-c-nqos")


def _pmap_c_nqos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    cmd = args.first("mtu", "pause", "congestion-control")
    if cmd == "mtu":
        if negate:
            if not args.done():
                args.number(1500, 9216)
            args.end()
            node.remove("mtu")
            return None
        mtu = args.number(1500, 9216)
        args.end()
        node.set_leaf("mtu", f"mtu {mtu}")
        return None
    if cmd == "pause" and args.try_kw("buffer-size"):
        # PFC headroom of the no-drop class: `pause buffer-size B pause-threshold P resume-threshold R`
        # (bytes), one setting that a new line replaces. Assumed: the range and that resume <= pause <= size.
        key = "pause buffer-size"
        if negate:
            args.pos = len(args.tokens)
            node.remove(key)
            return None
        size = args.number(1, PAUSE_BUFFER_MAX)
        args.kw("pause-threshold")
        pause = args.number(1, PAUSE_BUFFER_MAX)
        args.kw("resume-threshold")
        tok = args.peek()
        resume = args.number(1, PAUSE_BUFFER_MAX)
        args.end()
        if not resume <= pause <= size:
            raise CliError(
                "% Invalid value, resume-threshold <= pause-threshold <= buffer-size at '^' marker.",
                tok.col if tok else None,
            )
        node.set_leaf(key, f"pause buffer-size {size} pause-threshold {pause} resume-threshold {resume}")
        return None
    if cmd == "pause":
        args.kw("pfc-cos")
        key = "pause pfc-cos"
        if negate:
            if not args.done():
                args.number_list(0, 7)
            args.end()
            node.remove(key)
            return None
        values = args.number_list(0, 7)
        args.end()
        node.set_leaf(key, f"pause pfc-cos {format_list(values)}")
        return None
    args.kw("random-detect")
    args.end()
    if negate:
        node.remove("congestion-control")
    else:
        node.set_leaf("congestion-control", "congestion-control random-detect")
    return None


def _share(cls: Node) -> int:
    """The `bandwidth remaining percent` of a queuing class (0 without one)."""
    line = cls.find("bandwidth")
    return int(line.text.rsplit(" ", 1)[1]) if line is not None else 0


def _pmap_que(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    return _system_class(node, args, negate, "queuing", QUEUE_CLASSES, "pmap-c-que")


def _pmap_c_que(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    cmd = args.first("bandwidth", "priority", "random-detect", "shape")
    if cmd == "bandwidth":
        if negate:
            args.pos = len(args.tokens)
            node.remove("bandwidth")
            return None
        args.kw("remaining")
        args.kw("percent")
        value = args.number(0, 100)
        args.end()
        if node.find("priority") is not None:
            raise CliError(MUTEX.format("priority"))
        # Assumed: the shares of one queuing policy may never add up to more than 100 %.
        policy = next(p for p in root.children if any(c is node for c in p.children))
        others = sum(_share(c) for c in policy.children if c is not node)
        if others + value > 100:
            raise CliError(
                f"ERROR: bandwidth remaining percent of the policy-map would add up to {others + value} (max 100)"
            )
        node.set_leaf("bandwidth", f"bandwidth remaining percent {value}")
        return None
    if cmd == "priority":
        if negate:
            args.pos = len(args.tokens)
            node.remove("priority")
            return None
        args.kw("level")
        level = args.number(1, 7)
        args.end()
        if node.find("bandwidth") is not None:
            raise CliError(MUTEX.format("bandwidth"))
        node.set_leaf("priority", f"priority level {level}")
        return None
    if cmd == "shape":
        if negate:
            args.pos = len(args.tokens)
            node.remove("shape")
            return None
        args.kw("min")
        low = args.number(0, 400000000)
        unit = args.kw("kbps", "mbps", "gbps")
        args.kw("max")
        high = args.number(0, 400000000)
        unit2 = args.kw("kbps", "mbps", "gbps")
        args.end()
        node.set_leaf("shape", f"shape min {low} {unit} max {high} {unit2}")
        return None
    # random-detect minimum-threshold N UNIT maximum-threshold N UNIT drop-probability P weight W [ecn]
    if negate:
        args.pos = len(args.tokens)
        node.remove("random-detect")
        return None
    args.kw("minimum-threshold")
    low = args.number(1, 52428800)
    low_unit = args.kw("bytes", "kbytes", "mbytes")
    args.kw("maximum-threshold")
    high_tok = args.peek()
    high = args.number(1, 52428800)
    high_unit = args.kw("bytes", "kbytes", "mbytes")
    args.kw("drop-probability")
    prob = args.number(0, 100)
    args.kw("weight")
    weight = args.number(0, 15)
    ecn = args.try_kw("ecn")
    args.end()
    scale = {"bytes": 1, "kbytes": 1024, "mbytes": 1024 * 1024}
    if low * scale[low_unit] > high * scale[high_unit]:
        raise CliError(
            "% Invalid value, maximum-threshold is below minimum-threshold at '^' marker.",
            high_tok.col if high_tok else None,
        )
    text = (
        f"random-detect minimum-threshold {low} {low_unit} maximum-threshold {high} {high_unit} "
        f"drop-probability {prob} weight {weight}"
    )
    node.set_leaf("random-detect", f"{text} ecn" if ecn else text)
    return None


def _sys_qos(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.first("service-policy")
    args.kw("type")
    ptype = args.kw("network-qos", "queuing", "qos")
    if ptype == "queuing":
        direction = args.kw("output", "input")
        key = f"service-policy type queuing {direction}"
    elif ptype == "qos":
        args.kw("input")
        key = "service-policy type qos input"
    else:
        key = "service-policy type network-qos"
    if negate:
        if not args.done():
            args.word()
        args.end()
        node.remove(key)
        return None
    tok = args.peek()
    name = args.word()
    args.end()
    if root.find(f"policy-map type {ptype} {name}") is None and name not in SYSTEM_POLICIES[ptype]:
        raise CliError(f"% policy-map {name} does not exist at '^' marker.", tok.col if tok else None)
    if name in SYSTEM_POLICIES[ptype]:
        node.remove(key)  # attaching the system default shows as no line at all
    else:
        node.set_leaf(key, f"{key} {name}")
    return None


def _vrf(root: Node, node: Node, args: Args, negate: bool) -> Node | None:
    args.first("description")
    if negate:
        node.remove("description")
    else:
        node.set_leaf("description", f"description {args.rest()}")
    return None


HANDLERS: dict[str, Handler] = {
    "config": _config,
    "if": _interface,
    "cmap-qos": _cmap_qos,
    "pmap-qos": _pmap_qos,
    "pmap-c-qos": _pmap_c_qos,
    "pmap-nqos": _pmap_nqos,
    "pmap-c-nqos": _pmap_c_nqos,
    "pmap-que": _pmap_que,
    "pmap-c-que": _pmap_c_que,
    "sys-qos": _sys_qos,
    "vrf": _vrf,
}


def mode_kind(node: Node) -> str:
    return node.kind or "config"


def apply_line(stack: list[Node], line: str) -> list[Node]:
    """Apply one config line (not `end`/`exit`/`do`) to the tree; return the new mode stack.

    Tries the deepest mode first, then each parent (fall-through). Raises CliError.
    """
    tokens = tokenize(line)
    if not tokens:
        return stack
    negate = tokens[0].text.lower() == "no"
    start = 1 if negate else 0
    if negate and len(tokens) == 1:
        raise CliError(INCOMPLETE, len(line.rstrip()))
    root = stack[0]
    for level in range(len(stack) - 1, -1, -1):
        node = stack[level]
        args = Args(line, tokens, start)
        try:
            entered = HANDLERS[mode_kind(node)](root, node, args, negate)
        except NoMatch:
            continue
        new_stack = stack[: level + 1]
        if entered is not None:
            new_stack.append(entered)
        return new_stack
    raise CliError(INVALID, tokens[start].col)


def replay(root: Node, text: str) -> None:
    """Load config text (as `show running-config` prints it) into `root`, using indentation for modes."""
    from .config import parse_indented

    stack = [root]
    for depth, line in parse_indented(text):
        stack = stack[: depth + 1]
        try:
            stack = apply_line(stack, line)
        except CliError as exc:
            raise ValueError(f"cannot load config line {line!r}: {exc.message}") from exc
