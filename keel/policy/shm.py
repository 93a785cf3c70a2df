"""/dev/shm after a Landlock-tier command: what it created there is removed when it ends.

Without a mount namespace the command writes the host's /dev/shm (POSIX shared memory and the
named semaphores of Python's multiprocessing live there, so it must stay writable), and files
left there would outlive the command and be seen by the host. The exec helper lists the names
this user owns before the command and removes, after every process of the command is dead, the
ones owned by this user that were not there before.

The limit of this rule: a file that another program of the same user (outside the command)
creates in /dev/shm while the command runs is removed too; with no namespace the two cannot be
told apart. Files of other users are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

SHM_DIR = "/dev/shm"


def owned_names(directory: str = SHM_DIR) -> frozenset[str] | None:
    """Names in ``directory`` owned by this process's user; None when it cannot be listed."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return frozenset(name for name in os.listdir(fd) if _owned(fd, name))
    finally:
        os.close(fd)


def _owned(dir_fd: int, name: str) -> bool:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False


def remove_new(before: frozenset[str] | None, directory: str = SHM_DIR) -> list[str]:
    """Remove what this user owns in ``directory`` that is not in ``before``; the names removed.
    Entries are removed relative to the directory's fd, never through a symlink."""
    if before is None:
        return []
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    removed = []
    try:
        for name in os.listdir(fd):
            if name in before or not _owned(fd, name):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
                removed.append(name)
    finally:
        os.close(fd)
    return removed
