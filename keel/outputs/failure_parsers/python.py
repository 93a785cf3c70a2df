"""Python formats: pytest, unittest and doctest reports, and plain tracebacks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from keel.outputs.failure_parsers.common import Finding, clip, is_project_path, stable, tests_headline

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_CARETS = re.compile(r"^\s*[~^]+\s*$")
_TB_HEADER = "Traceback (most recent call last):"


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    code: str

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Traceback:
    frames: tuple[Frame, ...]
    exception: str              # "KeyError: 'port'"
    after: tuple[str, ...]      # lines that continue the exception message (assertion diffs)

    @property
    def culprit(self) -> Frame | None:
        """The innermost frame in the project's own code (not the stdlib, not site-packages)."""
        own = [f for f in self.frames if is_project_path(f.path)]
        return own[-1] if own else (self.frames[-1] if self.frames else None)


def read_traceback(lines: list[str], start: int) -> tuple[Traceback, int] | None:
    """Parse the traceback whose header or first frame is at ``start``; returns it and the index
    after it. The exception line is the first line at column 0 after the indented frames."""
    i = start + 1 if lines[start].strip() == _TB_HEADER else start
    frames: list[Frame] = []
    while i < len(lines):
        line = lines[i]
        frame = _FRAME.match(line)
        if frame:
            code = ""
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt.startswith(" ") and not _FRAME.match(nxt) and not _CARETS.match(nxt):
                code = nxt.strip()
            frames.append(Frame(frame["path"], int(frame["line"]), frame["func"] or "", code))
        elif line and not line[0].isspace():
            break
        i += 1
    if i >= len(lines) or not frames:
        return None
    after = []
    for extra in lines[i + 1: i + 5]:
        if not extra.strip() or extra.startswith(("Traceback", "During handling", "The above exception")):
            break
        after.append(extra.rstrip())
    return Traceback(tuple(frames), lines[i].strip(), tuple(after)), i + 1


def find_tracebacks(lines: list[str]) -> list[Traceback]:
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        # A SyntaxError in the script itself prints its frame without a header.
        frame = _FRAME.match(line)
        headerless = frame is not None and not frame["func"]
        if line.strip() == _TB_HEADER or headerless:
            parsed = read_traceback(lines, i)
            if parsed:
                found.append(parsed[0])
                i = parsed[1]
                continue
        i += 1
    return found


def _frame_line(frame: Frame) -> str:
    where = f"{frame.location} in {frame.func}" if frame.func else frame.location
    return f"  at {where}: {frame.code}" if frame.code else f"  at {where}"


def parse_traceback(lines: list[str]) -> Finding | None:
    tracebacks = find_tracebacks(lines)
    if not tracebacks:
        return None
    finding = Finding(headline="")
    # Chained exceptions print the cause first; the last block is what ended the program.
    for tb in reversed(tracebacks[-3:]):
        culprit = tb.culprit
        where = culprit.location if culprit else "?"
        finding.ids.append(stable(f"{culprit.path if culprit else '?'}: {tb.exception}"))
        finding.locations.append(where)
        if not finding.headline:
            finding.headline = f"{tb.exception} at {where}"
        finding.body.append(tb.exception)
        own = [f for f in reversed(tb.frames) if is_project_path(f.path)] or list(tb.frames[-1:])
        finding.body.extend(_frame_line(f) for f in own[:3])
    return finding


