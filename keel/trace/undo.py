"""Undo: put the workspace's files back as they were before a session (or after one of its steps).

``plan_undo`` is pure: from the checkpoint manifest and the files' current hashes it decides, per
file, restore / remove / leave / cannot. ``undo_session`` does the I/O. A file whose current bytes
are not what the session left there (someone edited it since) is left alone unless ``force``:
undo must never destroy work it did not make.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.core.files import sha256
from keel.policy.beneath import EscapeError, read_beneath, unlink_beneath, write_beneath_atomic
from keel.trace.checkpoints import UNKNOWN, Change, CheckpointStore, read_manifest

LINK_IN_THE_WAY = ("a symbolic link stands where it (or a directory on its way) was; undo never reads or writes "
                   "through one")


@dataclass(frozen=True)
class FileUndo:
    path: str
    action: str       # "restore" | "remove" | "unchanged" | "conflict" | "cannot"
    why: str = ""
    target: str | None = None    # blob sha to write (restore)
    mode: int | None = None


@dataclass
class UndoReport:
    session_id: str
    to_step: int
    files: list[FileUndo] = field(default_factory=list)
    workspace: str = ""   # the session's own workspace: with --session it need not be the current directory

    def by_action(self, action: str) -> list[FileUndo]:
        return [f for f in self.files if f.action == action]

    @property
    def ok(self) -> bool:
        return not self.by_action("conflict") and not self.by_action("cannot")

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "workspace": self.workspace, "to_step": self.to_step, "ok": self.ok,
                "files": [{"path": f.path, "action": f.action, "why": f.why} for f in self.files]}

    def lines(self) -> list[str]:
        verbs = {"restore": "restored", "remove": "removed", "unchanged": "already as it was",
                 "conflict": "NOT restored", "cannot": "cannot undo"}
        return [f"{verbs[f.action]}: {f.path}" + (f" ({f.why})" if f.why else "") for f in self.files]


def plan_undo(changes: list[Change], to_step: int, current: Callable[[str], str | None], *,
              force: bool = False) -> list[FileUndo]:
    """What to do with each file the session changed after step ``to_step`` (0: all of them).

    ``current(path)`` is the file's sha now, or None when it does not exist."""
    plan: list[FileUndo] = []
    for path in dict.fromkeys(c.path for c in changes):
        mine = [c for c in changes if c.path == path]
        later = [c for c in mine if c.step > to_step and c.kind in ("before", "change")]
        if not later:
            continue
        first = later[0]
        left = next((c.after for c in reversed(mine) if c.kind in ("after", "change", "undo")), UNKNOWN)
        now = current(path)
        if first.before == UNKNOWN:
            why = (f"removed by {first.by} at step {first.step}: a git-ignored or dependency folder the snapshot "
                   "did not hold" if path.endswith("/") else
                   f"changed by {first.by} at step {first.step}; keel never had its earlier bytes")
            plan.append(FileUndo(path, "cannot", why))
            continue
        if now == first.before:
            plan.append(FileUndo(path, "unchanged"))
            continue
        if not force and left != UNKNOWN and now != left:
            plan.append(FileUndo(path, "conflict", "changed since the session left it; --force overwrites"))
            continue
        if first.before is None:
            plan.append(FileUndo(path, "remove", f"created at step {first.step}"))
        else:
            plan.append(FileUndo(path, "restore", f"as before step {first.step}", first.before, first.mode))
    return plan


def undo_session(session_dir: Path, workspace: Path, *, to_step: int = 0, force: bool = False,
                 dry_run: bool = False) -> UndoReport:
    """Restore ``workspace``'s files from the checkpoints under ``session_dir``; the library entry
    point behind `keel undo` and the REPL's /undo."""
    store = CheckpointStore(session_dir / "checkpoints", workspace)
    root = store.workspace

    blocked: dict[str, str] = {}   # rel -> why undo cannot touch it

    def current(rel: str) -> str | None:
        # Read below the workspace with no symlink followed (keel.policy.beneath).
        try:
            return sha256(read_beneath(root, rel))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except EscapeError:
            blocked[rel] = LINK_IN_THE_WAY
        except OSError as exc:
            blocked[rel] = f"it cannot be read: {exc.strerror or exc}"
        return f"blocked:{rel}"    # no blob has this name: never "unchanged"

    report = UndoReport(session_dir.name, to_step, workspace=str(root))
    for item in plan_undo(read_manifest(store.dir), to_step, current, force=force):
        if item.path in blocked and item.action != "cannot":
            item = FileUndo(item.path, "cannot", blocked[item.path])
        if not dry_run:
            item = _apply(store, root, item)
            if item.action in ("restore", "remove"):  # what the session now "left" there, for a later undo
                store.append(Change("undo", to_step, item.path, "undo", UNKNOWN, item.target))
        report.files.append(item)
    return report


def _apply(store: CheckpointStore, root: Path, item: FileUndo) -> FileUndo:
    # Every step below the workspace is taken with no symlink followed (keel.policy.beneath): a
    # directory replaced by a link since the plan makes this file "cannot", never a write outside.
    try:
        if item.action == "remove":
            # a link there is removed itself, never its target; a folder made for it stays: it may have been there
            unlink_beneath(root, item.path, missing_ok=True)
        elif item.action == "restore":
            assert item.target is not None
            data = store.blob(item.target)
            if data is None:
                return FileUndo(item.path, "cannot", "its checkpoint blob is missing")
            # mode None keeps the current file's permission bits
            write_beneath_atomic(root, item.path, data, item.mode, make_parents=True)
    except EscapeError:
        return FileUndo(item.path, "cannot", LINK_IN_THE_WAY)
    except OSError as exc:
        return FileUndo(item.path, "cannot", f"{exc.strerror or exc}")
    return item



def undo(workspace: Path, *, session: str | None = None, to_step: int = 0, force: bool = False,
         dry_run: bool = False) -> UndoReport:
    """Undo the latest session in ``workspace`` (or ``session``: an id or log path) back to the
    end of step ``to_step`` (0: before the session). What the REPL's /undo calls.
    Raises ValueError when there is no such session."""
    from keel.trace.sessions import latest_session, load_session

    saved = load_session(session) if session else latest_session(workspace)
    if saved is None:
        raise ValueError(f"no keel session has changed files in {workspace}")
    return undo_session(saved.dir, Path(saved.workspace), to_step=to_step, force=force, dry_run=dry_run)
