"""The first failing assertion in a check's output: its source line and the error, in a few lines.

Pure: the output (and the texts of the test files at hand) in, a short text out. Used where keel
points the model at what fails (keel.verify.redirect): a 1.5B model acted on one named line where
a page of test output did not move it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from keel.verify.selfcheck import is_test_file

MAX_ERROR_LINES = 3        # of the failure's message, after the failing line itself
MAX_LINE_CHARS = 200


@dataclass(frozen=True)
class Failure:
    """One failing test as a check's output shows it."""

    path: str = ""                  # the file of the failing line, as the output names it ("" unknown)
    line: int = 0                   # 1-based, 0 unknown
    code: str = ""                  # that line's source, when the output shows it
    error: tuple[str, ...] = ()     # the error's message, first line first


def failing_assertion(output: str, sources: Mapping[str, str] | None = None) -> str:
    """The first failing assertion in ``output`` (pytest, unittest or other Python tracebacks,
    ``node --test`` in TAP or spec form, or keel's own failure summary): its source line, then the
    error in a few lines; "" when none is found. A failure in one of ``sources`` (workspace path →
    text, the test file at hand) comes first, and its text supplies a line the output does not show."""
    found = failures(output)
    if not found:
        return ""
    sources = sources or {}
    chosen = next((f for f in found if _source_of(f.path, sources) is not None), found[0])
    code = chosen.code
    if not code and (text := _source_of(chosen.path, sources)) is not None and chosen.line > 0:
        code = (text.splitlines()[chosen.line - 1:chosen.line] or [""])[0].strip()
    lines = [code] if code else []
    lines += [e for e in chosen.error if e][:MAX_ERROR_LINES]
    return "\n".join(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 1] + "…" for line in lines)


def failures(output: str) -> list[Failure]:
    """The failing tests in ``output``, in the order it reports them, from the first format that finds any."""
    lines = output.splitlines()
    for parse in (_pytest_failures, _tap_failures, _spec_failures, _traceback_failures, _summary_failures):
        if found := parse(lines):
            return found
    return []


def _source_of(path: str, sources: Mapping[str, str]) -> str | None:
    if not path:
        return None
    return next((text for key, text in sources.items()
                 if path == key or path.endswith("/" + key) or key.endswith("/" + path)), None)


_PT_BANNER = re.compile(r"^={3,} (FAILURES|ERRORS) ={3,}$")
_PT_OTHER = re.compile(r"^={3,} .+ ={3,}$")
_PT_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PT_LOCATION = re.compile(r"^(\S+?\.py):(\d+):(?: in \S+| (\w[\w.]*))?\s*$")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failure|Failed|Interrupt)\b")


def _pytest_failures(lines: list[str]) -> list[Failure]:
    sections: list[list[str]] = []
    inside = False                    # in the FAILURES or ERRORS part
    current: list[str] | None = None  # the section being read
    for line in lines:
        if _PT_BANNER.match(line):
            inside, current = True, None
        elif _PT_OTHER.match(line):
            inside, current = False, None
        elif inside and _PT_SECTION.match(line):
            current = []
            sections.append(current)
        elif current is not None:
            current.append(line)
    return [_pytest_section(body) for body in sections]


def _pytest_section(body: list[str]) -> Failure:
    """One frame per ``file:line:`` line: --tb=long shows its line before it after ">", --tb=short
    indented after it. The frame in a test file is the one to show (an import error starts in importlib)."""
    frames: list[tuple[str, int, str]] = []
    pending, exception = "", ""
    errors: list[str] = []
    for i, text in enumerate(body):
        if text.startswith(">"):
            pending = pending or text[1:].strip()
        elif text.startswith("E ") or text == "E":
            errors.append(text[1:].strip())
        elif m := _PT_LOCATION.match(text):
            nxt = body[i + 1] if i + 1 < len(body) else ""
            frames.append((m[1], int(m[2]), pending or (nxt.strip() if nxt.startswith("    ") else "")))
            pending, exception = "", m[3] or exception
    path, line, code = next((f for f in frames if is_test_file(f[0])), frames[0] if frames else ("", 0, pending))
    errors = [e for e in errors if e]
    # a long report (an import error's traceback) ends with the error itself: start there
    later = [i for i, e in enumerate(errors) if i and _EXCEPTION.match(e)]
    if len(errors) > MAX_ERROR_LINES and later:
        errors = errors[later[-1]:]
    if errors and not _EXCEPTION.match(errors[0]):
        kind = exception or ("AssertionError" if errors[0].startswith("assert") else "")
        errors[0] = f"{kind}: {errors[0]}" if kind else errors[0]
    return Failure(path, line, code, tuple(errors))


_TAP_NOT_OK = re.compile(r"^\s*not ok \d+\b")
_YAML_KEY = re.compile(r"^\s*(\w+): ?(.*)$")
_JS_FRAME = re.compile(r"\(?((?:file://)?[^()\s]+?):(\d+):\d+\)?$")


