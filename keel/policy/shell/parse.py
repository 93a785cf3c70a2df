"""Parsing shell commands with tree-sitter-bash: the records the policy works on, and the parse.

``parse_tree`` returns the syntax tree and raises ``ShellParseError`` for anything the grammar
marks as an error or a missing token — the policy turns that into "ask", never into a pass.
``keel.policy.shell.walk`` flattens the tree into ``SimpleCommand`` records;
``keel.policy.shell.unwrap`` peels wrappers (env, sudo, xargs, bash -c) off them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Cwds = frozenset[Path | None]
MAX_SOURCE_CHARS = 20_000
MAX_VALUE = 4096           # a longer variable value is not followed: `a=$a$a` doubles it each time


class ShellParseError(Exception):
    """The command could not be parsed (or uses a construct the walker does not support)."""


@dataclass
class Sub:
    """A command or process substitution: its commands run whenever the word is expanded."""

    kind: str                      # "command" | "process"
    commands: list[SimpleCommand]


@dataclass
class Word:
    value: str                     # after quote removal; expansions kept as written
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
    waited: bool = False           # a background job a later `wait` on the line waits for
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
        self.values[name] = value if len(value) <= MAX_VALUE else None

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

    def substitute(self, value: str, params: list[str], split: set[str] | None = None) -> tuple[str, list[str]]:
        """Put known values into ``value``; return it with the expansions still unknown. ``split``:
        expansions written unquoted — a value bash would split into words or glob stays unknown."""
        left: list[str] = []
        for param in params:
            m = re.fullmatch(r"\{?([A-Za-z_]\w*)\}?", param)
            known = self.values.get(m.group(1)) if m else None
            if m is None or known is None or (param in (split or ()) and re.search(r"[\s*?\[]", known)):
                left.append(param)
                continue
            pattern = r"\$\{" + m.group(1) + r"\}|\$" + m.group(1) + r"(?!\w)"
            value = re.sub(pattern, lambda _match, text=known: text, value)  # type: ignore[misc]
        return value, left


@functools.cache
def _parser() -> Any:
    """The tree-sitter parser, built on first use (importing this module has no side effects)."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _first_error(node: Any) -> Any:
    if node.is_error or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


def parse_tree(source: str) -> tuple[Any, bytes]:
    """Return (the tree-sitter root node, the UTF-8 bytes its positions index into)."""
    if len(source) > MAX_SOURCE_CHARS:
        raise ShellParseError(f"command is longer than {MAX_SOURCE_CHARS} characters")
    if not source.strip():
        raise ShellParseError("empty command")
    if "\x00" in source:
        raise ShellParseError("command contains a NUL byte")
    data = source.encode("utf-8", "surrogateescape")
    root = _parser().parse(data).root_node
    if root.has_error:
        bad = _first_error(root)
        near = data[bad.start_byte:bad.end_byte].decode("utf-8", "replace")[:40] if bad is not None else ""
        what = "a missing token" if bad is not None and bad.is_missing else "a syntax error"
        raise ShellParseError(f"cannot parse: {what} near {near!r}" if near else f"cannot parse: {what}")
    return root, data


def _unquoted_positions(source: str) -> list[bool]:
    """For each character: is it outside quotes (as far as a small lexer sees)?"""
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


def scan_unquoted(raw: str) -> tuple[bool, bool, bool]:
    """(glob, brace expansion, substitution syntax outside single quotes) in a word's source.
    A ``$`` or backtick escaped by a backslash (``"\\$(x)"``) is text, not a substitution."""
    unquoted = _unquoted_positions(raw)
    glob = brace = subst = False
    in_single = False
    escaped = False
    for i, ch in enumerate(raw):
        if escaped:
            escaped = False
            continue
        if ch == "'" and (unquoted[i] or in_single):
            in_single = not in_single
        if (ch == "\\" or raw.startswith("$$", i)) and not in_single:
            escaped = True                  # the next character is text: \$(x), $$ (the PID) then (x)
            continue
        if unquoted[i] and ch in "*?[":
            glob = True
        if unquoted[i] and ch == "{" and re.match(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}", raw[i:]):
            brace = True
        if not in_single and (raw.startswith("$(", i) or ch == "`" or raw.startswith("<(", i)
                              or raw.startswith(">(", i)):
            subst = True
    return glob, brace, subst
