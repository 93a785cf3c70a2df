"""Checkpoints: the bytes of every file before each step changed it, kept outside the project's .git.

Layout under the session directory (``<data>/sessions/<id>/checkpoints/``)::

    blobs/<sha256>      file contents, stored once however many times they recur
    blobs/pack(.idx)    the same, for the snapshots before shell commands: appended to one file
    manifest.jsonl      one line per fact: {"kind", "step", "path", "by", "before", "after", "mode"}

``kind`` is "before" (a file tool is about to write: the old bytes), "after" (what it wrote),
"change" (a shell command changed the file: both sides as far as known) or "undo" (`keel undo` put
these bytes back; its ``step`` is the step undone to).

``before``/``after`` are blob hashes, ``null`` for "the file did not exist", or ``"?"`` when keel
never had those bytes (a shell command changed a file no snapshot held, e.g. one over the caps). The
manifest is appended to *before* a file tool writes, so a ``kill -9`` at any moment leaves every
change keel made undoable. Shell commands are observed from the outside (keel.trace.shellwatch): what they created
can be removed, what they changed or deleted is restorable from the snapshot taken before each
command (keel.trace.snapshot), or from bytes keel read or wrote itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.files import sha256, write_atomic
from keel.policy.beneath import EscapeError, anchor, read_beneath_stat
from keel.trace.pack import Pack

UNKNOWN = "?"
BLOB_CAP = 8 * 2**20          # larger files: kept by the shell snapshot only, streamed (put_large)


def stat_key(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


@dataclass(frozen=True)
class Change:
    kind: str                  # "before" | "after" | "change"
    step: int
    path: str                  # relative to the workspace, posix
    by: str                    # the tool ("write_file", "edit_file", "run_shell", …)
    before: str | None         # blob sha, None (absent) or UNKNOWN
    after: str | None          # blob sha, None (absent) or UNKNOWN
    mode: int | None = None    # permission bits of the file before, when it existed

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "path": self.path, "by": self.by, "before": self.before,
                "after": self.after, "mode": self.mode}


class CheckpointStore:
    def __init__(self, directory: Path, workspace: Path) -> None:
        self.dir = directory
        self.workspace = Path(os.path.realpath(workspace))
        self.step = 0                        # the step whose tools are running (set by the recorder)
        self.tool = "edit"                   # the tool running now, for the manifest's "by"
        self._recorded: set[tuple[str, int]] = set()
        # rel path -> (stat key, sha) of bytes keel has seen there: a shell command that changes the
        # file afterwards is undoable because those bytes are in blobs/
        self.known: dict[str, tuple[tuple[int, int, int], str]] = {}
        self._lock = threading.Lock()
        self.pack = Pack(directory / "blobs")

    # -- paths and blobs -------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.dir / "manifest.jsonl"

    def rel(self, path: Path) -> str | None:
        try:
            return Path(os.path.realpath(path)).relative_to(self.workspace).as_posix()
        except ValueError:
            return None

    def _real_rel(self, path: Path) -> str | None:
        """``rel`` for the jail's real path taken as is: realpath would follow a link swapped in since
        the check (or fail when it is swapped back mid-way)."""
        try:
            return anchor(path, self.workspace)[1]
        except EscapeError:
            return None

    def put_blob(self, data: bytes) -> str | None:
        """Store ``data`` once; its sha, or None when it is too big to keep."""
        if len(data) > BLOB_CAP:
            return None
        digest = sha256(data)
        blob = self.dir / "blobs" / digest
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(blob, data)
        return digest

    def put_large(self, fd: int) -> str:
        """Copy the open file ``fd`` into ``blobs/<sha256>`` by streaming it (a file over BLOB_CAP the
        snapshot holds: never read whole into memory); its sha."""
        directory = self.dir / "blobs"
        directory.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".large-", delete=False) as out:
            try:
                offset = 0
                while chunk := os.pread(fd, 1 << 20, offset):
                    digest.update(chunk)
                    out.write(chunk)
                    offset += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            except BaseException:
                os.unlink(out.name)
                raise
        sha = digest.hexdigest()
        os.replace(out.name, directory / sha)
        return sha

    def blob(self, digest: str) -> bytes | None:
        try:
            return (self.dir / "blobs" / digest).read_bytes()
        except OSError:
            return self.pack.get(digest)   # the snapshots' blobs (keel.trace.pack)

    def append(self, change: Change) -> None:
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            with self.manifest.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(change.to_json()) + "\n")

    # -- what FileSession reports ----------------------------------------------------------------
    def before_change(self, path: Path) -> None:
        """Keep ``path``'s bytes before this step's first change to it (called before the write).

        ``path`` is the jail's real path: it is read below the workspace with no symlink followed, so a
        file (or a directory on its way) swapped for a link since the check raises EscapeError and the
        tool's write does not happen (keel.policy.beneath)."""
        rel = self._real_rel(path)
        if rel is None or (rel, self.step) in self._recorded:
            return
        try:
            data: bytes | None
            data, st = read_beneath_stat(self.workspace, rel)
            mode: int | None = st.st_mode & 0o7777
        except FileNotFoundError:
            data, mode = None, None
        before = None if data is None else (self.put_blob(data) or UNKNOWN)
        self._recorded.add((rel, self.step))
        self.append(Change("before", self.step, rel, self.tool, before, UNKNOWN, mode))

    def after_change(self, path: Path, data: bytes) -> None:
        rel = self._real_rel(path)
        if rel is None:
            return
        digest = self.put_blob(data) or UNKNOWN
        self.append(Change("after", self.step, rel, self.tool, UNKNOWN, digest))
        self.remember(path, rel, digest)

    def seen(self, path: Path, data: bytes) -> None:
        """keel read these bytes: keep them, so a shell command that rewrites the file can be undone."""
        rel = self._real_rel(path)
        if rel is not None and (digest := self.put_blob(data)) is not None:
            self.remember(path, rel, digest)

    def written(self) -> set[str]:
        """Every workspace path this session wrote or a command of it changed (resumed runs too)."""
        return {c.path for c in read_manifest(self.dir) if c.kind in ("before", "after", "change")}

    def remember(self, path: Path, rel: str, digest: str) -> None:
        try:
            self.known[rel] = (stat_key(os.stat(path)), digest)
        except OSError:
            self.known.pop(rel, None)


def read_manifest(directory: Path) -> list[Change]:
    """The recorded changes, in order; a line torn by a crash is skipped."""
    path = directory / "manifest.jsonl"
    out: list[Change] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        try:
            d = json.loads(line)
            out.append(Change(str(d["kind"]), int(d["step"]), str(d["path"]), str(d["by"]), d["before"],
                              d["after"], d.get("mode")))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return out
