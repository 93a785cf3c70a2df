"""What a command leaves in the workspace that would run later with someone's full rights.

After every job that can write the workspace (keel.policy.runner), on every tier:

- **setuid and setgid bits** are stripped from every regular file that has them, and reported
  (another user running such a file would run it as its owner: root, for a root keel). The
  confining tiers also refuse to set them (keel.policy.seccomp); this is the net under that.
- **every repository** in the workspace, not only the top-level one, gets keel.policy.runlater's
  guard: its ``config``, hooks, ``info/attributes`` and ``commondir`` (a redirection to another
  repository's config) are put back when a command changed them in a way that runs code; a
  repository or ``gitdir:`` file a command made is judged by what it holds (its unsafe config and
  hooks removed). bubblewrap also binds every existing ``.git`` read-only.
- **other programs' run-later config** (``keel.policy.shell.paths.runs_later``: ``.vscode/``,
  ``.envrc``, ``.pre-commit-config.yaml``, ``.husky/``, other agents' settings, ...) that a command
  wrote is kept only when a person approves it; otherwise it is put back, and the job says which.
  Inside dependency folders (``node_modules``, virtualenvs) those names run nothing and are left.

Finding them costs one ``stat`` per directory: a ``Survey`` remembers each directory's stat key
and lists again only directories whose key changed (a new entry changes its directory), so a large
untouched tree is not read again. Where the mode-setting calls are not refused (no tier, or no
seccomp filter for this machine) a mode can change without its directory changing, so every file is
stat'ed after the command (``full``), within a time budget the result reports when it runs out.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from keel.policy import runlater
from keel.policy.shell.paths import RUNS_LATER_DIRS, RUNS_LATER_FILES

SETID = stat.S_ISUID | stat.S_ISGID
# Folders of installed dependencies: a `.vscode` or `.envrc` shipped inside a package is not one an
# editor or direnv reads. (Repositories and setuid bits are looked for there too.)
DEPENDENCY_DIRS = frozenset({"node_modules", ".venv", "venv", "site-packages", "dist-packages", ".tox", ".nox",
                             "__pycache__"})
MAX_DIRS = 100_000
FULL_BUDGET_S = 2.0
# A directory changed this recently may change again within its timestamp's granularity: listed again.
_RACY_NS = 2_000_000_000
# Whose run-later names the guard asks about: not git's own (.git has its own rules) nor keel's
# (.keel/ is always put back), and not Python's .pth files (they run only when the project's own
# interpreter starts, which is running the project).
_ASK_DIRS = RUNS_LATER_DIRS - {".git", ".keel"}
_ASK_FILES = RUNS_LATER_FILES


@dataclass
class _Dir:
    key: tuple[int, int, int, int]
    listed_ns: int
    subdirs: tuple[str, ...]
    git: tuple[str, ...]          # ".git" entries here (a directory, a gitdir: file or a link)
    later: tuple[str, ...]        # run-later names here
    setid: tuple[str, ...]        # files with a setuid/setgid bit


@dataclass
class Found:
    git: list[str] = field(default_factory=list)            # relative paths of .git entries
    later: list[tuple[str, bool]] = field(default_factory=list)   # (relative path, is a directory)
    setid: list[str] = field(default_factory=list)
    complete: bool = True


class Survey:
    """The workspace's repositories, run-later config and setuid files, kept up to date cheaply."""

    def __init__(self, workspace: str) -> None:
        self.root = os.path.realpath(workspace)
        self.dirs: dict[str, _Dir] = {}
        self.lock = threading.Lock()
        self.last: tuple[float, Found] | None = None     # (time.monotonic(), what the last refresh found)
        self.told_incomplete = False                     # "too large to check" is said once a session

    def refresh(self, *, full: bool = False) -> Found:
        with self.lock:
            found, seen = Found(), set[str]()
            deadline = time.monotonic() + FULL_BUDGET_S if full else None
            stack = [""]
            while stack:
                rel = stack.pop()
                if len(seen) >= MAX_DIRS or (deadline is not None and time.monotonic() > deadline):
                    found.complete = False
                    break
                seen.add(rel)
                entry = self._visit(rel, full)
                if entry is None:
                    continue
                prefix = f"{rel}/" if rel else ""
                stack += [prefix + n for n in entry.subdirs]
                found.git += [prefix + n for n in entry.git]
                dependency = any(part in DEPENDENCY_DIRS for part in rel.split("/"))
                found.later += [] if dependency else [(prefix + n, n.lower() in _ASK_DIRS) for n in entry.later]
                found.setid += [prefix + n for n in entry.setid]
            if found.complete:
                for gone in set(self.dirs) - seen:
                    del self.dirs[gone]
            self.last = (time.monotonic(), found)
            return found

    def recent(self, within_s: float = 1.0) -> Found:
        """The last refresh's findings when it is that recent (the one a job began with), else a new one."""
        last = self.last
        return last[1] if last is not None and time.monotonic() - last[0] < within_s else self.refresh()

    def _visit(self, rel: str, full: bool) -> _Dir | None:
        path = os.path.join(self.root, rel) if rel else self.root
        try:
            st = os.lstat(path)
        except OSError:
            self.dirs.pop(rel, None)
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        key = (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns)
        known = self.dirs.get(rel)
        now = time.time_ns()
        if known is not None and known.key == key and not full and now - st.st_mtime_ns > _RACY_NS \
                and known.listed_ns - st.st_mtime_ns > _RACY_NS:
            return known
        listed = _list(path, rel == "")
        if listed is None:
            return None
        self.dirs[rel] = _Dir(key, now, *listed)
        return self.dirs[rel]


