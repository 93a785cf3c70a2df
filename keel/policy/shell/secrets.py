"""Secret-looking files, recognised by pattern — also through globs, recursive readers and git
object paths (``git show HEAD:.env``).

The patterns are the one list the file tools and the sandbox tiers share
(``keel.policy.paths.SECRET_PATTERNS``); a shell command names files in more ways (``cat .en?``,
``grep -r``), which this module follows.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from keel.policy.paths import is_secret_name

# Exemplars a glob is tried against: `cat .en?` or `cat *.pem` names a secret even if none exists yet.
EXEMPLARS = (".env", ".env.local", "prod.env", ".envrc", "id_rsa", "id_ed25519", "key.pem", "server.key",
             ".netrc", ".npmrc", ".pypirc", "credentials", ".git-credentials", ".vault-token", "cert.p12",
             "terraform.tfvars", "secrets.yaml", "token.json")
# Directories a recursive reader skips in the scan: what they hold is not the project's secrets.
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache",
                        ".pytest_cache", ".tox", ".nox", "site-packages"})
MAX_SCAN = 20_000


def is_secret(path: str) -> bool:
    """A secret-looking file name (the whole path is given; the name decides): the one list,
    keel.policy.paths.SECRET_PATTERNS."""
    return is_secret_name(path.rstrip("/"))


def glob_names_secret(pattern: str) -> bool:
    """Could the glob ``pattern`` (its last component) match a secret-looking file name?"""
    last = pattern.rstrip("/").rpartition("/")[2]
    if not last:
        return False
    return any(fnmatch.fnmatchcase(exemplar, last) for exemplar in EXEMPLARS) or \
        any(fnmatch.fnmatchcase(exemplar.upper(), last.upper()) for exemplar in EXEMPLARS)


def glob_matches_secret(pattern: str, cwd: Path | None) -> bool:
    """Does the glob match a secret file on disk now, or could it name one?"""
    if glob_names_secret(pattern):
        return True
    if cwd is None:
        return True
    import glob as globbing

    base = pattern if os.path.isabs(pattern) else str(cwd / pattern)
    for i, match in enumerate(globbing.iglob(base, include_hidden=True)):
        if i > 1000 or is_secret(match) or re.fullmatch(r"/proc/[^/]+/(task/[^/]+/)?(environ|mem)", match):
            return True
    return False


def secret_under(directory: Path, hidden: bool = True, excluded: list[str] | None = None,
                 included: list[str] | None = None, unseen: frozenset[Path] = frozenset()) -> Path | None:
    """The first secret-looking file a recursive reader of ``directory`` would read, if any.

    ``hidden=False`` skips dot-files and dot-directories (``rg`` without ``--hidden``);
    ``excluded`` are globs the reader was told to skip (``--exclude=.env``, ``-g '!.env'``);
    ``included``, when given, the only file names it reads (``--include='*.py'``, ``-g '*.py'``);
    ``unseen``: files and folders the OS tier hides from the command (it reads them as empty).
    A tree too large to scan counts as holding one.
    """
    if directory.is_file():
        return directory if is_secret(str(directory)) else None
    seen = 0
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and (hidden or not d.startswith("."))
                   and not _excluded(d, excluded) and Path(root) / d not in unseen]
        for name in files:
            seen += 1
            if seen > MAX_SCAN:
                return directory
            if (hidden or not name.startswith(".")) and is_secret(name) and not _excluded(name, excluded) \
                    and (not included or any(fnmatch.fnmatchcase(name.lower(), p.lower()) for p in included)) \
                    and Path(root) / name not in unseen:
                return Path(root) / name
    return None


def _excluded(name: str, patterns: list[str] | None) -> bool:
    return bool(patterns) and any(fnmatch.fnmatch(name, p) for p in patterns or [])


def git_object_path(value: str) -> str | None:
    """``HEAD:.env``, ``:config/prod.env``, ``main:./x``: the path part of a git object name."""
    if ":" not in value or value.startswith(("-", "/")) or "://" in value:
        return None
    path = value.split(":", 1)[1]
    while path.startswith("./"):
        path = path[2:]
    return path or None


def tracked_secret(directory: Path) -> str | None:
    """A secret-looking file tracked by the git repository that holds ``directory`` (read from its
    index, never by running git: a repository's config can make git run programs). An index this
    parser does not read (v4, damaged) counts as tracking one when the tree holds one."""
    repo = next((d for d in (directory, *directory.parents) if (d / ".git").exists()), None)
    if repo is None:
        return None
    index = repo / ".git" / "index"
    try:
        stat = index.stat()
    except OSError:
        return None                                  # no index: nothing is tracked yet
    key = (str(index), stat.st_mtime_ns, stat.st_size)
    if key not in _TRACKED:
        paths = _index_paths(index)
        if paths is None:
            found = secret_under(repo)
            _TRACKED[key] = str(found.relative_to(repo)) if found is not None else None
        else:
            # the file tools' list: a tracked secrets.py or credentials.py is source code
            _TRACKED[key] = next((p for p in paths if is_secret(p) and is_secret_name(p)), None)
    return _TRACKED[key]


_TRACKED: dict[tuple[str, int, int], str | None] = {}


def _index_paths(index: Path) -> list[str] | None:
    """The paths in a git index (versions 2 and 3); None when it cannot be read."""
    try:
        data = index.read_bytes()
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3):
        return None
    paths: list[str] = []
    at = 12
    for _ in range(count):
        if at + 62 > len(data):
            return None
        flags = int.from_bytes(data[at + 60:at + 62], "big")
        header = 64 if (version == 3 and flags & 0x4000) else 62
        end = data.find(b"\0", at + header)
        if end < 0:
            return None
        paths.append(data[at + header:end].decode("utf-8", "replace"))
        at += (header + (end - at - header) + 8) & ~7
    return paths
