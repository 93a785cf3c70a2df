"""What every failure parser shares: the Finding they return and small text helpers.

A parser reads the cleaned lines of one check's output and, when it recognises its tool's format,
returns a Finding: the ids of what failed (stable across runs, so a baseline run can be compared),
``file:line`` locations, and a few body lines worth showing. Parsers never see the command: the
output decides which format it is, because `make test` or `npm test` can run anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_WIDTH = 200          # a body line longer than this is cut: minified JS and data dumps say nothing


@dataclass
class Finding:
    """What one parser recognised. Mutable while the parser builds it; summarize freezes it."""

    headline: str
    ids: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    is_test_run: bool = False    # a test runner's report: plain tracebacks inside it are its own
    unloaded: list[str] = field(default_factory=list)   # test files the runner could not load (import failed)
    # what the runner printed for each failing test (its id -> lines): the test's own inputs and expectations
    details: dict[str, list[str]] = field(default_factory=dict)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_HEX_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_DURATION = re.compile(r"(?<!\s)\s*\(\d+(?:\.\d+)?\s*m?s\)\s*$")   # starts at a run's start: linear (issue 22)


def clean_lines(output: str) -> list[str]:
    """Lines without colour codes; a progress line redrawn with '\\r' keeps only its last state."""
    text = _ANSI.sub("", output).replace("\r\n", "\n")
    return [line.rsplit("\r", 1)[-1].rstrip() for line in text.split("\n")]


def clip(line: str, width: int = MAX_WIDTH) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def stable(text: str) -> str:
    """Make an id comparable between runs: no object addresses, no timings, single spaces."""
    text = _HEX_ADDRESS.sub("0x…", text)
    text = _DURATION.sub("", text)
    return " ".join(text.split())


def unique(items: list[str]) -> list[str]:
    """The non-empty items, first occurrence kept, in order."""
    return [item for item in dict.fromkeys(items) if item]


def drop_parents(ids: list[str], separators: tuple[str, ...]) -> list[str]:
    """Remove ids that only failed because a child failed (a suite, a Go parent test)."""
    parents: set[str] = set()
    for test_id in ids:
        for sep in separators:
            parts = test_id.split(sep)
            parents.update(sep.join(parts[:k]) for k in range(1, len(parts)))
    return [i for i in ids if i not in parents]


def tests_headline(ids: list[str], noun: str = "test") -> str:
    shown = ", ".join(ids[:3])
    more = f" (+{len(ids) - 3} more)" if len(ids) > 3 else ""
    plural = noun if len(ids) == 1 else noun + "s"
    return f"{len(ids)} {plural} failed: {shown}{more}"


# Paths that belong to an interpreter or an installed package rather than to the project: a
# traceback's useful frame is the innermost one outside these.
_FOREIGN_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|node_modules|^<|^node:|/usr/lib/|"
                           r"importlib|/rustc/|/\.cargo/registry/|/go/src/|/\.rustup/")


def is_project_path(path: str) -> bool:
    return not _FOREIGN_PATH.search(path)
