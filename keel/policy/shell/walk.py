"""Flatten a tree-sitter-bash tree into the simple commands that would run.

The walker flattens lists, pipelines, subshells, brace groups, ``if``/``case``/loops,
``[[ ]]``, ``(( ))``, function bodies and command/process substitutions into
``SimpleCommand`` records. Each record carries:

- the set of working directories it may run in (``cd`` is tracked through ``&&``, ``||``,
  ``;``, ``&`` and subshells; a directory that cannot be known is ``None``),
- the commands whose output reaches its stdin through a pipe,
- its words with what the shell will do to them (expansions, globs, brace expansion), with
  variables assigned earlier on the same line filled in when their value is certain.

Anything the walker does not understand becomes an ``Issue`` (at least "ask"): the policy
built on top of it must never pass a command because a construct was skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from keel.policy.shell.bashcd import Budget, CdModel, cap
from keel.policy.shell.heredoc import attached, body_disagreements, heredoc_disagreements, last_command
from keel.policy.shell.parse import (
    Cwds,
    Issue,
    Redirect,
    ShellParseError,
    SimpleCommand,
    Variables,
    Word,
    parse_tree,
)
from keel.policy.shell.reader import bash_text
from keel.policy.shell.taint import ArithmeticTaint
from keel.policy.shell.unwrap import env_name_risk
from keel.policy.shell.words import REDIRECTS, WORDLIKE, WordReader

MAX_NESTING = 12
MAX_COMMANDS = 1000
_CD_NAMES = ("cd", "pushd")


class Walker(WordReader, ArithmeticTaint):
    """Walks one parsed text, tracking possible working directories and known variables."""

    def __init__(self, data: bytes, home: Path, cd: CdModel, budget: Budget) -> None:
        self.data = data
        self.home = home
        self.cd = cd
        self.budget = budget
        self.commands: list[SimpleCommand] = []
        self.issues: list[Issue] = []
        self.functions: dict[str, list[SimpleCommand]] = {}
        self.vars = Variables(home)
        self.uncertain = 0          # > 0 while walking code that may not run or runs in a subshell
        self.depth = 0              # substitutions nested around this point
        # `a && b <<EOF > f`: redirects and words tree-sitter hangs on the list or pipeline, for the
        # last command (where bash binds them): (its start, redirect nodes, word nodes, the record made)
        self._tail: tuple[int, list[Any], list[Any]] | None = None
        self._tail_owner: SimpleCommand | None = None
        self.tainted: set[str] = set()   # variables given run-time input (read, mapfile, printf -v)

    def _maybe(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk code whose variable assignments may not happen or may not persist."""
        self.uncertain += 1
        try:
            return self.walk(node, cwds)
        finally:
            self.uncertain -= 1

    # -- statements ------------------------------------------------------------------------

    def walk(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Walk ``node`` starting in ``cwds``; return the directories after success / failure."""
        kind = node.type
        if kind in ("program", "do_group"):
            return self.sequence(node.children, cwds)
        if kind == "list":
            return self._list(node, cwds)
        if kind == "pipeline":
            return self._pipeline([c for c in node.named_children if c.type != "comment"], cwds, [])
        if kind == "command":
            return self._command(node, cwds, [])
        if kind == "redirected_statement":
            return self._redirected(node, cwds)
        if kind == "subshell":
            self.uncertain += 1
            try:
                self.sequence(node.children, cwds)
            finally:
                self.uncertain -= 1
            return cwds, cwds
        if kind == "compound_statement":
            if node.children and node.children[0].type == "((":
                self._arith(node, cwds)
                return cwds, cwds
            return self.sequence(node.children, cwds)
        if kind == "negated_command":
            ok, fail = self.sequence(node.children, cwds)
            return ok | fail, ok | fail
        if kind in ("if_statement", "while_statement", "for_statement", "c_style_for_statement",
                    "case_statement"):
            return self._control(node, cwds)
        if kind == "function_definition":
            return self._function(node, cwds)
        if kind in ("test_command", "declaration_command", "unset_command"):
            return self._builtin(node, cwds)
        if kind in REDIRECTS:                       # `$(< file)`: a redirect with no command
            red_words: list[Word] = []
            red = self.redirect(node, cwds, red_words)
            self._add(SimpleCommand(self.src(node), [], red_words, [red], cwds))
            return cwds, cwds
        if kind in ("variable_assignment", "variable_assignments"):
            parts = [node] if kind == "variable_assignment" else list(node.named_children)
            return self._simple(node, [self.word(p, cwds) for p in parts], [], [], cwds)
        self.issue("ask", f"unsupported shell construct ({kind})", node)
        return cwds | {None}, cwds | {None}

    def sequence(self, children: list[Any], cwds: Cwds) -> tuple[Cwds, Cwds]:
        """Statements separated by ``;``, newlines and ``&`` (which backgrounds the one before)."""
        ok, fail = cwds, cwds
        group_in = cwds
        started = len(self.commands)
        before = dict(self.vars.values)
        for child in children:
            if child.type == "&":
                for cmd in self.commands[started:]:
                    cmd.background = True
                ok = fail = group_in
                # a background job's assignments never reach this shell
                self.vars.forget({n for n, v in self.vars.values.items() if before.get(n, "\0") != v})
                continue
            if not child.is_named or child.type == "comment":
                continue
            group_in, started, before = cap(ok | fail), len(self.commands), dict(self.vars.values)
            ok, fail = self.walk(child, group_in)
        return ok, fail

    def _list(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        children = [c for c in node.children if c.type != "comment"]
        ok, fail = self.walk(children[0], cwds)
        for op, part in zip(children[1::2], children[2::2], strict=False):
            if op.type == "&&":
                part_ok, part_fail = self._maybe(part, ok)
                ok, fail = part_ok, cap(fail | part_fail)
            elif op.type == "||":
                part_ok, part_fail = self._maybe(part, fail)
                ok, fail = cap(ok | part_ok), part_fail
            else:
                self.issue("ask", f"unsupported list operator {op.type!r}", node)
                ok, fail = self.walk(part, ok | fail)
        return ok, fail

    def _pipeline(self, elements: list[Any], cwds: Cwds, upstream: list[SimpleCommand]) -> tuple[Cwds, Cwds]:
        piped = len(elements) + len(upstream) > 1
        for element in elements:
            start = len(self.commands)
            # each element of a real pipeline runs in a subshell: cd and assignments do not leak
            if piped:
                self._maybe(element, cwds)
            else:
                self.walk(element, cwds)
            produced = self.commands[start:]
            for cmd in produced:
                cmd.upstream = list(upstream)
                cmd.piped = piped
            upstream = upstream + produced
        return cwds, cwds

    def _redirected(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c.type in REDIRECTS]
        # `cat <<EOF > f arg`: tree-sitter puts what follows the delimiter inside the here-document
        # node; to bash they are the command's own redirects and arguments
        trailing = [c for r in redirects if r.type == "heredoc_redirect" for c in attached(r)]
        redirects += [c for c in trailing if c.type in REDIRECTS]
        words = [c for c in trailing if c.type not in REDIRECTS]
        last = last_command(body) if body is not None and body.type in ("pipeline", "list") else None
        cmd: SimpleCommand | None
        if last is not None:
            # `a | b > f`, `a && b <<EOF`: bash binds them to the last command (tree-sitter to the whole)
            self._tail, self._tail_owner = (last.start_byte, redirects, words), None
            try:
                ok, fail = self.walk(body, cwds)
            finally:
                self._tail, cmd = None, self._tail_owner
        elif body is not None and body.type == "command":
            ok, fail = self._command(body, cwds, redirects, words)
            cmd = self.commands[self._last_own]
            # the part names the command with its redirects, up to a here-document's body
            ends = [r.end_byte for r in redirects + words if r.type != "heredoc_redirect"]
            ends += [c.end_byte for r in redirects if r.type == "heredoc_redirect"
                     for c in r.children if c.type == "heredoc_start"]
            cmd.text = self.data[node.start_byte:max(ends + [body.end_byte])].decode("utf-8", "replace").strip()
        else:
            ok, fail = self.walk(body, cwds) if body is not None else (cwds, cwds)
            # a redirect after a list or group may apply where a `cd` inside it led
            where = cwds | ok | fail
            red_words: list[Word] = []
            reds = [self.redirect(r, where, red_words) for r in redirects]
            cmd = SimpleCommand(self.src(node), [], red_words + [self.word(w, where) for w in words], reds, where)
            self._add(cmd)
        if cmd is None:
            self.issue("ask", "a redirect whose command could not be found", node)
            return ok, fail
        for red in (r for r in redirects if r.type == "heredoc_redirect"):
            self._heredoc_tail(red, cmd, cwds)
        return ok, fail

    def _heredoc_tail(self, node: Any, cmd: SimpleCommand, cwds: Cwds) -> None:
        """tree-sitter puts what follows ``<<EOF`` on its line (``| sh``, ``&& ls``) inside the redirect."""
        own = {(c.start_byte, c.end_byte) for c in attached(node)}
        for child in node.children:
            if child.type in ("<<", "<<-", "heredoc_start", "heredoc_body", "heredoc_end", "comment", "&&", "||",
                              ";") or (child.start_byte, child.end_byte) in own:
                continue
            if child.type == "pipeline":
                self._pipeline([c for c in child.named_children if c.type != "comment"], cwds, [cmd])
            elif child.is_named:
                self._maybe(child, cwds)
            else:
                self.issue("ask", f"unsupported text after a here-document ({child.type!r})", node)

    def _control(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        seen: set[Path | None] = set(cwds)
        kind = node.type
        if kind == "for_statement":
            var = node.child_by_field_name("variable")
            name = self.raw(var) if var is not None else ""
            risk = env_name_risk(name)
            if risk is not None:
                self.issue(risk[0], risk[1], node)
            self.vars.forget({name})        # a loop variable's value is only known at run time
        current = cwds
        for part in self._control_parts(node):
            if part.type in WORDLIKE:
                if kind != "for_statement" or not _same(part, node.child_by_field_name("variable")):
                    self.word(part, current)
                continue
            if part.type in ("binary_expression", "unary_expression", "postfix_expression",
                             "parenthesized_expression", "variable_assignment", "ternary_expression"):
                self._arith(part, current)
                continue
            ok, fail = self._maybe(part, current)
            seen |= ok | fail
            current = frozenset(seen)
        after = frozenset(seen)
        if kind != "if_statement" and kind != "case_statement" and after != cwds:
            after = after | {None}      # a loop body that moves may move again on each pass
        return after, after

    def _control_parts(self, node: Any) -> list[Any]:
        parts: list[Any] = []
        for child in node.named_children:
            if child.type in ("elif_clause", "else_clause", "do_group", "case_item"):
                parts += self._control_parts(child)
            elif child.type != "comment":
                parts.append(child)
        return parts

    def _function(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        name_node = node.child_by_field_name("name") or next(
            (c for c in node.named_children if c.type == "word"), None)
        name = self.raw(name_node) if name_node is not None else ""
        start = len(self.commands)
        moved: set[Path | None] = set(cwds)
        for part in node.named_children:
            if _same(part, name_node) or part.type == "comment":
                continue
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

    def _builtin(self, node: Any, cwds: Cwds) -> tuple[Cwds, Cwds]:
        """``[[ ]]``, ``declare``/``export``/``local``, ``unset``: judged as the builtin with its words."""
        if node.type == "test_command" and node.children and node.children[0].type == "((":
            self._arith(node, cwds)
            return cwds, cwds
        first = node.children[0].type if node.children else ""
        words = [Word(first, first)]
        words += self._leaves(node, cwds)
        if node.type == "test_command":
            words.append(Word("]]", "]]"))
        return self._simple(node, [], words, [], cwds)

    def _leaves(self, node: Any, cwds: Cwds) -> list[Word]:
        out: list[Word] = []
        for child in node.children[1:] if node.type in ("test_command", "declaration_command",
                                                        "unset_command") else node.children:
            if child.type in WORDLIKE or child.type == "variable_assignment":
                out.append(self.word(child, cwds))
            elif child.is_named and child.type != "comment":
                out += self._leaves(child, cwds)
            elif child.type not in ("]]", "(", ")"):
                out.append(Word(child.type, child.type))
        return out

    def _arith(self, node: Any, cwds: Cwds) -> None:
        """``(( ))`` and arithmetic parts: only their substitutions run — and the values of the
        variables they name, which bash evaluates as expressions too (``a[$(cmd)]`` inside)."""
        self._tainted_arith(self.raw(node), node, whole=True)
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self._substitution(child, cwds)
            else:
                self._arith(child, cwds)

    # -- simple commands -------------------------------------------------------------------

    def _command(self, node: Any, cwds: Cwds, outer_redirects: list[Any],
                 outer_words: list[Any] = ()) -> tuple[Cwds, Cwds]:  # type: ignore[assignment]
        tail = self._tail
        if tail is not None and tail[0] == node.start_byte:
            outer_redirects, outer_words, self._tail = list(outer_redirects) + tail[1], list(outer_words) + tail[2], None
            ok, fail = self._command(node, cwds, outer_redirects, outer_words)
            self._tail_owner = self.commands[self._last_own]
            return ok, fail
        assignments: list[Word] = []
        words: list[Word] = []
        redirect_nodes: list[Any] = []
        for child in node.children:
            if child.type == "variable_assignment" and not words:
                assignments.append(self.word(child, cwds))
            elif child.type == "command_name":
                words.append(self._joined(child, cwds))
            elif child.type in WORDLIKE or child.type == "variable_assignment":
                words.append(self.word(child, cwds))
            elif child.type in REDIRECTS:
                redirect_nodes.append(child)
            elif child.type != "comment":
                self.issue("ask", f"unsupported part of a command ({child.type})", child)
        words += [self.word(w, cwds) for w in outer_words]
        extra: list[Word] = []
        redirects = [self.redirect(r, cwds, extra) for r in redirect_nodes + outer_redirects]
        return self._simple(node, assignments, words + extra, redirects, cwds)

    def _simple(self, node: Any, assignments: list[Word], words: list[Word], redirects: list[Redirect],
                cwds: Cwds) -> tuple[Cwds, Cwds]:
        if words and "=" in words[0].value and node.type.startswith("variable_assignment"):
            assignments, words = words, []
        if self.tainted:
            values = [w.value for w in words]
            arith_command = bool(words) and (values[0] in ("let", "declare", "typeset", "local") or (
                values[0] == "[[" and bool({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"} & set(values))))
            for word in assignments + words[1:]:
                self._tainted_arith(word.raw, node, whole=arith_command)
        self._taint(words)
        cmd = SimpleCommand(self.src(node), assignments, words, redirects, cwds)
        self._add(cmd)
        if words and words[0].literal and words[0].value in self.functions:
            cmd.calls_function = True
            if len(words) > 1:
                self._inline_call(cmd)
        self.vars.track(assignments, words, certain=not self.uncertain, functions=set(self.functions))
        return self._after_cd(words, cwds), cwds

    def _add(self, cmd: SimpleCommand) -> None:
        self.budget.check()
        self._last_own = len(self.commands)
        self.commands.append(cmd)
        if len(self.commands) > MAX_COMMANDS:
            raise ShellParseError(f"more than {MAX_COMMANDS} commands")

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
        return self.cd.resolve(words[1:], cwds)      # as bash does: CDPATH, cdable_vars, logical paths

    def _substitution(self, node: Any, cwds: Cwds) -> list[SimpleCommand]:
        """The commands inside ``$(...)``, backticks or ``<(...)``: a subshell."""
        if self.depth >= MAX_NESTING:
            self.issue("ask", "substitutions nest too deeply", node)
            return []
        start = len(self.commands)
        saved = self.vars.copy()
        self.depth += 1
        self.uncertain += 1
        try:
            self.sequence(node.children, cwds)
        finally:
            self.depth -= 1
            self.uncertain -= 1
            self.vars = saved
        return self.commands[start:]


def _same(a: Any, b: Any) -> bool:
    """tree-sitter hands out a new Node object on every access: compare positions."""
    return b is not None and (a.start_byte, a.end_byte, a.type) == (b.start_byte, b.end_byte, b.type)


def walk_script(source: str, home: Path, cwds: Cwds, budget: Budget | None = None
                ) -> tuple[list[SimpleCommand], list[Issue]]:
    """Parse and flatten ``source``; raise ShellParseError when it cannot be parsed, TooComplex
    when ``budget`` runs out."""
    reading = bash_text(source)              # lines joined and carriage returns kept as bash does
    root, data = parse_tree(reading.text)
    walker = Walker(data, home, CdModel(reading.text, home, cwds), budget or Budget())
    walker.issues += heredoc_disagreements(root, data) + body_disagreements(root, reading.text, reading.bodies)
    try:
        walker.walk(root, cwds)
    except RecursionError as exc:
        raise ShellParseError("command nests too deeply") from exc
    return walker.commands, walker.issues
