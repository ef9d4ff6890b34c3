"""The words of a CLI line: tokens, keyword matching, the argument cursor every command's grammar reads, and the
errors NX-OS prints for a line it rejects (a `CliError` with its message and the column of the `^` marker).
The config-mode grammar (grammar.py) and the exec commands (device.py) both read lines through it."""

from __future__ import annotations

import re
from dataclasses import dataclass

INVALID = "% Invalid command at '^' marker."
INCOMPLETE = "% Incomplete command at '^' marker."


class CliError(Exception):
    """A rejected line: `message` as NX-OS prints it; `column` places the `^` marker (None: no marker)."""

    def __init__(self, message: str, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.column = column


class NoMatch(Exception):
    """The first keyword is not a command of this mode: try the parent mode."""


@dataclass
class Token:
    text: str
    col: int


def tokenize(line: str) -> list[Token]:
    return [Token(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]


def match_keyword(word: str, options: tuple[str, ...]) -> str | None:
    """Full keyword for `word`: an exact match or a unique prefix (NX-OS accepts `conf t`)."""
    low = word.lower()
    if low in options:
        return low
    hits = [opt for opt in options if opt.startswith(low)]
    return hits[0] if len(hits) == 1 else None


class Args:
    """A cursor over the tokens of one line."""

    def __init__(self, line: str, tokens: list[Token], pos: int = 0):
        self.line = line
        self.tokens = tokens
        self.pos = pos

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def done(self) -> bool:
        return self.pos >= len(self.tokens)

    def _next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise CliError(INCOMPLETE, len(self.line.rstrip()))
        self.pos += 1
        return tok

    def first(self, *options: str) -> str:
        """The command keyword: NoMatch (fall through) when this mode does not know it."""
        tok = self.peek()
        word = match_keyword(tok.text, options) if tok else None
        if word is None:
            raise NoMatch
        self.pos += 1
        return word

    def kw(self, *options: str) -> str:
        tok = self._next()
        word = match_keyword(tok.text, options)
        if word is None:
            raise CliError(INVALID, tok.col)
        return word

    def try_kw(self, *options: str) -> str | None:
        tok = self.peek()
        if tok is None:
            return None
        word = match_keyword(tok.text, options)
        if word is not None:
            self.pos += 1
        return word

    def word(self) -> str:
        return self._next().text

    def number(self, low: int, high: int) -> int:
        tok = self._next()
        if not tok.text.isdigit():
            raise CliError(INVALID, tok.col)
        value = int(tok.text)
        if not low <= value <= high:
            raise CliError(f"% Invalid number, range is ({low}:{high}) at '^' marker.", tok.col)
        return value

    def number_list(self, low: int, high: int) -> list[int]:
        """`24,26` or `24-26` or `3`: sorted, without duplicates."""
        tok = self._next()
        values: set[int] = set()
        for part in tok.text.split(","):
            bounds = part.split("-")
            if not part or len(bounds) > 2 or not all(b.isdigit() for b in bounds):
                raise CliError(INVALID, tok.col)
            start, stop = int(bounds[0]), int(bounds[-1])
            for value in (start, stop):
                if not low <= value <= high:
                    raise CliError(f"% Invalid number, range is ({low}:{high}) at '^' marker.", tok.col)
            if start > stop:
                raise CliError(INVALID, tok.col)
            values.update(range(start, stop + 1))
        return sorted(values)

    def rest(self) -> str:
        tok = self._next()
        self.pos = len(self.tokens)
        return self.line[tok.col :].strip()

    def end(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise CliError(INVALID, tok.col)


def format_list(values: list[int]) -> str:
    """Value lists print comma-separated in ascending order: `24,26`."""
    return ",".join(str(v) for v in values)


# -- interface names --------------------------------------------------------------------------------
_IF_PREFIXES = (
    ("ethernet", "Ethernet"),
    ("port-channel", "port-channel"),
    ("loopback", "loopback"),
    ("mgmt", "mgmt"),
)


def parse_interface(args: Args) -> tuple[str, Token]:
    """`Ethernet1/1`, `ethernet 1/1`, `eth1/1`, `e1/1/2`, `port-channel10`, `mgmt0` -> canonical name."""
    tok = args._next()
    text = tok.text
    match = re.fullmatch(r"([A-Za-z-]+)(\S*)", text)
    if not match:
        raise CliError("% Invalid interface format at '^' marker.", tok.col)
    word, number = match.group(1).lower(), match.group(2)
    if not number and not args.done():
        number = args._next().text
    for prefix, canonical in _IF_PREFIXES:
        if prefix.startswith(word):
            if canonical == "Ethernet" and re.fullmatch(r"\d+/\d+(/\d+)?", number):
                return f"Ethernet{number}", tok
            if canonical != "Ethernet" and re.fullmatch(r"\d+", number):
                return f"{canonical}{number}", tok
            break
    raise CliError("% Invalid interface format at '^' marker.", tok.col)
