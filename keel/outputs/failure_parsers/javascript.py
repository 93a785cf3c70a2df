"""JavaScript test runners: node's built-in runner (TAP and spec reporters), jest, vitest, mocha."""

from __future__ import annotations

import re

from keel.outputs.failure_parsers.common import (
    Finding,
    drop_parents,
    is_project_path,
    tests_headline,
)

# "at fn (src/a.js:3:7)", "at src/a.js:3:7", "TestContext.<anonymous> (/x/a.test.js:3:37)", "❯ a.ts:4:23"
# jest/vitest source excerpt: "> 4 |   expect(…)"; possessive, as the runs cannot overlap: plain, the three
# whitespace runs backtracked cubically on a long blank line (keel issue 22).
_CODE_FRAME = re.compile(r"^\s*+>?\s*+\d++\s*+\|")
_STACK_LOCATION = re.compile(r"(?:\(|at |❯ |^\s*)([^\s()]+?\.[cm]?[jt]sx?):(\d+)(?::\d+)?\)?\s*$")


def _location(lines: list[str]) -> str | None:
    """The first stack location in the project's own files."""
    for line in lines:
        m = _STACK_LOCATION.search(line)
        if m and is_project_path(m[1]):
            return f"{m[1]}:{m[2]}"
    return None


class _Failures:
    """Failures in the order seen; parents that failed only through a child are dropped at the end."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, str | None]] = {}

    def add(self, test_id: str, message: str, location: str | None) -> None:
        self.entries.setdefault(test_id, (message, location))

    def finding(self, separator: str) -> Finding | None:
        keep = drop_parents(list(self.entries), (separator,))
        if not keep:
            return None
        finding = Finding(headline=tests_headline(keep), ids=keep, is_test_run=True)
        for test_id in keep:
            message, location = self.entries[test_id]
            finding.body.append(f"✖ {test_id}" + (f" - {message}" if message else ""))
            if location:
                finding.locations.append(location)
                finding.body.append(f"  at {location}")
        return finding


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _deeper(block: list[str], indent: int) -> list[str]:
    """The lines of ``block`` up to the first non-blank one indented no deeper than ``indent``."""
    out = []
    for line in block:
        if line.strip() and _indent(line) <= indent:
            break
        out.append(line)
    return out


def _message(block: list[str]) -> str:
    """The first lines of a failure up to the code frame or stack: the assertion and its values."""
    text = []
    for line in block:
        if _CODE_FRAME.match(line) or line.strip().startswith(("at ", "❯ ")):
            break
        if line.strip():
            text.append(line.strip())
    return " ".join(text[:3])


# -- TAP (node --test when not on a terminal, tape, prove) ----------------------------------------
_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.+)$")
_TAP_RESULT = re.compile(r"^(\s*)(not ok|ok) \d+(?: - (.*?))?\s*$")
_TAP_DIRECTIVE = re.compile(r"#\s*(?:TODO|SKIP)\b", re.IGNORECASE)
_YAML_SCALAR = re.compile(r"^\s*(error|location):\s*(?:'(.*)'|\"(.*)\"|(\|-?|>-?)|(.*))\s*$")


def _tap_details(block: list[str]) -> tuple[str, str | None]:
    """The error message and failing location from a TAP result's YAML block."""
    message, location = "", None
    for k, line in enumerate(block):
        m = _YAML_SCALAR.match(line)
        if not m:
            continue
        if m[1] == "location":
            location = _location([f"({m[2] or m[3] or m[5] or ''})"])
        elif m[4]:  # a block scalar: the message is on the following, deeper lines
            message = _message(_deeper(block[k + 1:], _indent(line)))
        else:
            message = m[2] or m[3] or m[5] or ""
    stack = _location([line for line in block if "(" in line and ":" in line])
    return message, stack or location


