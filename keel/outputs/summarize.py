"""Turn a failed check's output into a short summary the model can act on — never the whole log.

Pure functions. The format is recognised from the output itself, not the command (``make test``
and ``npm test`` can run anything): test runners first (pytest, unittest, doctest, node's runner
in TAP or spec form, jest, vitest, mocha, go test, cargo test); when none recognises the output,
linter / type-checker / compiler diagnostics and Python tracebacks; then make's error line; then a
generic fallback (the first lines that mention an error, else the last lines).

``failing_tests`` holds stable ids of what failed, so a run can be compared with a baseline run:
test ids as the runner names them (``test_app.py::test_load``, ``mod.Class.test_x``, ``TestX/sub``),
``path: message`` for diagnostics (no line numbers: they move when lines are added above), and one
id for the whole failure when nothing finer is recognisable (``settings.py: KeyError: 'port'``,
``timed out``, ``command not found: foo``). A failed check always has at least one id, so "no new
ids" really means "fails the same way as before".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from keel.outputs.failure_parsers.common import Finding, clean_lines, clip, stable, unique
from keel.outputs.failure_parsers.diagnostics import parse_diagnostics
from keel.outputs.failure_parsers.javascript import parse_jest_vitest, parse_mocha, parse_node_spec, parse_tap
from keel.outputs.failure_parsers.native import parse_cargo_test, parse_go_test, parse_make
from keel.outputs.failure_parsers.python import parse_doctest, parse_pytest, parse_traceback, parse_unittest

Parser = Callable[[list[str]], Finding | None]

# Order matters only for the order of a combined summary; a test runner's finding suppresses the
# others, because its report already contains the tracebacks and file:line locations.
_PARSERS: tuple[Parser, ...] = (parse_pytest, parse_unittest, parse_doctest, parse_tap, parse_node_spec, parse_jest_vitest,
                                parse_mocha, parse_cargo_test, parse_diagnostics, parse_go_test, parse_traceback)

# "bash: line 1: foo: command not found", "sh: 1: foo: not found", "zsh: command not found: foo"
_NOT_FOUND = re.compile(r"(?:^|: )([^\s:]+): (?:command )?not found\s*$|command not found: (\S+)\s*$")
_NO_SUCH_FILE = re.compile(r"(?:^|: )([^\s:]+): No such file or directory\s*$")
# Matched against the lowercased line: re.IGNORECASE makes this alternation several times slower.
_ERRORISH = re.compile(r"\b(?:errors?|fail(?:ed|ure|ures|s)?|exception|traceback|fatal|panic(?:ked)?|"
                       r"cannot|can't|denied|undefined|not found|abort(?:ed)?|segmentation fault)\b")
_NOT_ERRORISH = re.compile(r"\b0 (?:errors?|failures?|failed)\b|\bno errors?\b")
_TAIL_LINES = 10


@dataclass(frozen=True)
class FailureSummary:
    headline: str                          # one line: what failed, e.g. "2 tests failed: a.py::t1, a.py::t2"
    failing_tests: tuple[str, ...] = ()    # stable ids of what failed (see the module docstring)
    locations: tuple[str, ...] = ()        # "file:line", project files first-seen first
    lines: tuple[str, ...] = ()            # the body: names, assertion messages, file:line, first errors
    unloaded: tuple[str, ...] = ()         # test files the runner could not load: none of their tests ran
    details: tuple[tuple[str, str], ...] = ()   # (test id, what the runner printed for it), where it printed any

    def text(self) -> str:
        return "\n".join([self.headline, *("  " + line for line in self.lines)])


def summarize_failure(command: str, output: str, exit_code: int | None, *, timed_out: bool = False,
                      max_lines: int = 25, workspace: str | None = None) -> FailureSummary:
    """Summarise one failed check. ``workspace`` (optional) is stripped from absolute paths, so
    locations read ``settings.py:3`` rather than ``/home/me/proj/settings.py:3``."""
    lines = clean_lines(_relativize(output, workspace))
    findings = [f for parse in _PARSERS if (f := parse(lines)) is not None]
    findings = [f for f in findings if f.is_test_run] or findings
    if not findings and (missing := _command_not_found(command, lines, exit_code)):
        findings = [missing]
    if not findings and not timed_out:
        findings = [parse_make(lines) or _generic(lines, exit_code)]
    if timed_out:
        # What the partial output shows (e.g. tests that failed before the hang) follows the headline.
        tail = [] if findings else [f"last output: {line.strip()}" for line in lines if line.strip()][-3:]
        findings = [Finding(headline="timed out", ids=["timed out"], body=tail), *findings]
    return _combine(findings, max_lines)


def summarize_missing_output(command: str, output: str, expected: str, *, max_lines: int = 25) -> FailureSummary:
    """A check that exited 0 without printing what the task requires (e.g. "prints OK")."""
    lines = [line for line in clean_lines(output) if line.strip()]
    shown = lines[-_TAIL_LINES:]
    body = [f"`{command}` exited 0, but its output does not contain {expected!r}"]
    body.append("it printed nothing" if not lines else f"last {len(shown)} of {len(lines)} lines printed:")
    body.extend("  " + line for line in shown)
    return FailureSummary(headline=clip(f"exited 0 but did not print {expected!r}"),
                          failing_tests=(stable(f"missing output: {expected}"),),
                          lines=_bounded(body, max_lines))


def failing_ids_new(before: tuple[str, ...] | None, now: tuple[str, ...]) -> tuple[str, ...]:
    """Failure ids in ``now`` that were not failing ``before`` (all of them without a baseline)."""
    if before is None:
        return now
    seen = set(before)
    return tuple(i for i in now if i not in seen)


# -- helpers ---------------------------------------------------------------------------------------
def _relativize(output: str, workspace: str | None) -> str:
    if not workspace:
        return output
    root = workspace.rstrip("/")
    return output.replace(root + "/", "") if root else output


def _command_not_found(command: str, lines: list[str], exit_code: int | None) -> Finding | None:
    for line in lines:
        if "not found" not in line and not (exit_code == 127 and "No such file" in line):
            continue
        m = _NOT_FOUND.search(line) or (_NO_SUCH_FILE.search(line) if exit_code == 127 else None)
        if m and (exit_code == 127 or _NOT_FOUND.search(line)):
            name = m[1] or m[2]
            return Finding(headline=f"command not found: {name}", ids=[f"command not found: {name}"],
                           body=[line.strip(), f"`{name}` is not installed or not on PATH"])
    if exit_code == 127:  # the shell said nothing we recognise: name the command's first word
        name = command.split()[0] if command.split() else "?"
        return Finding(headline=f"command not found: {name} (exit 127)", ids=[f"command not found: {name}"],
                       body=[line.strip() for line in lines if line.strip()][-3:])
    if exit_code == 126:
        return Finding(headline="command not executable (exit 126)", ids=["command not executable"],
                       body=[line.strip() for line in lines if line.strip()][-3:])
    return None


def _generic(lines: list[str], exit_code: int | None) -> Finding:
    status = f"exited {exit_code}" if exit_code is not None else "ended abnormally"
    errorish = [line.rstrip() for line in lines
                if _ERRORISH.search(low := line.lower()) and not _NOT_ERRORISH.search(low)]
    if errorish:
        first = errorish[0].strip()
        return Finding(headline=f"{status}: {first}", ids=[stable(first)], body=errorish)
    tail = [line.rstrip() for line in lines if line.strip()][-_TAIL_LINES:]
    if not tail:
        return Finding(headline=f"{status} with no output", ids=[f"{status} with no output"])
    return Finding(headline=f"{status}; last output: {tail[-1].strip()}", ids=[stable(f"{status}: {tail[-1]}")],
                   body=tail)


def _combine(findings: list[Finding], max_lines: int) -> FailureSummary:
    ids: list[str] = []
    locations: list[str] = []
    body: list[str] = []
    unloaded: list[str] = []
    details: dict[str, str] = {}
    for f in findings:
        ids.extend(f.ids)
        locations.extend(f.locations)
        body.extend(f.body)
        unloaded.extend(f.unloaded)
        details.update((test, "\n".join(lines)) for test, lines in f.details.items() if lines)
    headline = "; ".join(f.headline for f in findings if f.headline) or "failed"
    return FailureSummary(clip(headline), tuple(unique(ids)), tuple(unique(locations)), _bounded(body, max_lines),
                          tuple(unique(unloaded)), tuple(details.items()))


def _bounded(body: list[str], max_lines: int) -> tuple[str, ...]:
    """At most ``max_lines`` lines of at most ~200 characters. When cutting, every unindented line
    (one per failing test or problem) is kept before any indented detail line, in the original order."""
    body = [clip(line) for line in body if line.strip()]
    if len(body) <= max_lines:
        return tuple(body)
    budget = max(1, max_lines - 1)   # room for the "… more" line
    keep = {i for i, line in enumerate(body) if not line.startswith(" ")}
    keep = set(sorted(keep)[:budget])
    for i in range(len(body)):
        if len(keep) >= budget:
            break
        keep.add(i)
    kept = [body[i] for i in sorted(keep)]
    return (*kept, f"… {len(body) - len(kept)} more lines not shown")
