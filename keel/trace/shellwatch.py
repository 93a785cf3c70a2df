"""What a shell command changed in the workspace, found by comparing a stat scan before and after.

A command cannot be snapshotted before it runs (which files it touches is unknown until it has),
so keel scans the workspace's stat data (size, mtime, inode: no reading) around each run_shell and
hashes only the entries that differ. The scan honours .gitignore and skips caches and
environments, like the verification snapshot. A changed file is undoable when keel holds its
earlier bytes (it read or wrote them in this session); a file the command created is undoable by
removal; anything else is reported as not undoable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.tools.base import Tool, ToolContext, ToolResult
from keel.tools.ignore import IgnoreRules
from keel.trace.checkpoints import UNKNOWN, Change, CheckpointStore, stat_key
from keel.verify.snapshot import EXTRA_SKIPPED_DIRS

StatMap = dict[str, tuple[int, int, int]]
SCAN_BUDGET_S = 1.5   # a workspace whose stat scan takes longer is not watched (about 50k files)


def scan(workspace: Path) -> StatMap:
    rules = IgnoreRules(workspace)
    root = rules.root
    prefix = len(root.rstrip("/")) + 1

    def skip_extra(entry: os.DirEntry[str], is_dir: bool) -> bool | None:
        return False if is_dir and entry.name in EXTRA_SKIPPED_DIRS else None

    out: StatMap = {}
    for entry in rules.walk_files(root, skip_extra):
        try:
            out[entry.path[prefix:]] = stat_key(entry.stat(follow_symlinks=False))
        except OSError:
            continue
    return out


def diff(before: StatMap, after: StatMap) -> list[tuple[str, str]]:
    """(path, "added" | "modified" | "deleted"), sorted by path."""
    out = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        out.append((path, "added" if old is None else "deleted" if new is None else "modified"))
    return out


class ShellWatch:
    def __init__(self, store: CheckpointStore, emit: Callable[..., Any]) -> None:
        self.store, self.emit = store, emit
        self.enabled = True

    def wrap(self, tool: Tool) -> Tool:
        def execute(args: Any, ctx: ToolContext) -> ToolResult:
            if not self.enabled:
                return tool.execute(args, ctx)
            started = time.monotonic()
            before = scan(self.store.workspace)
            if (took := time.monotonic() - started) > SCAN_BUDGET_S:
                # two scans per command would slow every command down: stop watching this workspace
                self.enabled = False
                self.emit("workspace_watch", step=self.store.step, enabled=False, files=len(before),
                          scan_s=round(took, 2), note="the workspace is too large to scan around every "
                          "command; what shell commands change is not tracked (or undoable) in this session")
                return tool.execute(args, ctx)
            result: ToolResult | None = None
            try:
                result = tool.execute(args, ctx)
                return result
            finally:  # also when interrupted: what the command changed so far is still recorded
                changes = self.record(before, scan(self.store.workspace))
                if result is not None and changes:
                    result.meta["workspace_changes"] = changes
        return Tool(tool.spec, execute)

    def record(self, before: StatMap, after: StatMap) -> list[dict[str, Any]]:
        store, reported = self.store, []
        for rel, status in diff(before, after):
            old_sha: str | None = None
            if status != "added":
                known = store.known.get(rel)
                old_sha = known[1] if known is not None and known[0] == before[rel] else UNKNOWN
            new_sha: str | None = None
            if status != "deleted":
                new_sha = self._keep(rel)
            store.append(Change("change", store.step, rel, "run_shell", old_sha, new_sha))
            undoable = old_sha != UNKNOWN
            reported.append({"path": rel, "status": status, "undoable": undoable})
        if reported:
            self.emit("workspace_change", step=store.step, tool="run_shell", changes=reported,
                      not_undoable=[c["path"] for c in reported if not c["undoable"]])
        return reported

    def _keep(self, rel: str) -> str:
        path = self.store.workspace / rel
        try:
            data = path.read_bytes()
        except OSError:
            return UNKNOWN
        digest = self.store.put_blob(data)
        if digest is None:
            return UNKNOWN
        self.store.remember(path, rel, digest)
        return digest
