"""Makefile targets that verify: test/tests/check (test), lint (static), typecheck (types).

A project that wraps its checks in make targets has said how it wants them run, so these are
planned with source "makefile" and take precedence over inferred commands of the same category
(see keel.verify.detect). Target names are read from rule lines, not guessed from .PHONY alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from keel.verify.detect.common import Findings, read_text
from keel.verify.plan import Category

_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")   # the order make itself tries them
# `name other: deps` but not `VAR := value`, `VAR ::= value`, recipe lines (tab) or pattern rules.
_RULE = re.compile(r"^([A-Za-z0-9_.\-/ ]+?)\s*::?(?![=:])", re.MULTILINE)
TARGET_CATEGORIES: dict[str, Category] = {
    "lint": "static", "typecheck": "types", "type-check": "types", "mypy": "types",
    "test": "test", "tests": "test", "check": "test",
}


def makefile_targets(text: str) -> list[str]:
    """Target names defined by rules in ``text``, in order of first definition."""
    names: list[str] = []
    for match in _RULE.finditer(text):
        for name in match.group(1).split():
            if name not in names:
                names.append(name)
    return names


def detect_makefile(workspace: Path, found: Findings) -> None:
    name = next((n for n in _MAKEFILES if (workspace / n).is_file()), None)
    if name is None:
        return
    targets = makefile_targets(read_text(workspace / name) or "")
    wanted = [t for t in targets if t in TARGET_CATEGORIES]
    if not wanted:
        return
    make_at = found.which("make")
    # `check` conventionally runs the tests (GNU); with a `test` target too, it would run them twice.
    if "check" in wanted and ("test" in wanted or "tests" in wanted):
        wanted.remove("check")
    for target in wanted:
        category = TARGET_CATEGORIES[target]
        why = f"{name} has a `{target}` target"
        if make_at:
            found.plan(category, f"make {target}", f"{why}; make found at {make_at}", source="makefile")
        else:
            found.skip(category, f"make {target}", f"{why}, but make is not installed", "makefile")
