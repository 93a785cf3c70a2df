"""A snapshot of the workspace before each shell command, so what the command deletes or rewrites
can be put back byte for byte (keel.trace.undo), also in a workspace that is not a git repository.

The bytes go into the session's checkpoint store (outside the workspace), appended to one pack file
(keel.trace.pack: one file per blob is what made a first snapshot slow): a content-addressed object
store like the shadow git objects of Codex's ghost commits, without needing git. It is incremental: the stat scan ShellWatch makes before each command anyway
gives every file's (size, mtime_ns, inode) and mode, and only a file whose key differs from what the
last snapshot held is read again. After the first command a snapshot costs the scan plus reading
what changed since.

What is held: every regular file the scan sees (keel.trace.shellwatch says which: git-ignored files and
small git-ignored folders too; not caches, environments and large ignored trees, whose files a
command names are taken first, just before it runs: ``take_more``). Symlinks and ``.git`` are not
held. A file over the blob cap (8 MiB) is streamed into a blob of its own, not read into memory, as
long as such copies stay within ``[shell] snapshot_max_mb`` for the session; past that it is not held
and is reported once as not undoable (and a command that names it for deletion or truncation asks).
A workspace over the total caps (``snapshot_max_mb`` / ``snapshot_max_files``, counting the files up
to the blob cap) is not snapshotted at all, said once in an event and in the tool result.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from keel.core.files import sha256
from keel.policy.beneath import open_beneath
from keel.trace.checkpoints import BLOB_CAP, CheckpointStore, stat_key

if TYPE_CHECKING:
    from keel.config import Config

Key = tuple[int, int, int]
LISTED = 8   # over-cap files named in a message; the event has them all
FLUSH_BYTES = 32 * 2**20   # blobs read are appended to the pack in batches of about this much


@dataclass(frozen=True)
class Caps:
    max_bytes: int = 512 * 2**20
    max_files: int = 50_000

    @property
    def on(self) -> bool:
        return self.max_bytes > 0 and self.max_files > 0


def snapshot_caps(config: Config) -> Caps:
    return Caps(config.shell.snapshot_max_mb * 2**20, config.shell.snapshot_max_files)


@dataclass(frozen=True)
class Held:
    key: Key           # the stat key of the bytes held: they are the file's bytes while its key is this
    mode: int          # permission bits
    sha: str | None    # the blob, or None: the file is over the blob cap and its bytes are not held


@dataclass
class Taken:
    """What one snapshot found worth saying: empty on the usual call."""
    too_large: list[str]            # files newly seen over the blob cap (not held)
    off_reason: str | None = None   # the snapshot was switched off now (the workspace is over a cap)


class Snapshotter:
    def __init__(self, store: CheckpointStore, caps: Caps | None = None) -> None:
        self.store = store
        self.caps = caps or Caps()
        self.enabled = self.caps.on
        self.held: dict[str, Held] = {}
        self._told_large: set[str] = set()
        self._private = False
        self._pending: dict[str, bytes] = {}   # blobs read, not yet appended to the pack
        self._pending_bytes = 0
        self.large_spent = 0                   # bytes of files over the blob cap copied in this session

    def take(self, stats: dict[str, Key], modes: dict[str, int]) -> Taken:
        """Hold the bytes of every file in ``stats`` (a ShellWatch scan) not held at its key already."""
        taken = Taken([])
        if not self.enabled:
            return taken
        if (reason := self._over_caps(stats)) is not None:
            self.enabled, taken.off_reason = False, reason
            self.held.clear()
            return taken
        self._hold_all(stats, modes, taken)
        for gone in self.held.keys() - stats.keys():
            del self.held[gone]
        return taken

    def take_more(self, stats: dict[str, Key], modes: dict[str, int]) -> Taken:
        """Hold these files too (a tree a command is about to delete), keeping what is held already."""
        taken = Taken([])
        if self.enabled:
            self._hold_all(stats, modes, taken)
        return taken

    def room(self) -> tuple[int, int]:
        """(files, bytes) the snapshot may still take before the caps."""
        small = [h.key[0] for h in self.held.values() if h.key[0] <= BLOB_CAP]
        return self.caps.max_files - len(self.held), self.caps.max_bytes - sum(small)

    def _hold_all(self, stats: dict[str, Key], modes: dict[str, int], taken: Taken) -> None:
        if not self._private:
            # the store now holds git-ignored files too (a .env among them): for the user's eyes only
            (self.store.dir / "blobs").mkdir(parents=True, exist_ok=True)
            os.chmod(self.store.dir, 0o700)
            self._private = True
        root_fd = os.open(self.store.workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for rel, key in stats.items():
                old = self.held.get(rel)
                if old is not None and old.key == key and old.mode == modes.get(rel, old.mode):
                    continue
                held = self._hold(root_fd, rel)
                if held is None:
                    self.held.pop(rel, None)
                    continue
                self.held[rel] = held
                if held.sha is None and rel not in self._told_large:
                    self._told_large.add(rel)
                    taken.too_large.append(rel)
        finally:
            os.close(root_fd)
            self._flush()   # in the store before the command runs

    def hold(self, rel: str) -> Held | None:
        """Read one file now (what a command left there), the way a snapshot does."""
        root_fd = os.open(self.store.workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return self._hold(root_fd, rel)
        finally:
            os.close(root_fd)
            self._flush()

    def _flush(self) -> None:
        pending, self._pending, self._pending_bytes = self._pending, {}, 0
        self.store.pack.add(pending)

    def before(self, rel: str, key: Key) -> Held | None:
        """What the snapshot holds of ``rel`` as it was at ``key`` (the scan before the command)."""
        held = self.held.get(rel)
        return held if held is not None and held.key == key else None

    def _over_caps(self, stats: dict[str, Key]) -> str | None:
        files = len(stats)
        if files > self.caps.max_files:
            return (f"the workspace holds {files:,} files, over the snapshot cap of {self.caps.max_files:,} "
                    "([shell] snapshot_max_files)")
        # files over the blob cap are never copied, so they do not count against the total
        total = sum(k[0] for k in stats.values() if k[0] <= BLOB_CAP)
        if total > self.caps.max_bytes:
            return (f"the workspace holds {total / 2**20:,.0f} MB, over the snapshot cap of "
                    f"{self.caps.max_bytes / 2**20:,.0f} MB ([shell] snapshot_max_mb)")
        return None

    def _hold(self, root_fd: int, rel: str) -> Held | None:
        """Read ``rel`` without following a symlink anywhere on the way (a file swapped for a link to
        ~/.ssh/id_rsa must not land in the store, from where undo would write it into the workspace)."""
        try:
            fd = open_beneath(root_fd, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            return None   # vanished, unreadable, or a symlink now
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            mode = st.st_mode & 0o7777
            if st.st_size > BLOB_CAP:
                return self._hold_large(fd, st, mode)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(BLOB_CAP + 1)
            after = os.fstat(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        if stat_key(after) != stat_key(st):
            return None   # written while read: hold nothing rather than a torn copy
        digest = sha256(data)
        self._pending[digest] = data
        self._pending_bytes += len(data)
        if self._pending_bytes > FLUSH_BYTES:
            self._flush()
        return Held(stat_key(st), mode, digest)


    def _hold_large(self, fd: int, st: os.stat_result, mode: int) -> Held:
        """A file over the blob cap: streamed into a blob of its own while the session's budget for such
        copies lasts (``[shell] snapshot_max_mb``), else not held."""
        if self.large_spent + st.st_size > self.caps.max_bytes:
            return Held(stat_key(st), mode, None)
        old = next((h for h in self.held.values() if h.key == stat_key(st) and h.sha is not None), None)
        if old is not None:
            return Held(old.key, mode, old.sha)
        sha = self.store.put_large(fd)
        if stat_key(os.fstat(fd)) != stat_key(st):
            return Held(stat_key(st), mode, None)   # written while copied: nothing torn is kept
        self.large_spent += st.st_size
        return Held(stat_key(st), mode, sha)


def too_large_note(paths: list[str]) -> str:
    shown = ", ".join(paths[:LISTED]) + (f" and {len(paths) - LISTED} more" if len(paths) > LISTED else "")
    return (f"[keel: {len(paths)} large file(s) are not kept by the snapshot ({shown}): the copies of files over "
            f"{BLOB_CAP // 2**20} MB reached [shell] snapshot_max_mb for this session; a command that deletes or "
            "truncates them by name asks first, and if code changes them keel cannot undo it]")


def off_note(reason: str) -> str:
    return (f"[keel: no snapshot before shell commands in this session: {reason}. Files that commands "
            "delete or change cannot be undone, so delete nothing you cannot recreate]")
