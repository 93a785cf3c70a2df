"""The command text as bash reads it, before tree-sitter sees it: lines joined and carriage
returns kept where bash keeps them.

bash removes a backslash-newline before it splits words — unquoted, inside double quotes, inside
``$(…)``, backticks and ``${…}``, in the body of a here-document whose delimiter is unquoted,
even inside the delimiter line of such a body (``EO\\⏎F`` ends it) — but not inside single
quotes, ``$'…'``, comments or the body of a here-document with a quoted delimiter. tree-sitter
keeps the pair in double quotes and here-document bodies, so ``echo "$\\⏎(touch x)"`` was a
literal to the judge and a command substitution to bash. A carriage return is an ordinary
character to bash (``echo SAFE \\␍⏎rm -rf ~`` is ``echo 'SAFE␍'`` and then ``rm``), while
tree-sitter takes it for a blank and ``\\␍⏎`` for a line continuation.

``bash_text`` returns the text with every backslash-newline bash removes removed and every
carriage return outside quotes, comments and here-document bodies quoted (``'␍'``, the same word
to bash), and where each here-document body starts and ends in it, so the walker can check that
tree-sitter put the bodies where bash reads them. A construct whose reading this module does not
model with certainty (``case`` inside ``$(…)``, a single quote inside a double-quoted ``${…}``,
arithmetic commands, quotes inside backticks) raises ``ShellParseError`` when the text needs a
change; text that needs none is returned as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from keel.policy.shell.heredoc import bash_delimiter
from keel.policy.shell.parse import ShellParseError

CR_WORD = "'\r'"
_WORD_END = frozenset(" \t\n;&|()<>")
_COMMENT_AFTER = frozenset(" \t\n;&|()")


@dataclass
class _Heredoc:
    delimiter: str
    quoted: bool
    strip_tabs: bool


@dataclass
class Reading:
    """What ``bash_text`` found: the text for tree-sitter and the here-document bodies in it."""

    text: str
    # [start, end) of each body, its delimiter line excluded; None when not known (not checked)
    bodies: list[tuple[int, int]] | None = None
    changed: bool = False


class _Reader:
    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0
        self.out: list[str] = []
        self.size = 0                      # characters in self.out
        self.edits = 0
        self.unsure: str | None = None     # a construct read without certainty
        self.bodies: list[tuple[int, int]] = []

    # -- output ----------------------------------------------------------------------------

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.size += len(text)

    def copy(self, n: int = 1) -> None:
        self.emit(self.src[self.i:self.i + n])
        self.i += n

    def doubt(self, why: str) -> None:
        self.unsure = self.unsure or why

    def at(self, text: str) -> bool:
        return self.src.startswith(text, self.i)

    def joined(self) -> bool:
        """A backslash-newline bash removes: drop it here too."""
        if self.at("\\\n"):
            self.i += 2
            self.edits += 1
            return True
        return False

    # -- unquoted text (the top level, $(…), subshells) -------------------------------------

    def unquoted(self, closer: str = "") -> None:
        """Read until ``closer`` (``)`` of ``$(``) at depth 0, or the end. Here-documents opened
        here get their bodies after the next newline read here (bash 5: not one inside ``$(…)``)."""
        pending: list[_Heredoc] = []
        depth = 0
        src = self.src
        while self.i < len(src):
            ch = src[self.i]
            if self.joined():
                continue
            if ch == "\\":
                if self.at("\\\r"):
                    self.i += 2
                    self._cr()
                else:
                    self.copy(2)
            elif ch == "\r":
                self.i += 1
                self._cr()
            elif ch == "'":
                self._single()
            elif ch == '"':
                self.copy()
                self._double()
            elif ch == "`":
                self._backtick()
            elif ch == "$":
                self._dollar(quoted=False)
            elif ch == "#" and self._word_start():
                self._comment()
            elif ch == "<" and self.at("<<") and not self.at("<<<"):
                pending.append(self._heredoc_operator())
            elif ch == "\n":
                self.copy()
                for heredoc in pending:
                    self._body(heredoc)
                pending = []
            elif closer and ch == "(":
                depth += 1
                self.copy()
            elif closer and ch == ")":
                if depth == 0:
                    return
                depth -= 1
                self.copy()
            else:
                if closer and ch == "c" and re.match(r"case\b", src[self.i:self.i + 5]) and self._word_start():
                    self.doubt("a case statement inside $(…)")
                if ch == "(" and self.at("((") and self._word_start():
                    self.doubt("an arithmetic command")
                self.copy()
        if closer:
            self.doubt("an unclosed $(")

    def _cr(self) -> None:
        """A carriage return in a word: an ordinary character to bash, so quote it for tree-sitter."""
        self.emit(CR_WORD)
        self.edits += 1

    def _word_start(self) -> bool:
        return self.size == 0 or self.out[-1][-1:] in _COMMENT_AFTER

    def _comment(self) -> None:
        end = self.src.find("\n", self.i)
        end = len(self.src) if end < 0 else end
        self.copy(end - self.i)

    def _single(self) -> None:
        end = self.src.find("'", self.i + 1)
        if end < 0:
            self.doubt("an unterminated single quote")
            end = len(self.src) - 1
        self.copy(end + 1 - self.i)

    def _ansi(self) -> None:
        """``$'…'``: backslash escapes the next character, newlines stay."""
        self.copy(2)
        while self.i < len(self.src) and self.src[self.i] != "'":
            self.copy(2 if self.src[self.i] == "\\" else 1)
        self.copy()

    def _double(self) -> None:
        """Inside ``"…"`` (the opening quote already copied), up to and with the closing one."""
        while self.i < len(self.src):
            ch = self.src[self.i]
            if self.joined():
                continue
            if ch == "\\":
                self.copy(2 if self.src[self.i + 1:self.i + 2] in ('$', '`', '"', "\\") else 1)
            elif ch == '"':
                self.copy()
                return
            elif ch == "`":
                self._backtick()
            elif ch == "$":
                self._dollar(quoted=True)
            else:
                self.copy()
        self.doubt("an unterminated double quote")

    def _dollar(self, quoted: bool) -> None:
        if self.at("$((") or self.at("$["):
            self.copy(3 if self.at("$((") else 2)
            self._nested(")" if self.src[self.i - 1] == "(" else "]", quoted, "arithmetic")
        elif self.at("$("):
            self.copy(2)
            self.unquoted(closer=")")
            self.copy()
        elif self.at("${"):
            self.copy(2)
            self._nested("}", quoted, "parameter")
        elif not quoted and self.at("$'"):
            self._ansi()
        elif not quoted and self.at('$"'):
            self.copy(2)
            self._double()
        else:
            self.copy()

    def _nested(self, closer: str, quoted: bool, what: str) -> None:
        """``${…}``, ``$((…))``, ``$[…]`` up to and with the closing bracket; quotes and
        substitutions inside are read, newlines are not tokens (no here-document body starts)."""
        opener = {"}": "{", ")": "(", "]": "["}[closer]
        depth = 0
        while self.i < len(self.src):
            ch = self.src[self.i]
            if self.joined():
                continue
            if ch == "\\":
                self.copy(2)
            elif ch == "'" and quoted and what == "parameter":
                self.doubt("a single quote inside a double-quoted ${…}")
                self.copy()
            elif ch == "'":
                self._single()
            elif ch == '"':
                self.copy()
                self._double()
            elif ch == "`":
                self._backtick()
            elif ch == "$":
                self._dollar(quoted)
            elif ch == "\r":
                self.doubt(f"a carriage return inside {what} expansion")
                self.copy()
            elif ch == opener:
                depth += 1
                self.copy()
            elif ch == closer:
                if depth == 0:
                    self.copy(2 if closer == ")" and what == "arithmetic" else 1)
                    return
                depth -= 1
                self.copy()
            else:
                self.copy()
        self.doubt(f"an unclosed {what} expansion")

    def _backtick(self) -> None:
        """`` `…` ``: read again by bash after unescaping; only joins are certain here."""
        self.copy()
        while self.i < len(self.src):
            ch = self.src[self.i]
            if self.joined():
                continue
            if ch == "\\":
                self.copy(2)
            elif ch == "`":
                self.copy()
                return
            else:
                if ch in "'\"\r" or self.at("<<"):
                    self.doubt("quotes, carriage returns or here-documents inside backticks")
                self.copy()
        self.doubt("an unclosed backtick")

    # -- here-documents ----------------------------------------------------------------------

    def _heredoc_operator(self) -> _Heredoc:
        """``<<WORD`` / ``<<-WORD``: copy it, return what bash makes of the delimiter."""
        self.copy(2)
        strip = self.at("-")
        if strip:
            self.copy()
        while self.i < len(self.src) and (self.src[self.i] in " \t" or self.at("\\\n")):
            if not self.joined():
                self.copy()
        start = len(self.out)
        while self.i < len(self.src) and self.src[self.i] not in _WORD_END:
            if self.joined():
                continue
            ch = self.src[self.i]
            if ch == "\r":
                raise ShellParseError("a carriage return in a here-document delimiter")
            if ch == "'":
                self._single()
            elif ch == '"':
                self.copy()
                self._double()
            elif ch == "\\":
                self.copy(2)
            elif ch == "$" and self.src[self.i + 1:self.i + 2] in ("'", '"'):
                self.doubt("a $'…' here-document delimiter")
                self.copy()
            else:
                self.copy()
        raw = "".join(self.out[start:])
        delimiter = bash_delimiter(raw)
        if delimiter is None or not raw:
            self.doubt("a here-document delimiter that is not modelled")
            delimiter = raw
        return _Heredoc(delimiter, any(q in raw for q in "'\"\\"), strip)

    def _body(self, heredoc: _Heredoc) -> None:
        """Lines up to the delimiter line; an unquoted delimiter joins lines first (bash reads
        the body with line continuations removed, and compares the joined line)."""
        start = self.size
        src = self.src
        while self.i < len(src):
            line: list[str] = []
            while self.i < len(src) and src[self.i] != "\n":
                if not heredoc.quoted and src[self.i] == "\\":
                    if self.joined():
                        continue
                    line.append(src[self.i:self.i + 2])
                    self.i += 2
                    continue
                line.append(src[self.i])
                self.i += 1
            text = "".join(line)
            if (text.lstrip("\t") if heredoc.strip_tabs else text) == heredoc.delimiter:
                self.bodies.append((start, self.size))
                self.emit(text)
                if self.i < len(src):
                    self.copy()                # the newline ending the delimiter line
                return
            self.emit(text)
            if self.i < len(src):
                self.copy()                    # the newline
        self.bodies.append((start, self.size))


def bash_text(source: str) -> Reading:
    """``source`` as bash reads it (see the module docstring)."""
    if "\\\n" not in source and "\r" not in source and "<<" not in source:
        return Reading(source)
    reader = _Reader(source)
    reader.unquoted()
    if reader.edits == 0:
        return Reading(source, reader.bodies if reader.unsure is None else None)
    if reader.unsure is not None:
        raise ShellParseError(f"line continuations or carriage returns near {reader.unsure}, which "
                              "the checker cannot read the way bash does")
    return Reading("".join(reader.out), reader.bodies, changed=True)