def parse_tap(lines: list[str]) -> Finding | None:
    if not any(line.lstrip().startswith("not ok ") for line in lines):
        return None
    failures = _Failures()
    parents: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if m := _TAP_SUBTEST.match(line):
            indent = len(m[1])
            parents = [p for p in parents if p[0] < indent] + [(indent, m[2].strip())]
            continue
        m = _TAP_RESULT.match(line)
        if not m:
            continue
        indent = len(m[1])
        parents = [p for p in parents if p[0] < indent]
        if m[2] == "ok" or _TAP_DIRECTIVE.search(m[3] or ""):
            continue
        name = " > ".join([p[1] for p in parents] + [m[3] or f"test at line {i + 1}"])
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "..."), i)
        message, location = _tap_details(lines[i + 1: end] if end > i else [])
        failures.add(name, message, location)
    return failures.finding(" > ")


# -- node's spec reporter ("✖ name (4ms)") ---------------------------------------------------------
_SPEC_SUITE = re.compile(r"^(\s*)▶ (.+)$")
_SPEC_FAIL = re.compile(r"^(\s*)✖ (.+?) \(\d[\d.]*m?s\)$")


def parse_node_spec(lines: list[str]) -> Finding | None:
    failures = _Failures()
    parents: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if line.strip() == "✖ failing tests:":
            break  # the recap repeats the failures above
        if m := _SPEC_SUITE.match(line):
            indent = len(m[1])
            parents = [p for p in parents if p[0] < indent] + [(indent, m[2].strip())]
        elif m := _SPEC_FAIL.match(line):
            indent = len(m[1])
            parents = [p for p in parents if p[0] < indent]
            block = _deeper(lines[i + 1: i + 40], indent)
            failures.add(" > ".join([p[1] for p in parents] + [m[2]]), _message(block), _location(block))
    return failures.finding(" > ")


# -- jest and vitest ---------------------------------------------------------------------------------
_JEST_FILE = re.compile(r"^\s*FAIL\s+(\S+)(?:\s+\([\d.]+ m?s\))?\s*$")      # " FAIL  src/a.test.js (5.2 s)"
_JEST_BULLET = re.compile(r"^\s*● (.+)$")
_VITEST_FAIL = re.compile(r"^\s*FAIL\s+(\S+) > (.+)$")


def parse_jest_vitest(lines: list[str]) -> Finding | None:
    failures = _Failures()
    current_file = ""
    starts: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if m := _VITEST_FAIL.match(line):
            starts.append((i, f"{m[1]} > {m[2].strip()}"))
        elif m := _JEST_FILE.match(line):
            current_file = m[1]
        elif (m := _JEST_BULLET.match(line)) and m[1].strip() != "Console":
            starts.append((i, f"{current_file} › {m[1].strip()}" if current_file else m[1].strip()))
    for n, (start, test_id) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else min(len(lines), start + 60)
        block = lines[start + 1: end]
        failures.add(test_id, _message(block), _location(block))
    return failures.finding(" › ")


# -- mocha -------------------------------------------------------------------------------------------
_MOCHA_FAILING = re.compile(r"^\s*\d+ failing\s*$")
_MOCHA_ENTRY = re.compile(r"^\s*(\d+)\) (.+)$")


def parse_mocha(lines: list[str]) -> Finding | None:
    start = next((i for i, line in enumerate(lines) if _MOCHA_FAILING.match(line)), None)
    if start is None:
        return None
    failures = _Failures()
    entries = [i for i in range(start + 1, len(lines)) if _MOCHA_ENTRY.match(lines[i])]
    for n, first in enumerate(entries):
        end = entries[n + 1] if n + 1 < len(entries) else len(lines)
        m = _MOCHA_ENTRY.match(lines[first])
        assert m is not None
        title, k = [m[2].strip()], first
        while not title[-1].endswith(":") and k + 1 < end and lines[k + 1].strip():
            k += 1
            title.append(lines[k].strip())
        block = lines[k + 1: end]
        failures.add(" ".join(title).rstrip(":"), _message(block), _location(block))
    return failures.finding("\0")    # mocha titles hold no separator: nothing is a parent
