"""Shared pieces of check detection: the findings accumulator, tool lookup, and file reading.

Every ecosystem detector is a function ``(workspace, found: Findings) -> None`` that reads files and
records planned checks, skipped checks and hints. Nothing here runs a command except the optional
module probe in keel.verify.detect.python; tool presence comes from a ``which`` callable so tests can
decide what is "installed".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from keel.policy.cmdenv import with_own_bin
from keel.verify.plan import Category, PlannedCheck, SkippedCheck, Source

Which = Callable[[str], "str | None"]

# Tool directories inside a workspace, searched before PATH: a project's own pinned tools win.
WORKSPACE_BIN_DIRS = (".venv/bin", "venv/bin", "node_modules/.bin")

MAX_READ_BYTES = 512_000   # config files larger than this are not config files worth parsing


def workspace_which(workspace: Path) -> Which:
    """``shutil.which`` that looks in the workspace's own tool directories first, then on the PATH
    commands get (keel's own bin directory last, keel.policy.cmdenv.with_own_bin).

    A hit inside the workspace is returned as a path relative to it (``.venv/bin/ruff``), because
    that is how the command must be spelled: the sandboxed shell's PATH does not include it."""

    def which(name: str) -> str | None:
        for rel in WORKSPACE_BIN_DIRS:
            candidate = workspace / rel / name
            if candidate.is_file() and shutil.which(str(candidate)):
                return f"{rel}/{name}"
        path = os.environ.get("PATH")
        return shutil.which(name, path=with_own_bin(path) if path else None)

    return which


def read_text(path: Path) -> str | None:
    """The file's text, or None when it is missing, unreadable, binary or too big."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_READ_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def command_path(found_at: str, name: str) -> str:
    """How to spell a tool in a command: by its relative path when it lives in the workspace."""
    return found_at if not found_at.startswith("/") else name


@dataclass
class Findings:
    """What the detectors found, before dedupe and precedence (see keel.verify.detect)."""

    workspace: Path
    which: Which
    checks: list[PlannedCheck] = field(default_factory=list)
    # Each skip with the source that asked for it, so precedence can treat it like a planned check.
    skipped: list[tuple[Source, SkippedCheck]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)

    def plan(self, category: Category, command: str, reason: str, source: Source = "inferred",
             protects: tuple[str, ...] = ()) -> None:
        self.checks.append(PlannedCheck(category=category, command=command, reason=reason, source=source,
                                        protects=protects))

    def skip(self, category: Category, command: str, note: str, source: Source = "inferred") -> None:
        self.skipped.append((source, SkippedCheck(category=category, command=command, note=note)))

    def hint(self, text: str) -> None:
        if text not in self.hints:
            self.hints.append(text)

    def tool(self, category: Category, tool: str, args: str, why: str, source: Source = "inferred") -> bool:
        """Plan ``tool args`` when ``tool`` is installed, else skip it with a note. True if planned.

        ``why`` is the project evidence ("pyproject.toml has [tool.ruff]"); the reason adds where
        the tool was found, so `keel checks` shows both halves of the decision."""
        found_at = self.which(tool)
        command = f"{tool} {args}".strip()
        if not found_at:
            self.skip(category, command, f"{why}, but {tool} is not installed", source)
            return False
        spelled = f"{command_path(found_at, tool)} {args}".strip()
        self.plan(category, spelled, f"{why}; {tool} found at {found_at}", source)
        return True
