"""Parsing shell commands with bashlex: the records the policy works on, and the parse itself.

``parse_script`` wraps bashlex (working around the gaps it has for common agent commands:
quoted here-document delimiters and a leading ``time``) and raises ``ShellParseError`` for
anything it cannot parse — the policy turns that into "ask", never into a pass.
``keel.policy.shell.walk`` flattens the trees into ``SimpleCommand`` records;
``keel.policy.shell.unwrap`` peels wrappers (env, sudo, xargs, bash -c) off them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bashlex

Cwds = frozenset[Path | None]
MAX_SOURCE_CHARS = 20_000


class ShellParseError(Exception):
    """bashlex could not parse the command (or a construct it does not support)."""


@dataclass
class Sub:
    """A command or process substitution: its commands run whenever the word is expanded."""

    kind: str                      # "command" | "process"
    commands: list[SimpleCommand]


@dataclass
class Word:
    value: str                     # after quote removal (bashlex's view)
    raw: str                       # the source text
    params: tuple[str, ...] = ()   # parameter expansions inside: "HOME", "X:-y", "" for $'..'
    subs: tuple[Sub, ...] = ()
    glob: bool = False             # an unquoted * ? or [
    brace: bool = False            # an unquoted {a,b} or {1..3}

    @property
    def literal(self) -> bool:
        """True when the word's value is known before the command runs (no $X, no $(...))."""
        return not self.params and not self.subs


@dataclass
class Redirect:
    op: str                        # ">", ">>", ">|", "&>", ">&", "<", "<>", "<<", "<<-", "<<<", "<&"
    fd: int | None
    target: Word | None            # None when duplicating a descriptor (2>&1)
    heredoc: str | None = None
    heredoc_expands: bool = False  # unquoted delimiter: $(...) in the body runs

    @property
    def writes(self) -> bool:
        return self.target is not None and self.op in (">", ">>", ">|", "&>", ">&", "<>", "&>>")


@dataclass
class SimpleCommand:
    text: str                      # source text of this command
    assignments: list[Word]
    words: list[Word]
    redirects: list[Redirect]
    cwds: Cwds
    upstream: list[SimpleCommand] = field(default_factory=list)
    piped: bool = False            # part of a multi-command pipeline
    background: bool = False
    calls_function: bool = False   # names a function defined earlier on the line (its body is judged)
    inlined: bool = False          # a function body instantiated with a call's arguments


@dataclass(frozen=True)
class Issue:
    decision: str                  # "ask" | "deny"
    reason: str
    text: str


# Commands that can set variables in ways that cannot be followed.
_SETS_VARIABLES = frozenset({"eval", "source", ".", "read", "mapfile", "readarray", "getopts", "let", "printf",
                             "unset", "export", "declare", "typeset", "builtin", "command", "set", "trap"})


