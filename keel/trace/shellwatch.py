"""What a shell command changed in the workspace, and the bytes to put back.

Which files a command will touch is unknown until it has run, so before each run_shell keel scans
the workspace's stat data (size, mtime, inode, mode: no reading) and snapshots it incrementally
(keel.trace.snapshot: only files whose stat key changed since the last snapshot are read); after
the command a second scan finds what differs, and only those entries are hashed. A file the command
changed or deleted is undoable from the snapshot (or from bytes keel read or wrote itself); one it
created is undoable by removal; anything else (a file over the blob cap, a workspace over the
snapshot caps) is reported as not undoable. The scan skips caches, environments and git-ignored
directories, like the verification snapshot; git-ignored files are scanned.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.context.ignore import IgnoreRules
from keel.tools.base import Tool, ToolContext, ToolResult
from keel.trace.checkpoints import UNKNOWN, Change, CheckpointStore, stat_key
from keel.trace.snapshot import Caps, Snapshotter, Taken, off_note, too_large_note
from keel.verify.snapshot import EXTRA_SKIPPED_DIRS

StatMap = dict[str, tuple[int, int, int]]
SCAN_BUDGET_S = 1.5   # a workspace whose stat scan takes longer is not watched (about 50k files)


def scan(workspace: Path, modes: dict[str, int] | None = None) -> StatMap:
    """Every regular file's stat key; ``modes`` (when given) gets their permission bits.

    git-ignored files are scanned too (a `.env` that `rm` deletes is lost like a tracked file);
    git-ignored directories, caches and environments are not (keel.trace.snapshot says why)."""
    rules = IgnoreRules(workspace)
    root = rules.root
    prefix = len(root.rstrip("/")) + 1

    def decide(entry: os.DirEntry[str], is_dir: bool) -> bool | None:
        if is_dir:
            return False if entry.name in EXTRA_SKIPPED_DIRS else None
        return True

    out: StatMap = {}
    for entry in rules.walk_files(root, decide):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        rel = entry.path[prefix:]
        out[rel] = stat_key(st)
        if modes is not None:
            modes[rel] = st.st_mode & 0o7777
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
    def __init__(self, store: CheckpointStore, emit: Callable[..., Any], caps: Caps | None = None) -> None:
        self.store, self.emit = store, emit
        self.enabled = True
        self.snapshot = Snapshotter(store, caps)

    def wrap(self, tool: Tool) -> Tool:
        def execute(args: Any, ctx: ToolContext) -> ToolResult:
            if not self.enabled:
                return tool.execute(args, ctx)
            started = time.monotonic()
            modes: dict[str, int] = {}
            before = scan(self.store.workspace, modes)
            if (took := time.monotonic() - started) > SCAN_BUDGET_S:
                # two scans per command would slow every command down: stop watching this workspace
                self.enabled = False
                self._snapshots_off(ctx)
                self.emit("workspace_watch", step=self.store.step, enabled=False, files=len(before),
                          scan_s=round(took, 2), note="the workspace is too large to scan around every "
                          "command; what shell commands change is not tracked (or undoable) in this session")
                return tool.execute(args, ctx)
            notes, snap_s = self._snapshot(before, modes, ctx)
            hook = ctx.before_change
            if hook is not None:   # the gate's baseline may run inside the call: what it writes is not the command's
                def rescan_after() -> bool:
                    nonlocal before
                    if not hook():
                        return False
                    fresh: dict[str, int] = {}
                    before = scan(self.store.workspace, fresh)
                    notes.extend(self._snapshot(before, fresh, ctx)[0])
                    return True
                ctx.before_change = rescan_after
            result: ToolResult | None = None
            try:
                result = tool.execute(args, ctx)
                return result
            finally:  # also when interrupted: what the command changed so far is still recorded
                ctx.before_change = hook
                changes = self.record(before, scan(self.store.workspace))
                if result is not None:
                    if changes:
                        result.meta["workspace_changes"] = changes
                    if snap_s is not None:
                        result.meta["snapshot_s"] = snap_s
                    if notes:   # said once: the model should know what it cannot take back
                        result.output = "\n".join([result.output, *notes])
        return Tool(tool.spec, execute)

    def _snapshot(self, before: StatMap, modes: dict[str, int], ctx: ToolContext) -> tuple[list[str], float | None]:
        """Hold the workspace's bytes before the command runs; the notes to tell the model, and the time."""
        snap = self.snapshot
        if not snap.enabled:
            return [], None
        started = time.monotonic()
        try:
            taken = snap.take(before, modes)
        except OSError as exc:   # the store cannot be written (disk full ...): say so, run the command
            snap.enabled = False
            taken = Taken([], f"the checkpoint store could not be written ({exc.strerror or exc})")
        took = round(time.monotonic() - started, 3)
        notes = []
        if taken.off_reason is not None:
            self._snapshots_off(ctx)
            notes.append(off_note(taken.off_reason))
            self.emit("workspace_snapshot", step=self.store.step, enabled=False, files=len(before),
                      reason=taken.off_reason, note=notes[-1])
        if taken.too_large:
            notes.append(too_large_note(taken.too_large))
            self.emit("workspace_snapshot", step=self.store.step, enabled=True, too_large=taken.too_large,
                      note=notes[-1])
        return notes, took

    @staticmethod
    def _snapshots_off(ctx: ToolContext) -> None:
        """The approval gate lets some deletions run because a snapshot holds them: no longer."""
        if ctx.approval is not None and hasattr(ctx.approval, "snapshot"):
            ctx.approval.snapshot = False

    def record(self, before: StatMap, after: StatMap) -> list[dict[str, Any]]:
        store, reported = self.store, []
        for rel, status in diff(before, after):
            old_sha: str | None = None
            mode: int | None = None
            if status != "added":
                old_sha, mode = self._earlier(rel, before[rel])
            new_sha: str | None = None
            if status != "deleted":
                new_sha = self._keep(rel)
            store.append(Change("change", store.step, rel, "run_shell", old_sha, new_sha, mode))
            undoable = old_sha != UNKNOWN
            reported.append({"path": rel, "status": status, "undoable": undoable})
        if reported:
            self.emit("workspace_change", step=store.step, tool="run_shell", changes=reported,
                      not_undoable=[c["path"] for c in reported if not c["undoable"]])
        return reported

    def _earlier(self, rel: str, key: tuple[int, int, int]) -> tuple[str, int | None]:
        """The blob and mode of ``rel``'s bytes at ``key``, from the snapshot or what keel read."""
        held = self.snapshot.before(rel, key)
        if held is not None and held.sha is not None:
            return held.sha, held.mode
        known = self.store.known.get(rel)
        if known is not None and known[0] == key:
            return known[1], held.mode if held is not None else None
        return UNKNOWN, None

    def _keep(self, rel: str) -> str:
        """Keep the bytes a command left in ``rel``; they are also the next snapshot's, unread again."""
        held = self.snapshot.hold(rel)
        if held is None or held.sha is None:
            return UNKNOWN
        self.store.known[rel] = (held.key, held.sha)
        if self.snapshot.enabled:
            self.snapshot.held[rel] = held
        return held.sha
