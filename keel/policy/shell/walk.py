"""Flatten bashlex trees into the simple commands that would run.

The walker flattens lists, pipelines, subshells, brace groups, if/for/while bodies, function
bodies and command/process substitutions into ``SimpleCommand`` records. Each record carries:

- the set of working directories it may run in (``cd`` is tracked through ``&&``, ``||``,
  ``;``, ``&`` and subshells; a directory that cannot be known is ``None``),
- the commands whose output reaches its stdin through a pipe,
- its words with what the shell will do to them (expansions, globs, brace expansion), with
  variables assigned earlier on the same line filled in when their value is certain.

Anything the walker does not understand becomes an ``Issue`` (at least "ask"): the policy
built on top of it must never pass a command because a construct was skipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from keel.policy.shell.parse import (
    Cwds,
    Issue,
    Redirect,
    ShellParseError,
    SimpleCommand,
    Sub,
    Variables,
    Word,
    parse_script,
    scan_unquoted,
    substitution_end,
)
from keel.policy.shell.unwrap import env_name_risk

MAX_NESTING = 12
MAX_COMMANDS = 1000
_CD_NAMES = ("cd", "pushd")


class Walker:
    """Flattens bashlex trees into SimpleCommands, tracking possible working directories."""

    def __init__(self, text: str, home: Path, quoted_heredocs: set[int]) -> None:
        self.text = text
        self.home = home
        self.quoted_heredocs = quoted_heredocs
        self.commands: list[SimpleCommand] = []
        self.issues: list[Issue] = []
        self.functions: dict[str, list[SimpleCommand]] = {}
        self.vars = Variables(home)
        self.uncertain = 0          # > 0 while walking code that may not run or runs in a subshell
        self.depth = 0              # substitutions nested around this text

    def _maybe(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk code whose variable assignments may not happen or may not persist."""
        self.uncertain += 1
        try:
            return self.walk(node, cwds)
        finally:
            self.uncertain -= 1

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
        before = dict(self.vars.values)
        for part in parts:
            if part.kind == "operator":
                if part.op == "&":
                    for cmd in self.commands[started:]:
                        cmd.background = True
                    ok = fail = group_in
                    # a background job's assignments never reach this shell
                    self.vars.forget({n for n, v in self.vars.values.items() if before.get(n, "\0") != v})
                pending = part.op
                if part.op in (";", "&", "\n"):
                    started = len(self.commands)
                continue
            if pending in (";", "&", "\n"):
                group_in = ok | fail
                before = dict(self.vars.values)
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
                self.vars.forget({parts[1].word})
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
        self.functions[name] = [c for c in self.commands[start:] if not c.inlined]
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
        if len(self.commands) > MAX_COMMANDS:
            raise ShellParseError(f"more than {MAX_COMMANDS} commands")
        if words and words[0].literal and words[0].value in self.functions:
            cmd.calls_function = True
            if len(words) > 1:
                self._inline_call(cmd)
        self.vars.track(assignments, words, certain=not self.uncertain, functions=set(self.functions))
        return self._after_cd(words, cwds), cwds

    def _inline_call(self, call: SimpleCommand) -> None:
        """``f() { command rm "$@"; }; f -rf /``: judge the body with the call's arguments in it."""
        args = call.words[1:]
        for body in self.functions[call.words[0].value]:
            words: list[Word] = []
            for word in body.words:
                m = re.fullmatch(r"\$\{?([@*]|\d)\}?", word.value)
                if m is None:
                    words.append(word)
                elif m.group(1) in "@*":
                    words.extend(args)
                elif 0 < int(m.group(1)) <= len(args):
                    words.append(args[int(m.group(1)) - 1])
            self.commands.append(SimpleCommand(f"{call.text} → {body.text}", body.assignments, words,
                                               body.redirects, call.cwds, inlined=True))

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
        risk = env_name_risk(name)
        if risk is not None:
            self.issue(risk[0], risk[1], node)

    def word(self, node: Any, cwds: Cwds) -> Word:
        raw = self.text[node.pos[0]:node.pos[1]]
        value = node.word
        params: list[str] = []
        subs: list[Sub] = []
        self._scan_parts(node, cwds, params, subs)
        value, params = self.vars.substitute(value, params)
        glob, brace, subst_syntax = scan_unquoted(raw)
        if subst_syntax and not subs:
            self.issue("ask", "a substitution the parser could not follow", node)
            params.append("$(?)")
        for param in params:
            if "$(" in param or "`" in param or "@P" in param:
                self.issue("ask", "a command hidden inside a parameter expansion", node)
        return Word(value, raw, tuple(params), tuple(subs), glob, brace)

    def _scan_parts(self, node: Any, cwds: Cwds, params: list[str], subs: list[Sub]) -> None:
        for part in getattr(node, "parts", []) or []:
            if part.kind == "parameter":
                params.append(getattr(part, "value", "") or "")
            elif part.kind in ("commandsubstitution", "processsubstitution"):
                kind = "command" if part.kind == "commandsubstitution" else "process"
                subs.append(Sub(kind, self._substitution(part, cwds)))
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
            expands = self.text.find("<<", node.pos[0]) not in self.quoted_heredocs
            if expands and ("$(" in body or "`" in body):
                self.issue("ask", "a here-document whose body runs command substitutions", node)
                self._heredoc_substitutions(body, cwds)
        return Redirect(op, fd, target, body, expands)

    def _substitution(self, node: Any, cwds: Cwds) -> list[SimpleCommand]:
        """The commands inside ``$(...)``, backticks or ``<(...)``.

        bashlex's own parse of a substitution stops at the first newline (``$(ls\nrm -rf /)``
        would lose the ``rm``), so the inner text is cut out here and parsed again in full.
        """
        start = node.pos[0]
        end = substitution_end(self.text, start)
        if end is None:
            self.issues.append(Issue("ask", "a substitution whose end cannot be found", self.text[start:]))
            return []
        if self.text[start] == "`":
            inner = re.sub(r"\\([\\`$])", r"\1", self.text[start + 1:end - 1])
        else:
            inner = self.text[start + 2:end - 1]
        if not inner.strip():
            return []
        return self._walk_text(inner, cwds, "substitution")

    def _heredoc_substitutions(self, body: str, cwds: Cwds) -> None:
        """The $(...) in an unquoted here-document run: judge them as a double-quoted string."""
        self._walk_text('echo "' + body.replace('"', "'") + '"', cwds, "here-document body")

    def _walk_text(self, text: str, cwds: Cwds, what: str) -> list[SimpleCommand]:
        """Walk code cut out of this text (a subshell: its assignments and cd do not persist)."""
        try:
            trees, quoted = parse_script(text)
        except ShellParseError as exc:
            self.issues.append(Issue("ask", f"{what} cannot be checked ({exc})", text))
            return []
        inner = Walker(text, self.home, quoted)
        inner.vars, inner.uncertain, inner.depth = self.vars.copy(), 1, self.depth + 1
        if inner.depth > MAX_NESTING:
            self.issues.append(Issue("ask", f"{what} nests too deeply", text))
            return []
        for tree in trees:
            inner.walk(tree, cwds)
        self.commands.extend(inner.commands)
        self.issues.extend(inner.issues)
        return inner.commands

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
