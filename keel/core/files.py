"""The one atomic write and the one file digest, for keel's own data files (sessions, checkpoints,
trust, eval records) and, through ``write_in_dir``, for workspace files (keel.policy.beneath).

Every atomic write in keel gives the same guarantees: the bytes go to a temp file in the target's
directory, which is fsynced and renamed onto the name, then the directory is fsynced so the rename
itself survives a power cut; a reader (or a crash) sees the old file or the new, never half of one.
The temp file is removed on any error, and an existing file's permission bits are kept unless a
mode is given.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path


def sha256(data: bytes) -> str:
    """The file digest keel uses everywhere it names contents (checkpoint blobs, undo, snapshots)."""
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(dirfd: int) -> None:
    # dirfd may be an O_PATH descriptor (keel.policy.beneath), which cannot be fsynced itself.
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):   # some filesystems do not sync directories; the rename is done
            os.fsync(fd)
    finally:
        os.close(fd)


def existing_mode(dirfd: int, name: str) -> int | None:
    """The permission bits of the regular file ``name`` in ``dirfd`` (not followed), None if absent."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def write_in_dir(dirfd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """Replace (or create) ``name`` in the directory ``dirfd`` with ``data`` atomically. ``mode`` None
    keeps an existing file's permission bits, else a new file gets 0o666 less the umask. No link is
    followed: the temp file is created O_EXCL | O_NOFOLLOW, and rename replaces a link at the name itself."""
    keep = mode if mode is not None else existing_mode(dirfd, name)
    tmp = f".{name[:120]}.{secrets.token_hex(4)}.keel-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dirfd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if keep is not None:
                os.fchmod(fd, keep)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    _fsync_dir(dirfd)


def write_atomic(path: Path | str, data: bytes, mode: int | None = None, *, make_parents: bool = False) -> None:
    """Replace the file ``path`` (one of keel's own data files) with ``data`` atomically; see the module
    docstring. Workspace files go through keel.policy.beneath, which adds the no-symlink walk."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    dirfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_in_dir(dirfd, path.name, data, mode)
    finally:
        os.close(dirfd)