def _list(path: str, top: bool) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    subdirs: list[str] = []
    git: list[str] = []
    later: list[str] = []
    setid: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if name == ".git":
                    git.append(name)            # its own rules (keel.policy.runlater); not walked into
                    continue
                lower = name.lower()
                is_dir = entry.is_dir(follow_symlinks=False)
                if (is_dir and lower in _ASK_DIRS) or (not is_dir and lower in _ASK_FILES) \
                        or (entry.is_symlink() and lower in _ASK_DIRS):
                    later.append(name)
                if is_dir:
                    if not (top and name == runlater.KEEL_TREE):
                        subdirs.append(name)
                elif entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_mode & SETID:
                            setid.append(name)
    except OSError:
        return None
    return tuple(subdirs), tuple(git), tuple(later), tuple(setid)


_surveys: dict[str, Survey] = {}
_surveys_lock = threading.Lock()
MAX_SURVEYS = 16     # workspaces remembered (the gate's scratch copies come and go)


def survey_of(workspace: str) -> Survey:
    """The one Survey of ``workspace`` in this process (made on first use; the least recently used
    is forgotten past MAX_SURVEYS)."""
    root = os.path.realpath(workspace)
    with _surveys_lock:
        survey = _surveys.pop(root, None) or Survey(root)
        _surveys[root] = survey                     # last in: most recently used
        while len(_surveys) > MAX_SURVEYS:
            del _surveys[next(iter(_surveys))]
        return survey


def strip_setid(root: str, paths: list[str]) -> list[str]:
    """Clear the setuid/setgid bits of ``paths`` (relative to ``root``), walking from directory file
    descriptors without following a link; the paths whose bits were cleared."""
    stripped = []
    for rel in paths:
        *parents, name = rel.split("/")
        with contextlib.suppress(OSError):
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                for part in parents:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                    os.close(fd)
                    fd = nxt
                file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
                try:
                    st = os.fstat(file_fd)
                    if stat.S_ISREG(st.st_mode) and st.st_mode & SETID:
                        os.fchmod(file_fd, stat.S_IMODE(st.st_mode) & ~SETID)
                        stripped.append(rel)
                finally:
                    os.close(file_fd)
            finally:
                os.close(fd)
    return stripped


def _ask_areas(root: str, later: list[tuple[str, bool]]) -> list[runlater.Area]:
    return [runlater.Area(root, () if is_dir else (rel,), (rel,) if is_dir else (), git=False, ask=True)
            for rel, is_dir in later]


@dataclass
class Aftercare:
    """One job's watch over the workspace: ``begin`` before it runs, ``finish`` after."""

    root: str
    guard: runlater.Guard
    known_git: frozenset[str]
    known_later: frozenset[tuple[str, bool]]
    full: bool

    @classmethod
    def begin(cls, workspace: str, *, full: bool) -> Aftercare:
        survey = survey_of(workspace)
        found = survey.refresh()
        nested = tuple(g for g in found.git if g != ".git")
        areas = runlater.areas(survey.root, nested) + _ask_areas(survey.root, found.later)
        return cls(survey.root, runlater.capture_areas(areas), frozenset(found.git), frozenset(found.later), full)

    def finish(self, keep: runlater.Keep | None = None) -> Report:
        survey = survey_of(self.root)
        found = survey.refresh(full=self.full)
        complete = found.complete or survey.told_incomplete
        survey.told_incomplete = survey.told_incomplete or not found.complete
        added: list[runlater.Area] = []
        for rel in found.git:
            if rel not in self.known_git and rel != ".git":
                added += runlater.areas(self.root, (rel,))[1:]      # [0] is .keel/, already guarded
        added += _ask_areas(self.root, [item for item in found.later if item not in self.known_later])
        undone = runlater.restore(self.guard, self.root, keep, added)
        stripped = strip_setid(self.root, found.setid)
        return Report(undone, stripped, list(self.guard.kept), complete, list(self.guard.refused))


@dataclass(frozen=True)
class Report:
    undone: list[str]
    stripped: list[str]
    kept: list[str]
    complete: bool = True
    refused: list[str] = field(default_factory=list)    # other programs' run-later config put back

    def lines(self) -> list[str]:
        out = [runlater.report(self.undone)] if self.undone else []
        if self.stripped:
            shown = ", ".join(self.stripped[:8]) + (f" and {len(self.stripped) - 8} more" if len(self.stripped) > 8 else "")
            out.append(f"[keel removed the setuid/setgid bit from {shown}: a file another user runs as its owner "
                       "is not a command's to leave behind]")
        if self.kept:
            out.append(f"[a person approved this command's change to {', '.join(self.kept)} (other programs run "
                       "commands from it)]")
        if not self.complete:
            out.append("[the workspace is too large to check every file after a command: setuid bits, "
                       "repositories and run-later config deep in it were not all checked]")
        return out


def asks_about(rel: str) -> bool:
    """Whether a change to ``rel`` (workspace-relative) is one the aftercare asks a person about:
    another program's run-later config, outside dependency folders."""
    parts = [p.lower() for p in rel.split("/") if p]
    if not parts or any(p in DEPENDENCY_DIRS for p in parts[:-1]):
        return False
    return any(p in _ASK_DIRS for p in parts) or parts[-1] in _ASK_FILES


def read_only_git(workspace: str) -> list[str]:
    """Every repository directory git reads config and hooks from for the ``.git`` entries found in
    the workspace below its top level (bubblewrap binds them read-only; the top level's own are
    keel.policy.bwrap.read_only_paths)."""
    survey = survey_of(workspace)
    paths: list[str] = []
    for rel in survey.recent().git:
        if rel != ".git":
            paths += runlater.git_dirs_behind(str(Path(survey.root) / rel))
    return list(dict.fromkeys(paths))
