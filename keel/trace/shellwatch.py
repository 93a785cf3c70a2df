"""What a shell command changed in the workspace, and the bytes to put back.

Which files a command will touch is unknown until it has run, so before each run_shell keel scans
the workspace's stat data (size, mtime, inode, mode: no reading; keel.trace.tree says what it
enters) and snapshots it incrementally (keel.trace.snapshot: only files whose stat key changed since
the last snapshot are read); after the command a second scan finds what differs, and only those
entries are hashed. A file the command changed or deleted is undoable from the snapshot (or from
bytes keel read or wrote itself); one it created is undoable by removal.

Nothing is lost unsaid: the shell policy asks the watch (``Holdings``, the approval gate's
``snapshot``) about every path a command names for deletion, truncation or overwrite; what the
snapshot does not hold yet — a file in a folder the scan does not enter, a large file past the
session's budget — is taken first when it fits the snapshot caps, and otherwise the command asks (and
is refused when no one is present). A folder the scan does not enter that a command removed anyway
(code that ran ``shutil.rmtree``) is reported as not undoable, never as nothing to undo.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from keel.policy.beneath import stat_beneath
from keel.tools.base import Tool, ToolContext, ToolResult
from keel.trace.checkpoints import UNKNOWN, Change, CheckpointStore
from keel.trace.snapshot import Caps, Snapshotter, Taken, off_note, too_large_note
from keel.trace.tree import Scan, StatMap, Trees, add_tree, measure, scan

SCAN_BUDGET_S = 1.5   # a workspace whose stat scan takes longer is not watched (about 50k files)
__all__ = ["SCAN_BUDGET_S", "Holdings", "ShellWatch", "diff", "scan"]


def diff(before: StatMap, after: StatMap) -> list[tuple[str, str]]:
    """(path, "added" | "modified" | "deleted"), sorted by path."""
    out = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        out.append((path, "added" if old is None else "deleted" if new is None else "modified"))
    return out


def _within(rel: str, folder: str) -> bool:
    return folder == "" or rel == folder or rel.startswith(folder + "/")


class Holdings:
    """What the snapshot before the running command holds, as the shell policy asks it
    (keel.policy.shell.commands: ``env.snapshot``). True while snapshots are on."""

    def __init__(self, watch: ShellWatch) -> None:
        self._watch = watch

    def __bool__(self) -> bool:
        return self._watch.enabled and self._watch.snapshot.enabled

    def unheld(self, path: Path, tree: bool) -> str | None:
        """Why deleting or truncating ``path`` (a real path; ``tree``: with everything below it) could
        not be undone, after taking what it can first; None when the snapshot holds it all."""
        return self._watch.unheld(path, tree)


class ShellWatch:
    def __init__(self, store: CheckpointStore, emit: Callable[..., Any], caps: Caps | None = None) -> None:
        self.store, self.emit = store, emit
        self.enabled = True
        self.snapshot = Snapshotter(store, caps)
        self.holdings = Holdings(self)
        self.trees = Trees()
        self._current: Scan | None = None       # the scan before the command now running
        self._taken: list[str] = []              # what was taken first for it (relative paths)

    def wrap(self, tool: Tool) -> Tool:
        def execute(args: Any, ctx: ToolContext) -> ToolResult:
            approval = ctx.approval
            if approval is not None and hasattr(approval, "snapshot") and approval.snapshot is True:
                approval.snapshot = self.holdings   # the policy asks it about what the snapshot holds
            if not self.enabled:
                return tool.execute(args, ctx)
            started = time.monotonic()
            before = Scan()
            scan(self.store.workspace, into=before, trees=self.trees)
            if (took := time.monotonic() - started) > SCAN_BUDGET_S:
                # two scans per command would slow every command down: stop watching this workspace
                self.enabled = False
                self._snapshots_off(ctx)
                self.emit("workspace_watch", step=self.store.step, enabled=False, files=len(before.files),
                          scan_s=round(took, 2), note="the workspace is too large to scan around every "
                          "command; what shell commands change is not tracked (or undoable) in this session")
                return tool.execute(args, ctx)
            notes, snap_s = self._snapshot(before, ctx)
            self._current, self._taken = before, []
            hook = ctx.before_change
            if hook is not None:   # the gate's baseline may run inside the call: what it writes is not the command's
                def rescan_after() -> bool:
                    nonlocal before
                    if not hook():
                        return False
                    fresh = Scan()
                    scan(self.store.workspace, into=fresh, trees=self.trees)
                    before = fresh
                    self._current, self._taken = fresh, []
                    notes.extend(self._snapshot(fresh, ctx)[0])
                    return True
                ctx.before_change = rescan_after
            result: ToolResult | None = None
            try:
                result = tool.execute(args, ctx)
                return result
            finally:  # also when interrupted: what the command changed so far is still recorded
                ctx.before_change = hook
                after = Scan()
                scan(self.store.workspace, into=after, trees=self.trees, roots=self._taken)
                changes = self.record(before.files, after.files) + self._lost_folders(before, after)
                self._current = None
                if result is not None:
                    if changes:
                        result.meta["workspace_changes"] = changes
                    if snap_s is not None:
                        result.meta["snapshot_s"] = snap_s
                    notes += self._lost_note(changes)
                    if notes:   # said once: the model should know what it cannot take back
                        result.output = "\n".join([result.output, *notes])
        return Tool(tool.spec, execute)

    def _snapshot(self, before: Scan, ctx: ToolContext) -> tuple[list[str], float | None]:
        """Hold the workspace's bytes before the command runs; the notes to tell the model, and the time."""
        snap = self.snapshot
        if not snap.enabled:
            return [], None
        started = time.monotonic()
        try:
            taken = snap.take(before.files, before.modes)
        except OSError as exc:   # the store cannot be written (disk full ...): say so, run the command
            snap.enabled = False
            taken = Taken([], f"the checkpoint store could not be written ({exc.strerror or exc})")
        took = round(time.monotonic() - started, 3)
        notes = []
        if taken.off_reason is not None:
            self._snapshots_off(ctx)
            notes.append(off_note(taken.off_reason))
            self.emit("workspace_snapshot", step=self.store.step, enabled=False, files=len(before.files),
                      reason=taken.off_reason, note=notes[-1])
        if taken.too_large:
            notes.append(too_large_note(taken.too_large))
            self.emit("workspace_snapshot", step=self.store.step, enabled=True, too_large=taken.too_large,
                      note=notes[-1])
        return notes, took

    def _snapshots_off(self, ctx: ToolContext) -> None:
        """The approval gate lets some deletions run because a snapshot holds them: no longer."""
        if ctx.approval is not None and hasattr(ctx.approval, "snapshot") and \
                getattr(ctx.approval, "snapshot", None) is not self.holdings:
            ctx.approval.snapshot = False

    # -- what the policy asks ----------------------------------------------------------------------
    def unheld(self, path: Path, tree: bool) -> str | None:
        current = self._current
        if path.name == "{}":     # "some file below" (find with filters, keel.policy.shell.text): the folder
            path, tree = path.parent, True
        try:
            rel = path.relative_to(self.store.workspace).as_posix()
        except ValueError:
            return None     # outside the workspace: the policy's own rules decide
        rel = "" if rel == "." else rel
        if not path.exists() and not path.is_symlink():
            return None     # nothing there to lose
        if not (self.enabled and self.snapshot.enabled):
            return "keel takes no snapshot in this session, so keel undo could not bring it back"
        if current is None:
            return None     # not a command the watch wraps (the gate's own checks)
        todo = [p for p in current.pruned if _within(rel, p) or (tree and _within(p, rel))]
        if not todo and rel in current.files:
            held = self.snapshot.before(rel, current.files[rel])
            if held is not None and held.sha is None:
                return "a large file the snapshot no longer copies (its budget for large files is spent)"
            return None
        for folder in todo:
            if (why := self._take(rel if _within(rel, folder) and not tree else folder)) is not None:
                return why
        if tree:    # large files below it that the snapshot could not copy
            big = [r for r, k in current.files.items() if _within(r, rel) and (h := self.snapshot.before(r, k))
                   is not None and h.sha is None]
            if big:
                return f"{len(big)} large file(s) below it the snapshot no longer copies ({big[0]} …)"
        return None

    def _take(self, rel: str) -> str | None:
        """Hold ``rel`` (a file or a folder) before the command runs; why not, when it does not fit."""
        assert self._current is not None
        if any(_within(rel, t) for t in self._taken):
            return None
        root = self.store.workspace.as_posix()
        files, room = self.snapshot.room()
        try:
            folder = stat.S_ISDIR(stat_beneath(root, rel).st_mode)
        except OSError:
            return None
        if folder and measure(root, rel, max(files, 0), max(room, 0)) is None:
            return ("it is in a git-ignored folder the snapshot does not hold, too large to take before the "
                    "command ([shell] snapshot_max_mb / snapshot_max_files), so keel undo could not bring it back")
        extra = Scan()
        add_tree(extra, root, rel)
        taken = self.snapshot.take_more(extra.files, extra.modes)
        self._current.files.update(extra.files)
        self._current.modes.update(extra.modes)
        self._taken.append(rel)
        if taken.too_large:
            return f"{len(taken.too_large)} large file(s) in it the snapshot no longer copies ({taken.too_large[0]} …)"
        return None

    # -- what the command did -------------------------------------------------------------------------
    def _lost_folders(self, before: Scan, after: Scan) -> list[dict[str, Any]]:
        """Folders the scan does not enter that the command removed or replaced: never undoable."""
        lost = []
        root = self.store.workspace.as_posix()
        for rel, inode in before.pruned.items():
            if any(_within(rel, t) for t in self._taken) or after.pruned.get(rel) == inode:
                continue
            try:
                st = stat_beneath(root, rel)
                if stat.S_ISDIR(st.st_mode) and st.st_ino == inode:
                    continue        # still there, now scanned (it became small)
            except OSError:
                pass
            self.store.append(Change("change", self.store.step, rel + "/", "run_shell", UNKNOWN, UNKNOWN))
            lost.append({"path": rel + "/", "status": "deleted", "undoable": False})
        if lost:
            self.emit("workspace_change", step=self.store.step, tool="run_shell", changes=lost,
                      not_undoable=[c["path"] for c in lost])
        return lost

    @staticmethod
    def _lost_note(changes: list[dict[str, Any]]) -> list[str]:
        folders = [c["path"] for c in changes if not c["undoable"] and c["path"].endswith("/")]
        if not folders:
            return []
        return [f"[keel: the command removed {', '.join(folders[:5])} — git-ignored or dependency folders the "
                "snapshot does not hold; keel undo cannot bring them back]"]

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
