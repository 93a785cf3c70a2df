"""Per-session file facts shared by the file tools.

- which files this session has read, and what they looked like then (so an overwrite of a
  file that changed on disk since it was read is refused instead of silently lost);
- a snapshot of every file's previous bytes before keel first changes it, so it can be
  restored byte for byte;
- when the session has a checkpoint store (keel.trace.checkpoints), the bytes before each *step's*
  first change, on disk before the write happens, so `keel undo` works even after a kill -9.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.core.files import sha256
from keel.policy.beneath import anchor, read_beneath, unlink_beneath, write_beneath_atomic


@dataclass
class FileSession:
    # real path -> sha256 of the content last read or written by this session
    seen: dict[Path, str] = field(default_factory=dict)
    # real path -> bytes before keel's first change (None: the file did not exist)
    snapshots: dict[Path, bytes | None] = field(default_factory=dict)
    # keel.trace.checkpoints.CheckpointStore, or None (no session directory: `keel tool`, tests)
    store: Any = None

    def record_read(self, path: Path, data: bytes) -> None:
        self.seen[path] = sha256(data)
        if self.store is not None:
            self.store.seen(path, data)

    def record_write(self, path: Path, data: bytes) -> None:
        self.seen[path] = sha256(data)
        if self.store is not None:
            self.store.after_change(path, data)

    def was_read(self, path: Path) -> bool:
        return path in self.seen

    def changed_since_seen(self, path: Path) -> bool:
        """True when the file on disk differs from what this session last read or wrote."""
        if path not in self.seen:
            return True
        try:
            return sha256(read_beneath(*anchor(path))) != self.seen[path]
        except FileNotFoundError:
            return True

    def snapshot(self, path: Path) -> None:
        """Keep the bytes of ``path`` as they were before keel's first change to it."""
        if self.store is not None:
            self.store.before_change(path)
        if path in self.snapshots:
            return
        try:   # paths are real (the jail's answer): read with no symlink followed
            self.snapshots[path] = read_beneath(*anchor(path))
        except FileNotFoundError:
            self.snapshots[path] = None

    def restore(self, path: Path) -> None:
        """Put ``path`` back exactly as it was before this session first changed it."""
        if path not in self.snapshots:
            raise KeyError(f"no snapshot of {path}")
        before = self.snapshots[path]
        if before is None:
            unlink_beneath(*anchor(path), missing_ok=True)
        else:
            write_beneath_atomic(*anchor(path), before)
        self.seen.pop(path, None)