# -- pytest -------------------------------------------------------------------------------------
_PT_BANNER = re.compile(r"^={3,} (FAILURES|ERRORS|short test summary info|warnings summary) ={3,}$")
_PT_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PT_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?\.py(?:::\S*?(?:\[.*?\])?)?)(?: - (.*))?$")
_PT_VERBOSE = re.compile(r"^(\S+?\.py::\S+) (FAILED|ERROR)\b")
_PT_LOCATION = re.compile(r"^(\S+?\.py):(\d+):(?: in \S+| (\w[\w.]*))?\s*$")
_PT_TBLINE = re.compile(r"^(\S+?\.py):(\d+): ([A-Z]\w*(?:Error|Exception|Exit|Failure|Failed)\b.*)$")
_PT_DIVIDER = re.compile(r"^(?:_ ){3,}_?$")   # between the entries of one long traceback
_PT_CUT = re.compile(r"^(.*?)\.\.\.$")         # a short-summary message cut at the terminal's width
DETAIL_LINES = 16
DETAIL_TESTS = 40   # tests whose lines are kept: a run of thousands of failures keeps a bounded summary
_PT_FINAL = re.compile(r"^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected)"
                       r"(?:, )?)+ in [\d.]+s|no tests ran in [\d.]+s)\b.*?=*$")


