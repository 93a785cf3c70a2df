"""The snapshot's pack: blobs appended to one file instead of one file each.

A first snapshot stores every file of the workspace, and creating thousands of small files is what
costs most (5,000 files: seconds on a busy disk, like `cp -r`; appended to one file, a fraction of
that: bench/snapshot.py). Layout, next to the loose blobs under ``checkpoints/blobs/``::

    pack        the bytes of each blob, one after another
    pack.idx    one line per blob: "<sha256> <offset> <size>"

The data is written before its index line, so a crash leaves at worst bytes no line points to; a
torn last line is skipped, and every read is checked against its sha256.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class Pack:
    def __init__(self, directory: Path) -> None:
        self.data_path = directory / "pack"
        self.idx_path = directory / "pack.idx"
        self._index: dict[str, tuple[int, int]] = {}
        self._idx_read = 0          # bytes of pack.idx already parsed (it only grows)

    def index(self) -> dict[str, tuple[int, int]]:
        """sha -> (offset, size), including lines another store instance appended since."""
        try:
            with self.idx_path.open("rb") as fh:
                fh.seek(self._idx_read)
                new = fh.read()
        except FileNotFoundError:
            return self._index
        complete = new[:new.rfind(b"\n") + 1]
        self._idx_read += len(complete)
        for line in complete.decode("ascii", "replace").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                self._index[parts[0]] = (int(parts[1]), int(parts[2]))
        return self._index

    def get(self, digest: str) -> bytes | None:
        where = self._index.get(digest) or self.index().get(digest)
        if where is None:
            return None
        try:
            fd = os.open(self.data_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.pread(fd, where[1], where[0])
        finally:
            os.close(fd)
        return data if hashlib.sha256(data).hexdigest() == digest else None

    def add(self, blobs: dict[str, bytes]) -> None:
        """Append ``blobs`` (sha -> bytes) not held yet."""
        known = self.index()
        todo = {d: b for d, b in blobs.items() if d not in known}
        if not todo:
            return
        self.data_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            offset = os.lseek(fd, 0, os.SEEK_END)
            lines = []
            for digest, data in todo.items():
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                lines.append(f"{digest} {offset} {len(data)}\n")
                offset += len(data)
        finally:
            os.close(fd)
        try:   # a line torn by a crash is ended first, or the next line would be glued to it
            torn = self.idx_path.stat().st_size > self._idx_read
        except FileNotFoundError:
            torn = False
        with self.idx_path.open("a", encoding="ascii") as fh:   # after the data: never a line to nothing
            fh.write(("\n" if torn else "") + "".join(lines))
