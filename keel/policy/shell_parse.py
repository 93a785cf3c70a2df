"""Parse a shell command with bashlex into the simple commands that would run.

The walker flattens lists, pipelines, subshells, brace groups, if/for/while bodies, function
bodies and command/process substitutions into ``SimpleCommand`` records. Each record carries:

- the set of working directories it may run in (``cd`` is tracked through ``&&``, ``||``,
  ``;``, ``&`` and subshells; a directory that cannot be known is ``None``),
- the commands whose output reaches its stdin through a pipe,
- its words with what the shell will do to them (expansions, globs, brace expansion).

Anything the walker does not understand becomes an ``Issue`` (at least "ask"): the policy
built on top of it must never pass a command because a construct was skipped.
"""

from __future__ import annotations

import os
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


_CD_NAMES = ("cd", "pushd")
# Commands that can set variables the walker cannot follow.
_SETS_VARIABLES = frozenset({"eval", "source", ".", "read", "mapfile", "readarray", "getopts", "let", "printf",
                             "unset", "export", "declare", "typeset", "builtin", "command", "set", "trap"})


class Walker:
    """Flattens bashlex trees into SimpleCommands, tracking possible working directories."""

    def __init__(self, text: str, home: Path, quoted_heredocs: set[str]) -> None:
        self.text = text
        self.home = home
        self.quoted_heredocs = quoted_heredocs
        self.commands: list[SimpleCommand] = []
        self.issues: list[Issue] = []
        self.functions: dict[str, list[SimpleCommand]] = {}
        # Variables set by plain assignments earlier on this command line (``d=~/.ssh; cat $d``).
        # None: assigned, but the value cannot be known (conditional, subshell, computed).
        self.vars: dict[str, str | None] = {}
        self.uncertain = 0          # > 0 while walking code that may not run or runs in a subshell

    def _maybe(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk code whose variable assignments may not happen or may not persist."""
        self.uncertain += 1
        try:
            return self.walk(node, cwds)
        finally:
            self.uncertain -= 1

    def forget_variables(self) -> None:
        self.vars = {name: None for name in self.vars}

    def assign(self, word: Word) -> None:
        name, eq, value = word.value.partition("=")
        name = name.rstrip("+")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
            return
        if self.uncertain or not word.literal or word.value[len(name)] == "+" or word.glob or word.brace:
            self.vars[name] = None
            return
        if value == "~" or value.startswith("~/"):
            value = str(self.home) + value[1:]
        self.vars[name] = value

    def src(self, node: Any) -> str:
        start, end = node.pos
        return self.text[start:end].strip()

    def issue(self, decision: str, reason: str, node: Any) -> None:
        self.issues.append(Issue(decision, reason, self.src(node) if node is not None else self.text))

    # -- structure ---------------------------------------------------------------------------

    def walk(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk ``node`` starting in ``cwds``; return the directories after success / failure."""
        kind = node.kind
        if kind == "list":
            return self._list(node.parts, cwds)
        if kind == "pipeline":
            return self._pipeline(node, cwds)
        if kind == "command":
            return self._command(node, cwds)
        if kind == "compound":
            return self._compound(node, cwds)
        if kind in ("if", "while", "until", "for"):
            return self._control(node, cwds)
        if kind == "function":
            return self._function(node, cwds)
        self.issue("ask", f"unsupported shell construct ({kind})", node)
        return cwds | {None}, cwds | {None}

    def _list(self, parts: list[Any], cwds: Cwds) -> tuple[Cwds, Cwds]:
        ok, fail = cwds, cwds
        group_in = cwds         # input of the current and-or group (what `&` falls back to)
        pending = ";"
        started = len(self.commands)
        before = dict(self.vars)
        for part in parts:
            if part.kind == "operator":
                if part.op == "&":
                    for cmd in self.commands[started:]:
                        cmd.background = True
                    ok = fail = group_in
                    # a background job's assignments never reach this shell
                    for name in set(self.vars) - set(before) | {n for n in before if self.vars.get(n) != before[n]}:
                        self.vars[name] = None
                pending = part.op
                if part.op in (";", "&", "\n"):
                    started = len(self.commands)
                continue
            if pending in (";", "&", "\n"):
                group_in = ok | fail
                before = dict(self.vars)
                ok, fail = self.walk(part, group_in)
            elif pending == "&&":
                part_ok, part_fail = self._maybe(part, ok)
                ok, fail = part_ok, fail | part_fail
            elif pending == "||":
                part_ok, part_fail = self._maybe(part, fail)
                ok, fail = ok | part_ok, part_fail
            else:
                self.issue("ask", f"unsupported list operator {pending!r}", part)
                ok, fail = self.walk(part, ok | fail)
        return ok, fail

    def _pipeline(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        upstream: list[SimpleCommand] = []
        elements = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
        for element in elements:
            start = len(self.commands)
            # each element runs in a subshell: cd and assignments do not leak
            if len(elements) > 1:
                self._maybe(element, cwds)
            else:
                self.walk(element, cwds)
            produced = self.commands[start:]
            for cmd in produced:
                cmd.upstream = list(upstream)
                cmd.piped = len(elements) > 1
            upstream.extend(produced)
        return cwds, cwds

    def _compound(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        subshell = bool(node.list) and node.list[0].kind == "reservedword" and node.list[0].word == "("
        ok, fail = cwds, cwds
        current = cwds
        for part in node.list:
            if part.kind != "reservedword":
                ok, fail = self._maybe(part, current) if subshell else self.walk(part, current)
                current = ok | fail
        for redirect in getattr(node, "redirects", []) or []:
            self._redirect_only(redirect, cwds)
        return (cwds, cwds) if subshell else (ok, fail)

    def _control(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        seen: set[Path | None] = set(cwds)
        parts = node.parts
        loop = node.kind in ("while", "until", "for")
        if node.kind == "for":
            self._check_assigned_name(parts[1].word if len(parts) > 1 else "", node)
            if len(parts) > 1:
                self.vars[parts[1].word] = None
        current = cwds
        for part in parts:
            if part.kind == "reservedword":
                continue
            if part.kind == "word":
                if part is not parts[1] or node.kind != "for":
                    self.word(part, current)
                continue
            ok, fail = self._maybe(part, current)
            seen |= ok | fail
            current = frozenset(seen)
        after = frozenset(seen)
        if loop and after != cwds:
            after = after | {None}      # a loop body that moves may move again on each pass
        for redirect in getattr(node, "redirects", []) or []:
            self._redirect_only(redirect, cwds)
        return after, after

    def _function(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        names = [p.word for p in node.parts if p.kind == "word"]
        name = names[0] if names else ""
        start = len(self.commands)
        body = [p for p in node.parts if p.kind not in ("word", "reservedword")]
        moved: set[Path | None] = set(cwds)
        for part in body:
            ok, fail = self._maybe(part, cwds)
            moved |= ok | fail
        calls = [c for c in self.commands[start:] if c.words and c.words[0].value == name]
        if any(c.piped or c.background for c in calls):
            self.issue("deny", f"fork bomb: function {name!r} starts copies of itself", node)
        elif calls:
            self.issue("ask", f"function {name!r} calls itself", node)
        self.functions[name] = self.commands[start:]
        after = frozenset(moved) | ({None} if frozenset(moved) != cwds else frozenset())
        return after, after

    # -- simple commands -------------------------------------------------------------------

    def _command(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        assignments: list[Word] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        for part in node.parts:
            if part.kind == "assignment":
                (words if words else assignments).append(self.word(part, cwds))
            elif part.kind == "word":
                words.append(self.word(part, cwds))
            elif part.kind == "redirect":
                redirects.append(self.redirect(part, cwds))
            else:
                self.issue("ask", f"unsupported part of a command ({part.kind})", part)
        cmd = SimpleCommand(self.src(node), assignments, words, redirects, cwds)
        self.commands.append(cmd)
        self._track_variables(assignments, words)
        return self._after_cd(words, cwds), cwds

    def _track_variables(self, assignments: list[Word], words: list[Word]) -> None:
        if not words:
            for word in assignments:
                self.assign(word)
            return
        name = words[0].value if words[0].literal else ""
        if name in ("export", "declare", "typeset", "readonly", "local"):
            for word in words[1:]:
                self.assign(word)
        elif name in _SETS_VARIABLES or name in self.functions or not name:
            self.forget_variables()

    def _after_cd(self, words: list[Word], cwds: Cwds) -> Cwds:
        values = [w.value for w in words]
        if values[:1] in (["builtin"], ["command"]):
            values, words = values[1:], words[1:]
        if not values:
            return cwds
        if values[0] == "popd":
            return frozenset({None})
        if values[0] not in _CD_NAMES:
            return cwds
        operands = [w for w in words[1:] if not (w.value.startswith("-") and w.value != "-")]
        if not operands:
            return frozenset({self.home})
        target = operands[0]
        if not target.literal or target.value == "-" or target.glob or target.brace:
            return frozenset({None})
        value = os.path.expanduser(target.value) if target.value.startswith("~") else target.value
        result: set[Path | None] = set()
        for cwd in cwds:
            if os.path.isabs(value):
                result.add(Path(os.path.realpath(value)))
            elif cwd is None:
                result.add(None)
            else:
                result.add(Path(os.path.realpath(cwd / value)))
        return frozenset(result)

    def _check_assigned_name(self, name: str, node: Any) -> None:
        # Imported lazily: the env-variable table lives with the unwrapping rules.
        from keel.policy.shell_unwrap import env_name_risk

        risk = env_name_risk(name)
        if risk is not None:
            self.issue(risk[0], risk[1], node)

    def word(self, node: Any, cwds: Cwds) -> Word:
        raw = self.text[node.pos[0]:node.pos[1]]
        value = node.word
        params: list[str] = []
        subs: list[Sub] = []
        self._scan_parts(node, cwds, params, subs)
        value, params = self._substitute(value, params)
        glob, brace, subst_syntax = scan_unquoted(raw)
        if subst_syntax and not subs:
            self.issue("ask", "a substitution the parser could not follow", node)
            params.append("$(?)")
        for param in params:
            if "$(" in param or "`" in param or "@P" in param:
                self.issue("ask", "a command hidden inside a parameter expansion", node)
        return Word(value, raw, tuple(params), tuple(subs), glob, brace)

    def _substitute(self, value: str, params: list[str]) -> tuple[str, list[str]]:
        """Put in the values of variables assigned earlier on this command line."""
        left: list[str] = []
        for param in params:
            m = re.fullmatch(r"\{?([A-Za-z_]\w*)\}?", param)
            known = self.vars.get(m.group(1)) if m else None
            if m is None or known is None:
                left.append(param)
                continue
            name = m.group(1)
            value = re.sub(r"\$\{" + name + r"\}|\$" + name + r"(?!\w)", lambda _m, v=known: v, value)
        return value, left

    def _scan_parts(self, node: Any, cwds: Cwds, params: list[str], subs: list[Sub]) -> None:
        for part in getattr(node, "parts", []) or []:
            if part.kind == "parameter":
                params.append(getattr(part, "value", "") or "")
            elif part.kind in ("commandsubstitution", "processsubstitution"):
                start = len(self.commands)
                self._maybe(part.command, cwds)
                kind = "command" if part.kind == "commandsubstitution" else "process"
                subs.append(Sub(kind, self.commands[start:]))
            elif part.kind == "tilde":
                continue
            else:
                self._scan_parts(part, cwds, params, subs)

    def redirect(self, node: Any, cwds: Cwds) -> Redirect:
        op = node.type
        fd = node.input if isinstance(getattr(node, "input", None), int) else None
        output = node.output
        target = self.word(output, cwds) if hasattr(output, "kind") and output.kind == "word" else None
        heredoc = getattr(node, "heredoc", None)
        body = heredoc.value if heredoc is not None else None
        expands = False
        if body is not None and target is not None:
            expands = target.value not in self.quoted_heredocs
            if expands and ("$(" in body or "`" in body):
                self.issue("ask", "a here-document whose body runs command substitutions", node)
        return Redirect(op, fd, target, body, expands)

    def _redirect_only(self, node: Any, cwds: Cwds) -> None:
        """Redirects on a compound command: judged like those of a command with no words."""
        self.commands.append(SimpleCommand(self.src(node), [], [], [self.redirect(node, cwds)], cwds))


def walk_script(source: str, home: Path, cwds: Cwds) -> tuple[list[SimpleCommand], list[Issue]]:
    """Parse and flatten ``source``; raise ShellParseError when it cannot be parsed."""
    trees, quoted = parse_script(source)
    walker = Walker(source, home, quoted)
    current = cwds
    try:
        for tree in trees:
            ok, fail = walker.walk(tree, current)
            current = ok | fail
    except RecursionError as exc:
        raise ShellParseError("command nests too deeply") from exc
    return walker.commands, walker.issues
