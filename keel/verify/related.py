"""Tests related to a change, so the gate can run them before the whole suite.

A failure in the tests of the files just changed is the most useful feedback and the cheapest to
get; the full suite still runs when they pass. Pure: paths in, paths out.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from keel.verify.selfcheck import is_test_file
from keel.verify.snapshot import FileChange

_PYTEST = re.compile(r"^(?:\S*python[\d.]*\s+-m\s+)?pytest(?:\s+-q)?$")


def narrows_by_path(command: str) -> bool:
    """Commands that accept test paths appended: plain `pytest` / `python -m pytest` runs (with -q)."""
    return bool(_PYTEST.match(" ".join(command.split())))


def related_python_tests(changes: list[FileChange], files: list[str] | set[str] | dict[str, str]) -> list[str]:
    """Test files for the changed Python modules (`test_calc.py`, `calc_test.py`, anywhere in the
    tree), plus changed test files themselves; sorted, existing files only."""
    existing = set(files)
    wanted: set[str] = set()
    stems: set[str] = set()
    for change in changes:
        path = PurePosixPath(change.path)
        if path.suffix != ".py" or change.status == "deleted":
            continue
        if is_test_file(change.path):
            wanted.add(change.path)
        else:
            stems.add(path.stem)
    for candidate in existing:
        name = PurePosixPath(candidate).name
        if any(name in (f"test_{stem}.py", f"{stem}_test.py") for stem in stems):
            wanted.add(candidate)
    return sorted(p for p in wanted if p in existing)
