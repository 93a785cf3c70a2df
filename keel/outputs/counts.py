"""How many tests a test runner's output says ran, passed, failed and were left out.

Why: a test run that exits 0 is evidence only when tests ran. pytest with nothing collected exits 5,
but `pytest -k nomatch` deselects everything and `pytest tests/test_one.py` runs a corner of the suite;
unittest with nothing to discover says "Ran 0 tests" and exits 0 (keel issue 32: where keel found no
plan, the agent's own run of the test runner is the evidence, and only a whole run of at least one test
counts). And a run that fails the way it failed before the agent started still shows whether the tests
that do pass include any at all.

Pure: the output in, ``RunCounts`` or None (not a test runner's output keel knows) out. Linear in the
output: each line is matched at its start once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class RunCounts:
    passed: int = 0
    failed: int = 0          # failures and errors
    deselected: int = 0      # left out by a selection (-k, -m, --deselect)
    skipped: int = 0

    @property
    def ran(self) -> int:
        return self.passed + self.failed


_PYTEST_FINAL = re.compile(r"^=*\s*(?P<body>(?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|"
                           r"deselected|selected)(?:, )?)+) in [\d.]+s\b|^=*\s*no tests ran\b")
_PYTEST_PART = re.compile(r"(\d+) (failed|passed|errors?|skipped|xfailed|xpassed|deselected)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ")
_UNITTEST_FAILED = re.compile(r"^FAILED \((.*)\)")
_UNITTEST_PART = re.compile(r"(failures|errors|skipped)=(\d+)")
_JEST = re.compile(r"^Tests:\s+(.*?)(\d+) total")
_JEST_PART = re.compile(r"(\d+) (failed|passed|skipped|todo)")
_VITEST = re.compile(r"^\s*Tests\s+(.*)\((\d+)\)")
_TAP = re.compile(r"^# (pass|fail|skipped|tests)\s+(\d+)")
_MOCHA = re.compile(r"^\s*(\d+) (passing|failing|pending)\b")
_CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
_GO = re.compile(r"^(?:--- (PASS|FAIL)|(ok|FAIL)\s+\S+)")


def run_counts(output: str) -> RunCounts | None:
    """The counts of the run's summary (the last one a known runner printed), or None."""
    lines = [line.rstrip() for line in output.splitlines()]
    unittest_ran = next((int(m.group(1)) for ln in reversed(lines) if (m := _UNITTEST_RAN.match(ln))), None)
    if unittest_ran is not None:   # "Ran 5 tests in 0.1s" then "OK" or "FAILED (failures=2, errors=1)"
        bad = next((_unittest_failed(m.group(1)) for ln in reversed(lines) if (m := _UNITTEST_FAILED.match(ln))),
                   (0, 0))
        return RunCounts(passed=max(unittest_ran - bad[0] - bad[1], 0), failed=bad[0], skipped=bad[1])
    tap = {k: int(v) for ln in lines if (m := _TAP.match(ln)) for k, v in [m.groups()]}
    if "pass" in tap or "fail" in tap:
        return RunCounts(passed=tap.get("pass", 0), failed=tap.get("fail", 0), skipped=tap.get("skipped", 0))
    mocha = {k: int(v) for ln in lines if (m := _MOCHA.match(ln)) for v, k in [m.groups()]}
    if "passing" in mocha or "failing" in mocha:
        return RunCounts(passed=mocha.get("passing", 0), failed=mocha.get("failing", 0),
                          skipped=mocha.get("pending", 0))
    found = next((c for ln in reversed(lines) if (c := _summary_line(ln)) is not None), None)
    if found is None:
        go = [m for ln in lines if (m := _GO.match(ln))]
        passed = sum(1 for m in go if m.group(1) == "PASS" or m.group(2) == "ok")
        found = RunCounts(passed=passed, failed=len(go) - passed) if go else None
    return found


def _unittest_failed(body: str) -> tuple[int, int]:
    parts = {k: int(v) for k, v in _UNITTEST_PART.findall(body)}
    return parts.get("failures", 0) + parts.get("errors", 0), parts.get("skipped", 0)


def _summary_line(line: str) -> RunCounts | None:
    if (m := _PYTEST_FINAL.match(line)) is not None:
        parts: dict[str, int] = {}
        for n, kind in _PYTEST_PART.findall(m.group("body") or ""):
            key = "error" if kind.startswith("error") else kind
            parts[key] = parts.get(key, 0) + int(n)
        return RunCounts(passed=parts.get("passed", 0) + parts.get("xpassed", 0),
                          failed=parts.get("failed", 0) + parts.get("error", 0),
                          deselected=parts.get("deselected", 0), skipped=parts.get("skipped", 0))
    if (m := _JEST.match(line)) is not None or (m := _VITEST.match(line)) is not None:
        parts = {kind: int(n) for n, kind in _JEST_PART.findall(m.group(1))}
        return RunCounts(passed=parts.get("passed", 0), failed=parts.get("failed", 0),
                          skipped=parts.get("skipped", 0) + parts.get("todo", 0))
    if (m := _CARGO.match(line)) is not None:
        return RunCounts(passed=int(m.group(1)), failed=int(m.group(2)), skipped=int(m.group(3)))
    return None
