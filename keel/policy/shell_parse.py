"""Parsing shell commands with bashlex: the records the policy works on, and the parse itself.

``parse_script`` wraps bashlex (working around the gaps it has for common agent commands:
quoted here-document delimiters and a leading ``time``) and raises ``ShellParseError`` for
anything it cannot parse — the policy turns that into "ask", never into a pass.
``keel.policy.shell_walk`` flattens the trees into ``SimpleCommand`` records;
``keel.policy.shell_unwrap`` peels wrappers (env, sudo, xargs, bash -c) off them.
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


@dataclass(frozen=True)
class Issue:
    decision: str                  # "ask" | "deny"
    reason: str
    text: str


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


def _prepare(source: str) -> tuple[str, set[str]]:
    """Work around bashlex gaps without changing lengths: quoted heredoc delimiters.

    bashlex cannot parse ``<<'EOF'``; the delimiter quotes are replaced by spaces (same
    length, so positions stay right) and the delimiter remembered as non-expanding.
    Only ``<<`` the small lexer sees as unquoted is touched.
    """
    unquoted = _unquoted_positions(source)
    quoted: set[str] = set()
    out = list(source)
    for m in _HEREDOC_QUOTED.finditer(source):
        if not unquoted[m.start()]:
            continue
        name = m.group(3) or m.group(4) or m.group(5)
        quoted.add(name)
        for i in range(m.end(2), m.end()):
            if source[i] in "'\"\\":
                out[i] = " "
    return "".join(out), quoted


_LEADING_TIME = re.compile(r"^(\s*)time((\s+-p)?\s+)(?=\S)")


def parse_script(source: str) -> tuple[list[Any], set[str]]:
    """Return (bashlex trees indexing into ``source``, quoted heredoc delimiters)."""
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
