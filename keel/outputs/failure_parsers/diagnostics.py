"""Linters, type checkers and compilers: one diagnostic per problem, each tied to a file and line.

Recognised shapes (the tool is never asked, the line's shape decides):
- ``path:line:col: message`` — ruff --output-format=concise, flake8, eslint -f unix, go vet/build, gcc
- ``path:line[:col]: error: message`` — mypy (notes are skipped), and column-less only with a severity
  word, so Python warnings (``x.py:3: DeprecationWarning``) and pytest locations are not mistaken
- ``path(line,col): error TS1234: message`` and ``path:line:col - error TS1234: message`` — tsc, pyright
- ``CODE message`` followed by `` --> path:line:col`` — ruff's default output and rustc/cargo errors
- eslint's stylish report: a file name, then ``  line:col  error  message  rule`` lines

A diagnostic's id leaves out the line and column, which move whenever lines are added above it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from keel.outputs.failure_parsers.common import Finding, stable, unique

_PATH = r"(?P<path>[^\s:()'\"][^:()'\"]*?\.[A-Za-z0-9]{1,6})"
_COLON_FORM = re.compile(_PATH + r":(?P<line>\d+):(?P<col>\d+): (?P<msg>.+)$")
_SEVERITY_FORM = re.compile(_PATH + r":(?P<line>\d+): (?P<msg>(?:error|warning|fatal error): .+)$")
_PAREN_FORM = re.compile(_PATH + r"\((?P<line>\d+),(?P<col>\d+)\): (?P<msg>(?:error|warning) .+)$")
_DASH_FORM = re.compile(r"^\s*" + _PATH + r":(?P<line>\d+):(?P<col>\d+) - (?P<msg>(?:error|warning).+)$")
_ARROW = re.compile(r"^\s*--> " + _PATH + r":(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
_STYLISH_ENTRY = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.+?)\s*$")
_HAS_LINE_NUMBER = re.compile(r"[:(]\d")     # every recognised shape has ":12" or "(12": a cheap first filter
_STYLISH_FILE = re.compile(r"\S+\.[A-Za-z0-9]{1,6}")
_SKIPPED = re.compile(r"^(?:note|help|info|hint)\b", re.IGNORECASE)
_RUST_WARNING = re.compile(r"^warning(?:\[\w+\])?:")
_TOTALS = re.compile(r"^(?:Found \d+ errors?|✖ \d+ problems?|\d+ errors?, \d+ warnings?|error: could not compile).*")


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    col: int | None
    message: str

    def render(self) -> str:
        col = f":{self.col}" if self.col is not None else ""
        return f"{self.path}:{self.line}{col}: {self.message}"


def _from_match(m: re.Match[str], message: str | None = None) -> Diagnostic:
    col = m.groupdict().get("col")
    text = (message if message is not None else m["msg"]).replace(" [*] ", " ").strip()
    return Diagnostic(m["path"].removeprefix("./"), int(m["line"]), int(col) if col else None, text)


def find_diagnostics(lines: list[str]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    stylish_file = ""
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if not line[0].isspace():  # a line at column 0 names an eslint-stylish file or ends its block
            stylish_file = line.strip() if _STYLISH_FILE.fullmatch(line.strip()) else ""
        if not _HAS_LINE_NUMBER.search(line):
            continue
        m = _COLON_FORM.match(line) or _SEVERITY_FORM.match(line) or _PAREN_FORM.match(line) \
            or _DASH_FORM.match(line)
        if m:
            if not _SKIPPED.match(m["msg"]):
                found.append(_from_match(m))
        elif m := _ARROW.match(line):
            head = next((t for t in reversed(lines[max(0, i - 3): i]) if t.strip() and not t[0].isspace()), "")
            if head and not _SKIPPED.match(head) and not _RUST_WARNING.match(head):
                found.append(_from_match(m, head))
        elif stylish_file and (m := _STYLISH_ENTRY.match(line)):
            found.append(Diagnostic(stylish_file, int(m["line"]), int(m["col"]), f"{m['sev']} {m['msg']}"))
    return found


def parse_diagnostics(lines: list[str]) -> Finding | None:
    diagnostics = find_diagnostics(lines)
    if not diagnostics:
        return None
    finding = Finding(headline="")
    finding.ids = unique([stable(f"{d.path}: {d.message}") for d in diagnostics])
    finding.locations = unique([f"{d.path}:{d.line}" for d in diagnostics])
    finding.body = [d.render() for d in diagnostics]
    totals = next((line.strip() for line in lines if _TOTALS.match(line.strip())), None)
    if totals:
        finding.body.append(totals)
    files = len({d.path for d in diagnostics})
    n = len(diagnostics)
    finding.headline = (f"{n} problem{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}: "
                        f"{diagnostics[0].render()}")
    return finding
