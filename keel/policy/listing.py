"""Listing workspace directories without ever following a symbolic link.

The folder walks that send names or contents to the model (list_dir, grep, find_files, the snapshots,
the secret-file scan of the bubblewrap tier) list each directory through a descriptor opened below
the workspace root with no link followed (keel.policy.beneath), never by path: between a check and a
listing by path, a concurrent writer can swap a directory for a symlink to ``~/.ssh`` and the listing
would follow it. A directory that became a link is an ``EscapeError`` instead, and the walk skips it.

The entries come back as plain values (``Entry``): what a ``DirEntry`` would tell later with an
extra ``stat`` call is read while the directory's descriptor is open, because a ``DirEntry`` made
from a descriptor answers through that descriptor, which is closed once the listing is done.
"""

from __future__ import annotations

import os
import stat as stats
from typing import NamedTuple

from keel.policy.beneath import Root, open_dir_beneath

DIR, FILE, LINK, OTHER = "dir", "file", "link", "other"


class Entry(NamedTuple):
    """One directory entry: ``path`` is the listed directory's path (as the caller named it) joined
    with ``name``; ``lstat`` and ``target`` (a link's text) are there when asked for. (A tuple: walks
    make one per file, and a frozen dataclass cost a third of a scan's time.)"""

    name: str
    path: str
    kind: str
    lstat: os.stat_result | None = None
    target: str | None = None

    def is_dir(self) -> bool:   # a link is never followed: it is neither a dir nor a file
        return self.kind == DIR

    def is_file(self) -> bool:
        return self.kind == FILE

    def is_symlink(self) -> bool:
        return self.kind == LINK

    def stat(self) -> os.stat_result:
        """The entry's lstat (never the target of a link)."""
        if self.lstat is None:
            raise OSError(f"{self.path}: listed without its stat")
        return self.lstat


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return LINK
    if entry.is_dir(follow_symlinks=False):
        return DIR
    return FILE if entry.is_file(follow_symlinks=False) else OTHER


def list_beneath(root: Root, rel: str, shown: str, *, with_stat: bool = False) -> list[Entry]:
    """The entries of the directory ``rel`` below ``root`` (``"."``: the root itself); ``shown`` is
    the directory's path as the caller names it (each ``Entry.path`` starts with it). Raises OSError
    (``EscapeError`` when a component is, or became, a symbolic link)."""
    fd = open_dir_beneath(root, rel)
    out: list[Entry] = []
    prefix = shown.rstrip("/") + "/" if shown != "/" else "/"
    new, kinds, ifmt = tuple.__new__, _KINDS, stats.S_IFMT    # a scan makes one per file: kept lean
    try:
        with os.scandir(fd) as it:
            for entry in it:
                name = entry.name
                if not with_stat:
                    kind = _kind(entry)
                    if kind != OTHER:
                        out.append(new(Entry, (name, prefix + name, kind, None, None)))
                        continue
                try:
                    lstat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue      # gone since it was listed
                kind = kinds.get(ifmt(lstat.st_mode), OTHER)
                target = None
                if kind == LINK and with_stat:
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError:
                        target = None
                out.append(new(Entry, (name, prefix + name, kind, lstat, target)))
    finally:
        os.close(fd)
    return out


_KINDS = {stats.S_IFDIR: DIR, stats.S_IFLNK: LINK, stats.S_IFREG: FILE}
