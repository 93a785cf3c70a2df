"""Opening workspace files without ever following a symbolic link.

The path jail (keel.policy.paths) decides *where* a path leads; this module makes sure the file keel
then opens is the one the jail judged. Opening by name after a check is a race: between the two, a
process in the workspace can swap the file (or a directory on its path) for a symlink to
``~/.ssh/id_rsa`` (``renameat2(RENAME_EXCHANGE)`` does it atomically), and the open follows it.

Here a path is opened relative to a directory file descriptor of the root, one component at a time,
each with ``O_NOFOLLOW`` (``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` does the same walk
in one call where the kernel has it). A symlink anywhere on the path, ``..`` or an absolute path is an
``EscapeError``; nothing is ever opened, created, replaced or removed through a link.

The rule for symlinks inside the workspace: the file tools support them today (``alias.py -> src/app.py``
reads and writes ``src/app.py``). Callers keep that by resolving the model's path with the jail first
(``resolve_in_workspace`` gives the real path, every in-workspace link already followed and checked),
then opening that real path's workspace-relative form here. A real path holds no symlink, so any link
met on the way was put there after the check: the open fails with "changed into a symbolic link while
keel was using it; not followed" instead of escaping.

Non-regular files are never read blocking: ``read_beneath`` refuses FIFOs, sockets and devices, and
opens with ``O_NONBLOCK`` so a FIFO swapped in after the check cannot hang keel.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Iterator
from typing import Union

from keel.core.files import write_in_dir

Root = Union[str, "os.PathLike[str]", int]   # a directory path, or an open directory descriptor
RelPath = Union[str, "os.PathLike[str]"]

# O_PATH (Linux) opens a directory for walking without needing read permission on it.
_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SYS_OPENAT2 = 437            # the same number on every Linux architecture (since 5.6)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
_openat2_works = sys.platform == "linux"   # cleared the first time the kernel says it has no openat2


class EscapeError(OSError):
    """The path would leave the root: a symbolic link on it, ``..``, or an absolute path."""


class NotRegularFileError(OSError):
    """A FIFO, socket or device where a regular file was to be read."""


def _swapped(rel: str, link: str) -> EscapeError:
    where = rel if link == rel else f"{link} (a directory on the way to {rel})"
    return EscapeError(errno.ELOOP, f"{where} changed into a symbolic link while keel was using it; not followed",
                       rel)


def parts_of(rel: RelPath) -> list[str]:
    """The components of a relative path; EscapeError for an absolute path or one with '..'."""
    text = os.fspath(rel)
    if not isinstance(text, str):
        raise TypeError("paths are str")
    if text.startswith("/"):
        raise EscapeError(errno.EXDEV, f"{text!r} is an absolute path; only paths below the root are opened", text)
    if "\x00" in text:
        raise EscapeError(errno.EINVAL, f"{text!r} contains a NUL byte", text)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise EscapeError(errno.EXDEV, f"{text!r} contains '..'; only paths below the root are opened", text)
    return parts


def anchor(real: RelPath, root: RelPath | None = None) -> tuple[str, str]:
    """(root, relative path) for the real absolute path ``real``: below ``root`` when given (EscapeError
    when it is not), else below '/'. A real path (symlinks resolved) opened from '/' with no link
    followed is exactly the file the jail judged."""
    path = os.path.normpath(os.fspath(real))
    base = os.path.normpath(os.fspath(root)) if root is not None else "/"
    if not path.startswith("/"):
        raise EscapeError(errno.EINVAL, f"{path!r} is not an absolute path", path)
    rel = os.path.relpath(path, base)
    if rel == ".." or rel.startswith("../"):
        raise EscapeError(errno.EXDEV, f"{path} is not below {base}", path)
    return base, rel


@contextlib.contextmanager
def _root_fd(root: Root) -> Iterator[int]:
    if isinstance(root, int):
        yield root
        return
    # The root itself is trusted (the caller resolved it): only what is below it is walked no-follow.
    fd = os.open(root, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _openat2_dir(dirfd: int, path: str) -> int:
    """The directory ``path`` below ``dirfd`` in one call, no link followed, or -errno (-ENOSYS when
    openat2 is unavailable; the caller then walks, which also names the link it met)."""
    global _openat2_works
    if not _openat2_works:
        return -errno.ENOSYS
    how = _OpenHow(_DIR_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(os.fsencode(path)),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):   # no openat2 (or a filter hides it)
        _openat2_works = False
    return -err


def _is_link(dirfd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_dir(rootfd: int, parts: list[str], rel: str, *, create: bool = False, prefix: str = "") -> int:
    """A new O_PATH descriptor of the directory ``parts`` names below ``rootfd``; with ``create`` the
    missing directories are made. Raises EscapeError at the first symlink."""
    if not parts:
        return os.dup(rootfd)
    fast = _openat2_dir(rootfd, "/".join(parts))
    if fast >= 0:
        return fast
    if fast == -errno.ENOENT and not create:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
    # ELOOP, EXDEV, EAGAIN (a rename raced), ENOTDIR, …: the walk finds out which component and why
    fd = os.dup(rootfd)
    try:
        for i, name in enumerate(parts):
            for attempt in (0, 1):
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    break
                except FileNotFoundError:
                    if not create or attempt:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(fd, name):
                        raise _swapped(rel, prefix + "/".join(parts[: i + 1])) from None
                    raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def _parent(root: Root, rel: RelPath, *, create: bool = False) -> Iterator[tuple[int, str, str]]:
    """(descriptor of the parent directory, final name, rel as text) for a path naming a file."""
    parts = parts_of(rel)
    # messages name the path as the caller knows it: absolute when anchored at '/'
    prefix = "/" if not isinstance(root, int) and os.fspath(root) == "/" else ""
    text = prefix + "/".join(parts)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the root directory itself is not a file", os.fspath(rel))
    with _root_fd(root) as rfd:
        dfd = _open_dir(rfd, parts[:-1], text, create=create, prefix=prefix)
        try:
            yield dfd, parts[-1], text
        finally:
            os.close(dfd)


def open_beneath(root: Root, rel: RelPath, flags: int, mode: int = 0o666) -> int:
    """``os.open`` of ``rel`` below ``root`` with no symlink followed anywhere (the caller closes the fd)."""
    if not parts_of(rel):
        with _root_fd(root) as rfd:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=rfd)
    with _parent(root, rel) as (dfd, name, text):
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(dfd, name)):
                raise _swapped(text, text) from None
            raise
        # O_PATH | O_NOFOLLOW opens a link itself instead of failing
        if flags & _O_PATH and _O_PATH != os.O_RDONLY and stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            raise _swapped(text, text)
        return fd


def open_dir_beneath(root: Root, rel: RelPath) -> int:
    """A read descriptor of the directory ``rel`` below ``root`` (for ``os.scandir``), no symlink
    followed on the way or at the end (EscapeError); the caller closes it."""
    parts = parts_of(rel)
    prefix = "/" if not isinstance(root, int) and os.fspath(root) == "/" else ""
    with _root_fd(root) as rfd:
        dfd = _open_dir(rfd, parts, prefix + "/".join(parts), prefix=prefix)
        try:
            return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)


def stat_beneath(root: Root, rel: RelPath) -> os.stat_result:
    """``os.lstat`` of ``rel`` below ``root``; the directories on the way are not followed either."""
    if not parts_of(rel):
        with _root_fd(root) as rfd:
            return os.stat(rfd)
    with _parent(root, rel) as (dfd, name, _):
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)


def read_beneath_stat(root: Root, rel: RelPath, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``rel`` (at most ``limit``) and its stat, read through one descriptor."""
    with _parent(root, rel) as (dfd, name, text):
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        _require_regular(st, text)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _swapped(text, text) from None
            raise
    try:
        st = os.fstat(fd)
        _require_regular(st, text)      # swapped for a FIFO or device between the lstat and the open
        chunks, left = [], limit if limit is not None else -1
        while left != 0:
            chunk = os.read(fd, 1 << 20 if left < 0 else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left = left - len(chunk) if left > 0 else left
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _require_regular(st: os.stat_result, text: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise _swapped(text, text)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", text)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(errno.EINVAL, "not a regular file (a device, socket or pipe); not read", text)


def read_beneath(root: Root, rel: RelPath, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``rel`` below ``root`` (at most ``limit``), no link followed."""
    return read_beneath_stat(root, rel, limit)[0]


def write_beneath_atomic(root: Root, rel: RelPath, data: bytes, mode: int | None = None, *,
                         make_parents: bool = False) -> None:
    """Replace (or create) ``rel`` below ``root`` with ``data`` in one rename: a temp file in the same
    directory (through its descriptor), fsync, then ``rename`` onto the name. ``mode`` None keeps an
    existing file's permission bits, else 0o666 less the umask. The temp file is removed on error, and
    the directory is fsynced after the rename."""
    with _parent(root, rel, create=make_parents) as (dfd, name, text):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                raise _swapped(text, text)
        # the temp file, fsyncs, mode and clean-up are keel's one atomic write (keel.core.files)
        write_in_dir(dfd, name, data, mode)


def unlink_beneath(root: Root, rel: RelPath, *, missing_ok: bool = False) -> None:
    """Remove the file ``rel`` below ``root`` (a link there is removed itself, never its target).
    ``missing_ok`` also covers a missing directory on the way."""
    try:
        with _parent(root, rel) as (dfd, name, _):
            os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        if not missing_ok:
            raise


def makedirs_beneath(root: Root, rel: RelPath) -> None:
    """``mkdir -p`` of ``rel`` below ``root``; EscapeError when a component is (or becomes) a symlink."""
    with _root_fd(root) as rfd:
        parts = parts_of(rel)
        os.close(_open_dir(rfd, parts, "/".join(parts), create=True))
