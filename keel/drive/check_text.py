"""How change_file words what the project's checks said: the failures for the model and for the
editor request, how badly they fail, and the end of a saved output."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from keel.verify.gate import CheckOutcome

MAX_FAILURE_CHARS = 1500
LOAD_WEIGHT = 1000   # a test file that cannot load weighs more than any count of tests that ran and failed
HANG_WEIGHT = 1000 * LOAD_WEIGHT   # a check that ran past its limit gave no verdict, and costs the limit again


def render_failures(outcomes: Sequence[CheckOutcome]) -> str:
    """The failing checks, with their summaries, cut to MAX_FAILURE_CHARS; "" when all pass."""
    lines = []
    for o in outcomes:
        if o.passed or o.refused:
            continue
        lines.append(f"`{o.check.shown or o.check.command}` " + ("timed out" if o.timed_out else f"fails (exit code {o.exit_code})"))
        lines += ["  " + line for line in o.summary.strip().splitlines() if line.strip()]
    text = "\n".join(lines)
    return text if len(text) <= MAX_FAILURE_CHARS else text[:MAX_FAILURE_CHARS].rstrip() + "\n… (cut)"


def failing_output(outcomes: Sequence[CheckOutcome], saved: Callable[[str], str | None]) -> str:
    """For the edit request: the end of each failing check's own output (``saved(output_path)``, the
    last MAX_FAILURE_CHARS characters from a line start), or its summary when none was saved. The
    raw end of pytest's output is what the measured prompt held (change_request)."""
    texts = []
    for o in outcomes:
        if o.passed or o.refused:
            continue
        raw = saved(o.output_path) if o.output_path else None
        if raw and len(raw) > MAX_FAILURE_CHARS:
            raw = raw[-MAX_FAILURE_CHARS:].split("\n", 1)[-1]
        texts.append((raw or o.summary).strip())
    return "\n\n".join(t for t in texts if t)


def each_failure(outcomes: Sequence[CheckOutcome]) -> list[str]:
    """One entry per failing test: its line as the check's summary words it ("FAILED rle_test.py::test_empty -
    IndexError: …", "✖ adds numbers - 2 !== 3"), or its id where the summary has no line of its own, then
    what the runner printed for that test, where it printed any (CheckOutcome.details: the test's source
    down to the failing line, the error); a test file that could not load is left out (none of its tests
    ran, so none can be picked)."""
    entries = []
    for o in outcomes:
        if o.passed or o.refused:
            continue
        body = [line.strip() for line in o.summary.splitlines()[1:] if line.startswith("  ") and line[2:3] != " "]
        printed = dict(o.details)
        for test in o.failing_tests:
            if test in o.unloaded:
                continue
            line = next((line for line in body if line.split(" - ", 1)[0].split(" ", 1)[-1] == test), test)
            entries.append(f"{line}\n{printed[test]}" if printed.get(test) else line)
    return entries


def failure_score(outcomes: Sequence[CheckOutcome]) -> int:
    """How badly the checks fail: failing tests (at least 1 per failing check), LOAD_WEIGHT for each
    test file that could not be loaded, and HANG_WEIGHT for each check that timed out; 0 when all pass.
    A file that cannot load ran none of its tests: pytest reports it as one error, so a rewrite that
    broke the module's import scored like one failing test, and better than three (measured on the
    1.5B, py-todo-due: ``today=TODAY`` was written). A check cut at its limit names no failing test, so
    it scored 1 too, and a rewrite that loops tied with one that fails a test and was kept first."""
    return sum(HANG_WEIGHT if o.timed_out else
               LOAD_WEIGHT * len(o.unloaded) + max(0 if o.unloaded else 1, len(o.failing_tests) - len(o.unloaded))
               for o in outcomes if not o.passed and not o.refused)


def failing_tests(outcomes: Sequence[CheckOutcome]) -> tuple[str, ...]:
    """The failing tests' names, check by check (what callee_change and put_back compare)."""
    return tuple(t for o in outcomes if o.ran and not o.passed for t in o.failing_tests)


def failing_words(score: int) -> str:
    """A failure score in words: "3 failing", "a test file that cannot load", "2 test files that cannot
    load and 1 failing", "a check that timed out"."""
    hangs, rest = divmod(score, HANG_WEIGHT)
    files, tests = divmod(rest, LOAD_WEIGHT)
    words = [f"{tests} failing"] if tests or not (files or hangs) else []
    if files:
        words.insert(0, "a test file that cannot load" if files == 1 else f"{files} test files that cannot load")
    if hangs:
        words.insert(0, "a check that timed out" if hangs == 1 else f"{hangs} checks that timed out")
    return " and ".join(words)


def against(after: int, before: int) -> str:
    """Two failure scores side by side: "2 failing, 1 before"; "1 failing" again when a file cannot load."""
    return f"{failing_words(after)}, {failing_words(before) if max(after, before) >= LOAD_WEIGHT else before} before"


def render_checks_after(outcomes: Sequence[CheckOutcome]) -> str:
    if not outcomes:
        return ""
    failures = render_failures(outcomes)
    if not failures:
        commands = ", ".join(f"`{o.check.command}`" for o in outcomes if not o.refused)
        return f"The project's checks after this change: {commands} pass. If the task is done, call finish."
    return f"The project's checks after this change:\n{failures}"


def saved_tail(path: str) -> str | None:
    """The end of a saved check output, as much as failing_output keeps: a saved output may be 16 MB
    (keel.context.output.SAVE_MAX_BYTES) and only its last MAX_FAILURE_CHARS characters are used.
    Four bytes per UTF-8 character, plus one partial character cut at the start, give the same
    last MAX_FAILURE_CHARS characters as reading the whole file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4 * (MAX_FAILURE_CHARS + 1)))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