def _tap_failures(lines: list[str]) -> list[Failure]:
    out = []
    for i, line in enumerate(lines):
        if not _TAP_NOT_OK.match(line) or i + 1 >= len(lines) or lines[i + 1].strip() != "---":
            continue
        block = _yaml_block(lines, i + 2)
        if "subtestsFailed" in "".join(block.get("failureType", [])):
            continue   # a suite whose tests failed: they are reported on their own
        name = "".join(block.get("name", [])).strip("'\"") or "Error"
        message = " ".join(m.strip("'\"") for m in block.get("error", []) if m.strip())
        path, line_no = _js_location(block.get("stack", []) or block.get("location", []))
        out.append(Failure(path, line_no, "", (f"{name}: {message}" if message else name,)))
    return out


def _yaml_block(lines: list[str], start: int) -> dict[str, list[str]]:
    """node's TAP diagnostics: ``key: value`` or ``key: |-`` and more-indented lines, until ``...``."""
    block: dict[str, list[str]] = {}
    indent, key = None, ""
    for line in lines[start:]:
        if line.strip() == "...":
            break
        width = len(line) - len(line.lstrip())
        if (indent is None or width <= indent) and (m := _YAML_KEY.match(line)):
            indent, key = width, m[1]
            block[key] = [] if m[2] in ("|-", "|", ">-", ">") else [m[2]]
        elif key:
            block[key].append(line.strip())
    return block


def _js_location(stack: list[str]) -> tuple[str, int]:
    """The first frame of the test's own code (not node's internals), as (path, line)."""
    frames = [(m[1].removeprefix("file://"), int(m[2])) for s in stack if (m := _JS_FRAME.search(s.strip("'\" ")))]
    own = [f for f in frames if not f[0].startswith(("node:", "internal/"))]
    tests = [f for f in own if is_test_file(f[0])]
    return (tests or own or [("", 0)])[0]


_SPEC_FAILED = re.compile(r"^\s*✖ (?!failing tests:)(.+?)(?: \([\d.]+m?s\))?$")
_JS_ERROR = re.compile(r"^\s*([A-Za-z_$][\w$.]*)(?: \[\w+\])?: (.*)$")


def _spec_failures(lines: list[str]) -> list[Failure]:
    out, seen = [], set()
    for i, line in enumerate(lines):
        if not _SPEC_FAILED.match(line):
            continue
        body = lines[i + 1:i + 40]
        first = next((t for t in body if t.strip()), "")
        if (m := _JS_ERROR.match(first)) is None:
            continue   # a suite's line, or the end of the list
        message = [m[2].strip()]
        for text in body[body.index(first) + 1:]:
            if text.strip().startswith("at ") or _SPEC_FAILED.match(text):
                break
            message.append(text.strip())
        stack = [t.strip() for t in body if t.strip().startswith("at ")][:10]
        path, line_no = _js_location(stack)
        failure = Failure(path, line_no, "", (f"{m[1]}: {' '.join(p for p in message if p)}",))
        if failure not in seen:   # the spec reporter lists each failure twice
            seen.add(failure)
            out.append(failure)
    return out


def _traceback_failures(lines: list[str]) -> list[Failure]:
    from keel.outputs.failure_parsers.python import find_tracebacks

    out = []
    for tb in find_tracebacks(lines):
        frames = [f for f in tb.frames if is_test_file(f.path)] or list(tb.frames[:1])
        frame = frames[-1]
        out.append(Failure(frame.path, frame.line, frame.code, (tb.exception, *tb.after)))
    return out


_SUMMARY_FAILED = re.compile(r"^\s*(?:FAILED|ERROR|FAIL|✖|✗)\s+\S.*?(?: - (.*))?$")
_SUMMARY_AT = re.compile(r"^\s*at ([^\s,:]+):(\d+)")


def _summary_failures(lines: list[str]) -> list[Failure]:
    """keel's own summary (keel.outputs): ``FAILED id - message``, then ``at file:line`` and ``E`` lines."""
    out = []
    for i, line in enumerate(lines):
        if (m := _SUMMARY_FAILED.match(line)) is None:
            continue
        errors = [m[1].strip()] if m[1] else []
        path, line_no = "", 0
        for text in lines[i + 1:i + 6]:
            if _SUMMARY_FAILED.match(text):
                break
            if (at := _SUMMARY_AT.match(text)) and not path:
                path, line_no = at[1], int(at[2])
            elif text.strip().startswith("E "):
                errors.append(text.strip()[1:].strip())
        if errors and errors[0].startswith("assert "):
            errors[0] = "AssertionError: " + errors[0]
        out.append(Failure(path, line_no, "", tuple(errors)))
    return out