def _pytest_sections(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    banner, current = "", None
    for line in lines:
        if m := _PT_BANNER.match(line):
            banner, current = m[1], None
        elif banner in ("FAILURES", "ERRORS") and (m := _PT_SECTION.match(line)):
            current = sections.setdefault(m[1], [])
        elif current is not None:
            current.append(line)
    return sections


def _section_for(test_id: str, sections: dict[str, list[str]]) -> list[str]:
    if test_id in sections or f"ERROR collecting {test_id}" in sections:
        return sections.get(test_id) or sections[f"ERROR collecting {test_id}"]
    dotted = test_id.split("::", 1)[-1].replace("::", ".")
    for name, body in sections.items():
        bare = re.sub(r"^(?:ERROR at (?:setup|teardown) of |\[doctest\] )", "", name)
        if dotted == bare or dotted.endswith("." + bare):
            return body
    return []


def _id_from_section(name: str, body: list[str]) -> str:
    if name.startswith("ERROR collecting "):
        return name.removeprefix("ERROR collecting ")
    bare = re.sub(r"^ERROR at (?:setup|teardown) of ", "", name)
    files = [m[1] for line in body if (m := _PT_LOCATION.match(line)) and "test" in m[1].rsplit("/", 1)[-1]]
    return f"{files[0]}::{bare.replace('.', '::')}" if files else bare


def _pytest_line_tracebacks(lines: list[str]) -> dict[str, tuple[str, str, str]]:
    """``--tb=line`` without a summary names no test, only ``/abs/test_app.py:3: AssertionError: …``:
    then the failure's file and exception stand in for the test id (no line: it moves)."""
    found: dict[str, tuple[str, str, str]] = {}
    for line in lines:
        if (m := _PT_TBLINE.match(line)) and is_project_path(m[1]):
            found.setdefault(stable(f"{m[1]}: {m[3]}"), ("FAILED", "", f"{m[1]}:{m[2]}"))
    return found


def _pytest_reported(lines: list[str], sections: dict[str, list[str]],
                     final: str | None) -> dict[str, tuple[str, str, str]]:
    """test id -> (FAILED|ERROR, message, location), from the best source the output offers: the
    short summary (or -v result lines), else the failure sections' titles, else --tb=line lines."""
    reported: dict[str, tuple[str, str, str]] = {}
    for line in lines:
        if m := _PT_SUMMARY.match(line):
            if m[3] or m[2] not in reported:
                reported[m[2]] = (m[1], m[3] or "", "")
        elif (m := _PT_VERBOSE.match(line)) and m[1] not in reported:
            reported[m[1]] = (m[2], "", "")
    if reported or not (sections or final):
        return reported
    if sections:
        return {_id_from_section(name, body): ("ERROR" if name.startswith("ERROR") else "FAILED", "", "")
                for name, body in sections.items()}
    return _pytest_line_tracebacks(lines)


def section_excerpt(section: list[str]) -> list[str]:
    """What pytest printed for one failing test, for a request to make that test pass: the test's
    source down to its failing line (its inputs and what it expects), the E lines and where it
    failed. Measured (Exercism anagram, 1.5B): the short summary's line was all a focused candidate
    got, cut by pytest at 80 columns ("- Ass..."), and 6 rounds of candidates never saw that the
    test passes "Orchestra" and expects "Carthorse"."""
    lines = [line for line in section if line.strip() and not line.startswith("self = ")
             and not _PT_DIVIDER.match(line)]
    if len(lines) <= DETAIL_LINES:
        return [clip(line) for line in lines]
    first = next((i for i, line in enumerate(lines) if line.startswith(">")), 0)
    head = lines[max(0, first - (DETAIL_LINES - 8)):first + 1]   # the test, down to its failing line
    errors = [line for line in lines[first + 1:] if line.startswith("E ")][:6]
    where = [line for line in lines if _PT_TBLINE.match(line)][-1:]
    return [clip(line) for line in head + errors + where]


def parse_pytest(lines: list[str]) -> Finding | None:
    sections = _pytest_sections(lines)
    final = next((m[1] for line in reversed(lines) if (m := _PT_FINAL.match(line))), None)
    reported = _pytest_reported(lines, sections, final)
    if not reported and final is None:
        return None
    finding = Finding(headline="", is_test_run=True)
    uncollected = []
    for test_id, (kind, message, location) in reported.items():
        section = _section_for(test_id, sections)
        errors = [line[1:].strip() for line in section if line.startswith("E ")] or _doctest_mismatch(section)
        if errors and (cut := _PT_CUT.match(message)) and errors[0].startswith(cut[1]):
            message = ""   # "- Ass..." at 80 columns: the section says it whole
        message = message or (errors[0] if errors else "")
        if section and len(finding.details) < DETAIL_TESTS:
            finding.details[test_id] = section_excerpt(section)
        finding.ids.append(test_id)
        if kind == "ERROR" and "::" not in test_id:
            uncollected.append((test_id, message))
        finding.body.append(f"{kind} {test_id}" + (f" - {message}" if message else ""))
        locations = [f"{m[1]}:{m[2]}" for line in section
                     if (m := _PT_LOCATION.match(line)) and is_project_path(m[1])] or [location]
        finding.locations.extend(locations)
        if any(locations):
            finding.body.append("  at " + ", ".join(dict.fromkeys(locations[-3:])))
        finding.body.extend("  E " + e for e in errors[:4] if e != message)
    if final:
        finding.body.append(final)
    finding.unloaded = [name for name, _ in uncollected]
    usage = next((line for line in lines if line.startswith("ERROR: ")), None)   # bad arguments, missing path
    if not finding.ids and usage:
        finding.headline, finding.ids = f"pytest {usage}", [stable(usage)]
        finding.body.insert(0, usage)
    elif not finding.ids:
        no_tests = bool(final and final.startswith("no tests ran"))
        finding.headline = "no tests ran" if no_tests else f"pytest: {final}"
        finding.ids.append("no tests ran" if no_tests else "pytest failed")
    elif len(uncollected) == len(finding.ids):
        error = uncollected[0][1]
        names = ", ".join(name for name, _ in uncollected)
        finding.headline = f"pytest could not collect {names}" + (f": {error}" if error else "")
    else:
        finding.headline = tests_headline(finding.ids)
    return finding


# -- doctest -----------------------------------------------------------------------------------
_DOCTEST_HEAD = re.compile(r'^File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)$')


def _doctest_mismatch(block: list[str]) -> list[str]:
    """"Expected: 2, got: 1" from a doctest report's Expected:/Got: blocks."""
    text = "\n".join(block)
    m = re.search(r"^Expected:\n((?:    .*\n?)+)Got:\n((?:    .*\n?)*)", text, re.MULTILINE)
    if not m:
        m2 = re.search(r"^Exception raised:\n(?:    .*\n)*?    (\w[\w.]*(?:Error|Exception)\b.*)$", text, re.MULTILINE)
        return [m2[1].strip()] if m2 else []
    expected = " ".join(m[1].split())
    got = " ".join(m[2].split()) or "nothing"
    return [f"expected {expected}, got {got}"]


def parse_doctest(lines: list[str]) -> Finding | None:
    """``python -m doctest`` (and ``doctest.testmod()``) reports: one block per failing example."""
    heads = [i for i, line in enumerate(lines) if _DOCTEST_HEAD.match(line)
             and i + 1 < len(lines) and lines[i + 1].startswith("Failed example:")]
    if not heads:
        return None
    finding = Finding(headline="", is_test_run=True)
    for n, start in enumerate(heads):
        m = _DOCTEST_HEAD.match(lines[start])
        assert m is not None
        end = heads[n + 1] if n + 1 < len(heads) else len(lines)
        block = lines[start + 1: end]
        example = block[1].strip() if len(block) > 1 else ""
        test_id = f"{m['name']}: {example}" if example else m["name"]
        if test_id in finding.ids:
            continue
        mismatch = _doctest_mismatch(block)
        finding.ids.append(test_id)
        finding.locations.append(f"{m['path']}:{m['line']}")
        finding.body.append(f"FAILED {test_id}" + (f" - {mismatch[0]}" if mismatch else ""))
        finding.body.append(f"  at {m['path']}:{m['line']}")
    finding.headline = tests_headline(finding.ids, "doctest example")
    return finding


# -- unittest -----------------------------------------------------------------------------------
_UT_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([\w.]+)\)(.*)$")
_UT_RAN = re.compile(r"^Ran (\d+) tests? in ")
_UT_RULE = re.compile(r"^(?:={20,}|-{20,})$")