class Variables:
    """Variables set by plain assignments earlier on a command line (``d=~/.ssh; cat $d``).

    A value of None means: assigned, but not knowable (conditionally, in a subshell, computed).
    Variables never assigned on the line stay unexpanded: their value is unknown.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.values: dict[str, str | None] = {}

    def copy(self) -> Variables:
        clone = Variables(self.home)
        clone.values = dict(self.values)
        return clone

    def forget(self, names: set[str] | None = None) -> None:
        for name in self.values if names is None else names:
            self.values[name] = None

    def assign(self, word: Word, certain: bool) -> None:
        name, eq, value = word.value.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*\+?", name):
            return
        name = name.rstrip("+")
        if not certain or not word.literal or word.value[len(name)] == "+" or word.glob or word.brace:
            self.values[name] = None
            return
        if value == "~" or value.startswith("~/"):
            value = str(self.home) + value[1:]
        self.values[name] = value

    def track(self, assignments: list[Word], words: list[Word], certain: bool, functions: set[str]) -> None:
        """Follow what a simple command does to variables."""
        if not words:
            for word in assignments:
                self.assign(word, certain)
            return
        name = words[0].value if words[0].literal else ""
        if name in ("export", "declare", "typeset", "readonly", "local"):
            for word in words[1:]:
                self.assign(word, certain)
        elif name in _SETS_VARIABLES or name in functions or not name:
            self.forget()

    def substitute(self, value: str, params: list[str]) -> tuple[str, list[str]]:
        """Put known values into ``value``; return it with the expansions still unknown."""
        left: list[str] = []
        for param in params:
            m = re.fullmatch(r"\{?([A-Za-z_]\w*)\}?", param)
            known = self.values.get(m.group(1)) if m else None
            if m is None or known is None:
                left.append(param)
                continue
            pattern = r"\$\{" + m.group(1) + r"\}|\$" + m.group(1) + r"(?!\w)"
            value = re.sub(pattern, lambda _match, text=known: text, value)  # type: ignore[misc]
        return value, left


_HEREDOC_QUOTED = re.compile(r"<<(-?)([ \t]*)(?:'(\w+)'|\"(\w+)\"|\\(\w+))(?=[\s;&|<>)]|$)")


def _unquoted_positions(source: str) -> list[bool]:
    """For each character: is it outside quotes and comments (as far as a small lexer sees)?"""
    flags = [False] * len(source)
    quote: str | None = None
    i = 0
    while i < len(source):
        ch = source[i]
        if quote is None:
            flags[i] = True
            if ch == "\\":
                i += 2
                continue
            if ch in "'\"":
                quote = ch
        elif quote == "'":
            if ch == "'":
                quote = None
        elif ch == "\\":
            i += 2
            continue
        elif ch == '"':
            quote = None
        i += 1
    return flags


def _prepare(source: str) -> tuple[str, set[int]]:
    """Work around bashlex gaps without changing lengths: quoted heredoc delimiters.

    bashlex cannot parse ``<<'EOF'``; the delimiter quotes are replaced by spaces (same
    length, so positions stay right) and the position of its ``<<`` remembered as non-expanding.
    Only ``<<`` the small lexer sees as unquoted is touched.
    """
    unquoted = _unquoted_positions(source)
    quoted: set[int] = set()
    out = list(source)
    for m in _HEREDOC_QUOTED.finditer(source):
        if not unquoted[m.start()]:
            continue
        quoted.add(m.start())
        for i in range(m.end(2), m.end()):
            if source[i] in "'\"\\":
                out[i] = " "
    return "".join(out), quoted


_LEADING_TIME = re.compile(r"^(\s*)time((\s+-p)?\s+)(?=\S)")


def parse_script(source: str) -> tuple[list[Any], set[int]]:
    """Return (bashlex trees indexing into ``source``, positions of quoted-delimiter ``<<``)."""
    if len(source) > MAX_SOURCE_CHARS:
        raise ShellParseError(f"command is longer than {MAX_SOURCE_CHARS} characters")
    if not source.strip():
        raise ShellParseError("empty command")
    if "\x00" in source:
        raise ShellParseError("command contains a NUL byte")
    text, quoted = _prepare(source)
    # bashlex lacks the `time` keyword; at the very start it only times the pipeline after it.
    text = _LEADING_TIME.sub(lambda m: " " * len(m.group(0)), text, count=1)
    try:
        return list(bashlex.parse(text)), quoted
    except RecursionError as exc:
        raise ShellParseError("command nests too deeply") from exc
    except NotImplementedError as exc:
        raise ShellParseError(f"unsupported shell construct ({exc})") from exc
    except Exception as exc:  # bashlex raises assorted errors on input it cannot handle
        raise ShellParseError(f"cannot parse ({exc})") from exc


def scan_unquoted(raw: str) -> tuple[bool, bool, bool]:
    """(glob, brace expansion, substitution syntax outside single quotes) in a word's source."""
    unquoted = _unquoted_positions(raw)
    glob = brace = subst = False
    in_single = False
    for i, ch in enumerate(raw):
        if ch == "'" and (unquoted[i] or in_single):
            in_single = not in_single
        if unquoted[i] and ch in "*?[":
            glob = True
        if unquoted[i] and ch == "{" and re.match(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}", raw[i:]):
            brace = True
        if not in_single and (raw.startswith("$(", i) or ch == "`" or raw.startswith("<(", i)
                              or raw.startswith(">(", i)):
            subst = True
    return glob, brace, subst


def _quoted_end(text: str, i: int) -> int | None:
    """Index just past the double-quoted string opening at ``i`` (substitutions inside skipped)."""
    i += 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        elif ch == "`" or text.startswith("$(", i):
            end = substitution_end(text, i)
            if end is None:
                return None
            i = end
        else:
            i += 1
    return None


def substitution_end(text: str, start: int) -> int | None:
    """Index just past the ``$(...)``, ``<(...)``, ``>(...)`` or backtick substitution at ``start``.

    Quotes, escapes, comments and nested substitutions are respected; None when no end is found.
    """
    if text[start] == "`":
        i = start + 1
        while i < len(text):
            if text[i] == "\\":
                i += 2
            elif text[i] == "`":
                return i + 1
            else:
                i += 1
        return None
    depth, i, word_start = 1, start + 2, True
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i, word_start = i + 2, False
            continue
        if ch == "'" or (ch == "$" and text.startswith("$'", i)):
            j = i + (2 if ch == "$" else 1)
            while j < len(text) and text[j] != "'":
                j += 2 if (ch == "$" and text[j] == "\\") else 1
            if j >= len(text):
                return None
            i, word_start = j + 1, False
            continue
        if ch == '"' or ch == "`":
            end = _quoted_end(text, i) if ch == '"' else substitution_end(text, i)
            if end is None:
                return None
            i, word_start = end, False
            continue
        if ch == "#" and word_start:
            newline = text.find("\n", i)
            if newline < 0:
                return None
            i = newline
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        word_start = ch in " \t\n;|&()<>"
        i += 1
    return None
