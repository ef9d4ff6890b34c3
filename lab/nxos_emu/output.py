"""What exec output goes through before it is printed: the `| include/exclude/section/begin/json` filters, DSCP
lists as NX-OS writes them, bootflash file names, and the tables of `show interface brief` and `show checkpoint
summary`."""

from __future__ import annotations

import re

from .words import INCOMPLETE, INVALID, CliError, match_keyword


def expand_values(values: str) -> list[int]:
    out: list[int] = []
    for part in values.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def apply_filters(lines: list[str], filters: list[str]) -> list[str]:
    """Apply `| include RE`, `| exclude RE`, `| section RE`, `| begin RE`, `| no-more`."""
    for spec in filters:
        words = spec.split(None, 1)
        name = match_keyword(words[0], ("include", "exclude", "section", "begin", "no-more", "json"))
        if name in (None, "json"):
            raise CliError(INVALID, None)
        if name == "no-more":
            continue
        if len(words) < 2:
            raise CliError(INCOMPLETE, None)
        pattern = re.compile(words[1].strip().strip('"'))
        if name == "include":
            lines = [ln for ln in lines if pattern.search(ln)]
        elif name == "exclude":
            lines = [ln for ln in lines if not pattern.search(ln)]
        elif name == "begin":
            for index, ln in enumerate(lines):
                if pattern.search(ln):
                    lines = lines[index:]
                    break
            else:
                lines = []
        else:  # section: a top-level line that matches, with all its indented lines
            out, keep = [], False
            for ln in lines:
                if ln and not ln.startswith(" "):
                    keep = bool(pattern.search(ln))
                if keep and ln:
                    out.append(ln)
            lines = out
    return lines


def split_pipes(line: str) -> tuple[str, list[str]]:
    parts = re.split(r"\s+\|\s*", line)
    return parts[0], [p for p in parts[1:]]


def file_name(name: str) -> str:
    name = name.removeprefix("bootflash:").lstrip("/")
    return f"bootflash:{name}"


_RULE = "-" * 80


def interface_brief(ports: list[tuple[str, bool]]) -> list[str]:
    """`show interface brief`'s Ethernet table as NX-OS 9.3 prints it (ntc-templates' raw sample of a Nexus):
    [(port, shut down), ...]. The emulator has no cables, so a port is up unless it is shut down."""
    out = ["", _RULE, "Ethernet      VLAN    Type Mode   Status  Reason                   Speed     Port",
           "Interface                                                                    Ch #", _RULE]  # fmt: skip
    for port, shut in ports:
        status, reason = ("down", "Administratively down") if shut else ("up", "none")
        name = port.replace("Ethernet", "Eth", 1)
        out.append(f"{name:<14}{'1':<8}eth  access {status:<8}{reason:<25}{'100G(D)':>9} --")
    return [*out, ""]


def checkpoint_summary(checkpoints: dict[str, str]) -> list[str]:
    """`show checkpoint summary`: one block per checkpoint ({name: body}), in the order they were made."""
    out = []
    for index, (name, body) in enumerate(checkpoints.items(), start=1):
        out += [f"{index}) {name}:", "Created by admin", "Created at Mon, 00:00:00 01 Jan 2024",
                f"Size is {len(body)} bytes", "Description: None", ""]  # fmt: skip
    return out
