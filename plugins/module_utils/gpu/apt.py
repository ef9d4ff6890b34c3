"""Whether the node's apt sources can install the plan, from `apt-cache policy` (LANG=C): asked before any change,
so a missing repository or a pin the archive does not carry is one clear error instead of a half-installed driver.

Format (apt's cmdline/apt-cache.cc, Policy): `<package>:` then `  Installed: <v>|(none)`, `  Candidate: <v>|(none)`,
`  Version table:` and one line per version (` *** ` marks the installed one, then the pin priority), each followed
by its sources, indented deeper. A package apt does not know prints nothing.
"""

from __future__ import annotations

import fnmatch
import re

VERSION_LINE = re.compile(r"^ (?:\*\*\*| {3}) (\S+) -?\d+$")


def policy(text: str) -> dict[str, dict]:
    """{package: {installed, candidate (None for (none)), versions [in the table's order]}}."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = out.setdefault(line[:-1], {"installed": None, "candidate": None, "versions": []})
        elif current is None:
            continue
        elif line.startswith("  Installed: ") or line.startswith("  Candidate: "):
            key, _, value = line.strip().partition(": ")
            current[key.lower()] = None if value == "(none)" else value
        elif m := VERSION_LINE.match(line):
            current["versions"].append(m.group(1))
    return out


def unavailable(install: list[str], known: dict[str, dict]) -> list[str]:
    """What of `install` (`name` or `name=<version glob>`, as apt takes them) apt cannot install, one line each."""
    out = []
    for item in install:
        name, _, pattern = item.partition("=")
        row = known.get(name)
        if row is None or (not row["candidate"] and not row["versions"]):
            out.append(f"{name}: no installation candidate")
        elif pattern and not any(fnmatch.fnmatchcase(v, pattern) for v in row["versions"]):
            have = ", ".join(row["versions"]) or "none"
            out.append(f"{name}: no version {pattern} (the sources have {have})")
    return out
