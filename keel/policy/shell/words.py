"""Shell words and redirections of a tree-sitter-bash tree, as the policy's ``Word``/``Redirect``.

A word's value is what bash passes after quote removal, with expansions kept as written and
listed in ``params`` (so the word is not "literal"); substitutions inside it are walked as
subshells and their commands recorded. ``$'…'`` and ``$"…"`` are decoded by bash at run time,
so they count as unknown. A part of a word the reader does not know is an "ask" issue.
"""

from __future__ import annotations

import re
from typing import Any

from keel.policy.shell.parse import Cwds, Issue, Redirect, SimpleCommand, Sub, Variables, Word, scan_unquoted

# Node types that are one shell word (or a part of one).
WORDLIKE = frozenset({"word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation",
                      "simple_expansion", "expansion", "command_substitution", "process_substitution",
                      "arithmetic_expansion", "number", "brace_expression", "extglob_pattern", "regex",
                      "variable_name", "test_operator", "array", "special_variable_name"})
REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")


class WordReader:
    """Word and redirect conversion; the walker supplies the state and ``_substitution``."""

    data: bytes
    vars: Variables
    issues: list[Issue]

    def raw(self, node: Any) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")

    def src(self, node: Any) -> str:
        return self.raw(node).strip()

    def issue(self, decision: str, reason: str, node: Any) -> None:
        self.issues.append(Issue(decision, reason, self.src(node)))

    def _substitution(self, node: Any, cwds: Cwds) -> list[SimpleCommand]:
        raise NotImplementedError

    def _arith(self, node: Any, cwds: Cwds) -> None:
        raise NotImplementedError

    def _joined(self, node: Any, cwds: Cwds) -> Word:
        """A ``command_name``: its parts form one word."""
        parts = list(node.children)
        if len(parts) == 1:
            return self.word(parts[0], cwds)
        return self.word(node, cwds)

    def word(self, node: Any, cwds: Cwds) -> Word:
        raw = self.raw(node)
        params: list[str] = []
        subs: list[Sub] = []
        self._unquoted: list[str] = []
        value = self._value(node, cwds, params, subs)
        value, params = self.vars.substitute(value, params, split=set(self._unquoted))
        glob, brace, subst_syntax = scan_unquoted(raw)
        if node.type in ("string", "raw_string", "ansi_c_string", "translated_string"):
            glob = brace = False
        if subst_syntax and not subs and node.type != "ansi_c_string" and not _contains(node, "arithmetic_expansion"):
            self.issue("ask", "a substitution the parser could not follow", node)
            params.append("$(?)")
        for param in params:
            if "$(" in param or "`" in param or "@P" in param:
                self.issue("ask", "a command hidden inside a parameter expansion", node)
        return Word(value, raw, tuple(params), tuple(subs), glob, brace)

    def _value(self, node: Any, cwds: Cwds, params: list[str], subs: list[Sub]) -> str:
        kind = node.type
        raw = self.raw(node)
        if kind == "word":
            return re.sub(r"\\(.)", r"\1", raw, flags=re.DOTALL).replace("\\\n", "")
        if kind in ("number", "variable_name", "test_operator", "extglob_pattern", "regex", "brace_expression",
                    "special_variable_name", "file_descriptor"):
            return raw
        if kind == "raw_string":
            return raw[1:-1]
        if kind in ("ansi_c_string", "translated_string"):
            params.append("$'" if kind == "ansi_c_string" else '$"')   # decoded by bash: treat as unknown
            self._scan_subs(node, cwds, subs)
            return raw[2:-1]
        if kind == "string":
            return self._string(node, cwds, params, subs)
        if kind in ("concatenation", "command_name"):
            return "".join(self._value(c, cwds, params, subs) for c in node.children)
        if kind == "simple_expansion":
            params.append(raw[1:])
            if not getattr(self, "_quoting", 0):
                self._unquoted.append(raw[1:])       # unquoted: bash splits its value into words
            return raw
        if kind in ("expansion", "arithmetic_expansion", "array"):
            params.append(raw[1:] if raw.startswith("$") else raw)
            if not getattr(self, "_quoting", 0):
                self._unquoted.append(raw[1:] if raw.startswith("$") else raw)
            self._scan_subs(node, cwds, subs)
            return raw
        if kind in ("command_substitution", "process_substitution"):
            subs.append(Sub("command" if kind == "command_substitution" else "process",
                            self._substitution(node, cwds)))
            return raw
        if kind == "variable_assignment":
            return self._assignment(node, cwds, params, subs)
        if kind == "subscript":
            self._scan_subs(node, cwds, subs)
            return raw
        if not node.is_named and kind == raw:        # '{' ',' in brace text, '=' ...
            return raw
        self.issue("ask", f"unsupported part of a word ({kind})", node)
        params.append("?")
        return raw

    def _string(self, node: Any, cwds: Cwds, params: list[str], subs: list[Sub]) -> str:
        """A double-quoted string: literal gaps unescaped, expansions kept as written."""
        out: list[str] = []
        pos = node.start_byte + 1
        end = node.end_byte - 1
        self._quoting = getattr(self, "_quoting", 0) + 1
        try:
            for child in node.named_children:
                if child.type == "string_content":
                    continue
                out.append(_DQ_ESCAPE.sub(_unescape, self.data[pos:child.start_byte].decode("utf-8",
                                                                                            "surrogateescape")))
                out.append(self._value(child, cwds, params, subs))
                pos = child.end_byte
        finally:
            self._quoting -= 1
        out.append(_DQ_ESCAPE.sub(_unescape, self.data[pos:end].decode("utf-8", "surrogateescape")))
        return "".join(out)

    def _assignment(self, node: Any, cwds: Cwds, params: list[str], subs: list[Sub]) -> str:
        out: list[str] = []
        self._quoting = getattr(self, "_quoting", 0) + 1      # x=$v: no word splitting in an assignment
        try:
            for child in node.children:
                if child.type in ("=", "+="):
                    out.append(child.type)
                elif child.type == "variable_name":
                    out.append(self.raw(child))
                else:
                    out.append(self._value(child, cwds, params, subs))
        finally:
            self._quoting -= 1
        return "".join(out)

    def _scan_subs(self, node: Any, cwds: Cwds, subs: list[Sub]) -> None:
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                subs.append(Sub("command" if child.type == "command_substitution" else "process",
                                self._substitution(child, cwds)))
            else:
                self._scan_subs(child, cwds, subs)

    def redirect(self, node: Any, cwds: Cwds, extra_words: list[Word]) -> Redirect:
        if node.type == "herestring_redirect":
            targets = [c for c in node.named_children if c.type in WORDLIKE]
            return Redirect("<<<", None, self.word(targets[-1], cwds) if targets else None)
        if node.type == "heredoc_redirect":
            return self._heredoc(node, cwds)
        fd: int | None = None
        op = ""
        dests: list[Any] = []
        for child in node.children:
            if child.type == "file_descriptor":
                fd = int(self.raw(child)) if self.raw(child).isdigit() else None
            elif not child.is_named:
                op = child.type
            elif child.type != "comment":
                dests.append(child)
        words = [self.word(d, cwds) for d in dests]
        target = words[0] if words else None
        extra_words.extend(words[1:])             # `echo > a b`: b is an argument of echo
        if op in (">&", "<&", ">&-", "<&-") and (target is None or re.fullmatch(r"\d*-?", target.value)):
            target = None                         # duplicating or closing a descriptor
        return Redirect(op, fd, target)

    def _heredoc(self, node: Any, cwds: Cwds) -> Redirect:
        op = "<<-" if any(c.type == "<<-" for c in node.children) else "<<"
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        delim_raw = self.raw(start) if start is not None else ""
        expands = not any(q in delim_raw for q in "'\"\\")
        delim = re.sub(r"['\"\\]", "", delim_raw)
        text = self.raw(body) if body is not None else ""
        live = re.sub(r"\\.", "", text, flags=re.DOTALL)        # \$(x) in a body is text
        if expands and body is not None and ("$(" in live or "`" in live):
            self.issue("ask", "a here-document whose body runs command substitutions", node)
            self._arith(body, cwds)
        return Redirect(op, None, Word(delim, delim), text, expands)


def _contains(node: Any, kind: str) -> bool:
    return node.type == kind or any(_contains(c, kind) for c in node.named_children)


def _unescape(m: re.Match[str]) -> str:
    return "" if m.group(1) == "\n" else m.group(1)
