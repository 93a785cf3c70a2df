"""Workspace snapshots: what every file held at one moment, and what changed between two moments.

A snapshot hashes every file the project's .gitignore keeps (plus the always-skipped caches and
environments of keel.context.ignore, and keel's own ``.keel/``), and keeps the text of small text
files so the gate can diff a change against the start and put back a test the agent overwrote.
Its ``digest`` names the whole state: evidence from a check counts only for the digest it ran on.

Symlinks are not followed and not recorded (the ignore walker skips them, as the search tools do).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from keel.context.ignore import IgnoreRules
from keel.policy.beneath import open_beneath
from keel.policy.listing import Entry
from keel.policy.paths import is_secret_name

# Directories that never hold the project's own work, on top of keel.context.ignore's list.
EXTRA_SKIPPED_DIRS = frozenset({".keel", ".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
                                ".pytest_cache", ".ruff_cache"})
TEXT_FILE_LIMIT = 1 << 20        # texts are kept for files below 1 MiB; larger ones are only hashed
_CHUNK = 1 << 20

ChangeStatus = Literal["added", "modified", "deleted"]


@dataclass(frozen=True)
class Snapshot:
    root: str
    files: dict[str, str]                                   # relative posix path -> sha256 of the bytes
    texts: dict[str, str] = field(default_factory=dict, repr=False)   # path -> exact text, when kept
    digest: str = ""

    def text(self, path: str) -> str | None:
        """The file's text at snapshot time; None if absent, binary, not UTF-8, too big, or over budget."""
        return self.texts.get(path)


@dataclass(frozen=True)
class FileChange:
    path: str
    status: ChangeStatus
    added_lines: int | None          # None when a side's text is unknown (binary, too big)
    removed_lines: int | None
    added_text: tuple[str, ...] = ()         # the added lines themselves, in order
    added_line_numbers: tuple[int, ...] = ()  # their 1-based line numbers in the new file, parallel to added_text


def take_snapshot(workspace: Path, *, keep_text_bytes: int = 64 * 2**20) -> Snapshot:
    rules = IgnoreRules(Path(workspace))
    root = rules.root
    files: dict[str, str] = {}
    texts: dict[str, str] = {}
    budget = keep_text_bytes

    def skip_extra_dirs(entry: Entry, is_dir: bool) -> bool | None:
        return False if is_dir and entry.name in EXTRA_SKIPPED_DIRS else None

    prefix = len(root.rstrip("/")) + 1   # the walker yields root + "/" + rel; os.path.relpath costs 10x more
    for entry in rules.walk_files(root, skip_extra_dirs):
        rel = entry.path[prefix:]
        read = _hash_file(root, rel)
        if read is None:
            continue  # vanished or unreadable between listing and reading
        files[rel], data = read
        # a secret file's text is never kept: the gate's diffs and reviews go to the model
        if data is not None and len(data) <= budget and b"\0" not in data and not is_secret_name(rel):
            try:
                texts[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            budget -= len(data)
    return Snapshot(root=root, files=files, texts=texts, digest=_digest(files))


def _hash_file(root: str, rel: str) -> tuple[str, bytes | None] | None:
    """(sha256, the bytes when the file is small enough to keep as text); None for what is not a regular
    file below ``root`` reached with no symlink followed (keel.policy.beneath)."""
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, TEXT_FILE_LIMIT)
        if len(data) < TEXT_FILE_LIMIT:
            return hashlib.sha256(data).hexdigest(), data
        sha = hashlib.sha256(data)
        while chunk := os.read(fd, _CHUNK):
            sha.update(chunk)
        return sha.hexdigest(), None
    except OSError:
        return None
    finally:
        os.close(fd)


def _digest(files: dict[str, str]) -> str:
    sha = hashlib.sha256()
    for path in sorted(files):
        sha.update(f"{path}\0{files[path]}\n".encode("utf-8", "surrogateescape"))
    return sha.hexdigest()


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """Files added, modified or deleted between two snapshots, sorted by path."""
    changes: list[FileChange] = []
    for path in sorted(before.files.keys() | after.files.keys()):
        old_hash, new_hash = before.files.get(path), after.files.get(path)
        if old_hash == new_hash:
            continue
        old, new = before.text(path), after.text(path)
        if old_hash is None:
            lines = new.splitlines() if new is not None else None
            changes.append(FileChange(path, "added", len(lines) if lines is not None else None, 0,
                                      tuple(lines or ()), tuple(range(1, len(lines or ()) + 1))))
        elif new_hash is None:
            changes.append(FileChange(path, "deleted", 0, len(old.splitlines()) if old is not None else None))
        elif old is None or new is None:
            changes.append(FileChange(path, "modified", None, None))
        else:
            changes.append(_modified(path, old, new))
    return changes


def _modified(path: str, old: str, new: str) -> FileChange:
    a, b = old.splitlines(), new.splitlines()
    # Trim the common head and tail first: difflib is quadratic in the worst case, edits are local.
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    a_mid, b_mid = a[head: len(a) - tail], b[head: len(b) - tail]
    added: list[str] = []
    numbers: list[int] = []
    removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=len(a_mid) + len(b_mid) > 4000).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added.extend(b_mid[j1:j2])
            numbers.extend(range(head + j1 + 1, head + j2 + 1))
    return FileChange(path, "modified", len(added), removed, tuple(added), tuple(numbers))
