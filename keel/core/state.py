"""Task state the stop decider reads: todos, files changed, verification evidence, counters.

The runner updates it from tool results; the decider only reads it. Every change bumps a
sequence number so "a check passed after the last file change" is a comparison of integers.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from keel.core.request import Request, parse_request

TodoStatus = Literal["pending", "in_progress", "done"]


@dataclass(frozen=True)
class Todo:
    content: str
    status: TodoStatus


@dataclass(frozen=True)
class CheckEvidence:
    command: str
    exit_code: int | None
    kind: str
    seq: int
    tests_ran: int | None = None     # tests the output says ran; None: not a test runner keel reads
    deselected: int = 0
    whole_suite: bool = False        # no selection: not `-k`, not one file

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def _names_any(command: str, paths: list[str]) -> bool:
    """Does ``command`` mention one of ``paths`` — by path, file name or module name?"""
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0]
        if path in command or name in command or (len(stem) > 1 and re.search(rf"\b{re.escape(stem)}\b", command)):
            return True
    return False


def _whole_run(check: CheckEvidence) -> bool:
    """A test runner's run of the whole suite in which at least one test ran and none was deselected."""
    return check.whole_suite and (check.tests_ran or 0) >= 1 and not check.deselected


@dataclass
class TaskState:
    task: str = ""                     # the user's request, restated in sharper pushback
    todos: list[Todo] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    checks: list[CheckEvidence] = field(default_factory=list)
    seq: int = 0
    last_change_seq: int = -1
    tool_calls_total: int = 0
    # stop-decider bookkeeping (updated by the runner from each Decision)
    pushback_counts: Counter[str] = field(default_factory=Counter)
    pushback_streak: int = 0           # pushbacks since the last turn that made progress
    repetition_strikes: int = 0        # the most times one (call, result) pair was refused
    idle_turns: int = 0                # turns in a row that made no progress
    # the verification gate: on when the runner has a verifier; repair rounds spent per category
    gate_on: bool = False
    # the tools the model is offered (set by the runner), so pushback names only those; empty: unknown
    tools: frozenset[str] = frozenset()
    # the run's tools cannot change the workspace (a read-only sub-agent): whatever the request says,
    # the run ends with an answer in words, and is judged as one
    read_only: bool = False
    repair_rounds: Counter[str] = field(default_factory=Counter)
    # the summary of a claim the gate passed and the contract review held (it stands if a limit comes first)
    reviewed: str | None = None

    @property
    def request(self) -> Request:
        """The task as keel reads it (keel.core.request; parsed once per text)."""
        return parse_request(self.task)

    @property
    def answers(self) -> bool:
        """The run is finished by an answer in words: the request asks for one, or the run cannot change files."""
        return self.read_only or self.request.answer_only

    # -- updates ------------------------------------------------------------------------------
    def record_tool_call(self) -> None:
        self.tool_calls_total += 1
        self.seq += 1

    def record_file_change(self, path: str) -> None:
        self.seq += 1
        self.last_change_seq = self.seq
        if path not in self.files_changed:
            self.files_changed.append(path)

    def record_check(self, command: str, exit_code: int | None, kind: str, *, tests_ran: int | None = None,
                     deselected: int = 0, whole_suite: bool = False) -> None:
        self.seq += 1
        self.checks.append(CheckEvidence(command, exit_code, kind, self.seq, tests_ran, deselected, whole_suite))

    def set_todos(self, todos: list[Todo]) -> None:
        self.todos = list(todos)

    # -- queries ------------------------------------------------------------------------------
    def unfinished_todos(self) -> list[Todo]:
        return [t for t in self.todos if t.status != "done"]

    def checks_since_last_change(self) -> list[CheckEvidence]:
        return [c for c in self.checks if c.seq > self.last_change_seq]

    def fresh_verification(self, *, exercising_changes: bool = False) -> bool:
        """A check passed after the last file change, and the latest run of each kind since passed.

        ``exercising_changes``: the passing check must also name a changed file or its module
        (`python hello.py`, `python -c "import calc; …"`), or be a whole run of the test runner (see
        ``fresh_test_run``: `pytest -k x` or one test file is a corner of the suite). Where the project
        has no checks of its own, that is the only evidence there is; `python -c "print('all good')"` is
        the model's word."""
        recent = self.checks_since_last_change()
        passing = [c for c in recent if c.passed]
        if exercising_changes:
            passing = [c for c in passing if (_whole_run(c) if c.kind == "test" else
                                              _names_any(c.command, self.files_changed))]
        if not passing:
            return False
        latest_by_kind: dict[str, CheckEvidence] = {}
        for c in recent:
            latest_by_kind[c.kind] = c
        return all(c.passed for c in latest_by_kind.values())

    def fresh_test_run(self) -> bool:
        """The agent's own whole run of the project's test runner since the last change passed: it
        exited 0, at least one test ran and none was deselected (keel issue 32: where keel finds no
        check to run, that is the evidence; `pytest -k x`, one test file or "no tests ran" is not)."""
        runs = [c for c in self.checks_since_last_change() if c.kind == "test"]
        return bool(runs) and runs[-1].passed and _whole_run(runs[-1])

    def failing_checks_since_last_change(self) -> list[CheckEvidence]:
        latest: dict[str, CheckEvidence] = {}
        for c in self.checks_since_last_change():
            latest[c.kind] = c
        return [c for c in latest.values() if not c.passed]