def parse_unittest(lines: list[str]) -> Finding | None:
    ran = next((int(m[1]) for line in lines if (m := _UT_RAN.match(line))), None)
    heads = [i for i, line in enumerate(lines) if _UT_HEAD.match(line)]
    tail = next((line for line in reversed(lines) if line.startswith(("FAILED (", "NO TESTS RAN"))), None)
    if not heads and (ran is None or (ran > 0 and tail is None)):
        return None     # no report, or a passing one: whatever failed afterwards is someone else's
    finding = Finding(headline="", is_test_run=True)
    for start in heads:
        head = _UT_HEAD.match(lines[start])
        assert head is not None
        kind, name, where, extra = head[1], head[2], head[3], head[4].strip()
        test_id = where if where.endswith("." + name) else f"{where}.{name}"
        test_id += f" {extra}" if extra else ""        # a subTest's parameters, e.g. "(i=2)"
        end = next((j for j in range(start + 2, len(lines)) if _UT_RULE.match(lines[j])), len(lines))
        block = lines[start + 1: end]
        tb_start = next((j for j, line in enumerate(block) if line.strip() == _TB_HEADER), None)
        parsed = read_traceback(block, tb_start) if tb_start is not None else None
        if test_id in finding.ids:
            continue  # a second report of the same test (e.g. setUpClass and the test itself)
        finding.ids.append(test_id)
        if parsed is None:
            finding.body.append(f"{kind}: {test_id}")
            continue
        tb = parsed[0]
        finding.body.append(f"{kind}: {test_id} - {tb.exception}")
        finding.body.extend("    " + line.strip() for line in tb.after[:3] if line.strip())
        if tb.culprit:
            finding.locations.append(tb.culprit.location)
            finding.body.append(_frame_line(tb.culprit))
    if ran is not None:
        finding.body.append(f"Ran {ran} tests" + (f": {tail}" if tail else ""))
    if not finding.ids:
        no_tests = ran == 0 or tail == "NO TESTS RAN"
        finding.ids.append("no tests ran" if no_tests else "unittest failed")
        finding.headline = "no tests ran" if no_tests else f"unittest: {tail or 'failed'}"
    else:
        finding.headline = tests_headline(finding.ids)
    return finding
