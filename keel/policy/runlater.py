"""Files that run code later, outside any sandbox: what a shell command changes there is undone.

A command confined to the workspace can still write ``.git/hooks/pre-commit`` or add
``core.fsmonitor`` to ``.git/config``: the next ``git status`` the user runs on the host runs that
code, with none of keel's confinement. The bubblewrap tier mounts these read-only; on every tier
keel also records them before each shell command and puts back afterwards anything the command
changed, removed or added (``capture`` / ``restore``), and the model is told.

What is guarded (``areas``): git's ``config``, ``config.worktree``, ``info/attributes`` and
``hooks/`` of the workspace's git directory (also when ``.git`` is a ``gitdir:`` file: then that
file, the directory it names and its ``commondir``), the same in each submodule's directory under
``modules/``, and all of ``.keel/`` (its config.toml holds hooks keel runs).

What a command may still change there, because it cannot make anything run:

- ``.git/config`` when every key whose values changed is in ``SAFE_CONFIG_KEYS`` (identity, branch
  and remote bookkeeping, the keys ``git init``/``git clone``/``git remote add`` write). The file is
  read by a strict parser: a line it does not understand (a key after a section header on the same
  line, a continuation line, a byte-order mark) counts as unsafe, so git cannot read a key the
  guard missed. Any unsafe change puts the whole file back;
- ``hooks/*.sample`` (git never runs a hook by that name; ``git init`` writes them) and directories.

A repository the command deleted or replaced as a whole is not rebuilt here (keel undo restores
from its snapshot); a symlink or ``gitdir:`` file put in place of the workspace's ``.git`` directory
is removed, so git is not pointed at hooks elsewhere. All I/O walks from directory file
descriptors with ``O_NOFOLLOW``: a symlink planted by the command is replaced, never written through.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from keel.policy.gitconfig import SAFE_CONFIG_KEYS as SAFE_CONFIG_KEYS  # re-exported
from keel.policy.gitconfig import unsafe_changes

# commondir: written into a git directory, it points git at another repository's config and hooks.
GIT_FILES = ("config", "config.worktree", "info/attributes", "commondir")
GIT_TREES = ("hooks",)
KEEL_TREE = ".keel"
MAX_ENTRIES = 4000
MAX_BYTES = 32 * 1024 * 1024
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    kind: str            # "file", "dir", "link" or "other" (fifo, socket, device)
    mode: int = 0
    data: bytes = b""    # a file's bytes, a link's target


@dataclass(frozen=True)
class Area:
    """Paths under one trusted base directory: single files and whole trees."""

    base: str
    files: tuple[str, ...] = ()
    trees: tuple[str, ...] = ()
    git: bool = True     # the config rule and the .sample rule apply
    ask: bool = False    # another program's run-later config: a change is kept only when a person says so


@dataclass
class Guard:
    areas: list[Area]
    before: dict[tuple[str, str], Entry | None] = field(default_factory=dict)
    partial: bool = False
    kept: list[str] = field(default_factory=list)     # ask areas whose change a person let stand
    refused: list[str] = field(default_factory=list)  # ask areas whose change was put back


# ---------------------------------------------------------------- what is guarded


def _read_gitfile(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            line = fh.read(4096).split(b"\n", 1)[0].decode()
    except (OSError, UnicodeDecodeError):
        return None
    return line[len("gitdir:"):].strip() if line.startswith("gitdir:") else None


def _git_areas(gitdir: str) -> list[Area]:
    """The guarded parts of one git directory, its common dir and its submodules' directories."""
    dirs = [gitdir]
    with contextlib.suppress(OSError), open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
        dirs.append(os.path.realpath(os.path.join(gitdir, fh.readline().strip())))
    for directory in list(dirs):
        for root, subdirs, files in os.walk(os.path.join(directory, "modules")):
            if "HEAD" in files:
                dirs.append(root)
            subdirs[:] = [d for d in subdirs if d not in ("objects", "refs", "logs", "hooks")]
    return [Area(d, GIT_FILES, GIT_TREES) for d in dict.fromkeys(dirs)]


def areas(workspace: str, nested: tuple[str, ...] = ()) -> list[Area]:
    """What is guarded in ``workspace``: ``.keel/``, its top-level git directory (also before one
    exists) and the ``.git`` of each repository at ``nested`` (paths relative to the workspace, of
    ``.git`` directories or ``gitdir:`` files found deeper down)."""
    ws = os.path.realpath(workspace)
    found = [Area(ws, (), (KEEL_TREE,), git=False)]
    for rel in dict.fromkeys((".git", *nested)):
        found += _repository_areas(ws, rel)
    return found


def _repository_areas(ws: str, rel: str) -> list[Area]:
    """The guarded parts of one ``.git`` entry at ``rel`` below the workspace."""
    dotgit = os.path.join(ws, rel)
    if os.path.isfile(dotgit) and not os.path.islink(dotgit):
        found = [Area(ws, (rel,), (), git=False)]
        target = _read_gitfile(dotgit)
        if target:
            real = os.path.realpath(os.path.join(os.path.dirname(dotgit), target))
            if os.path.isdir(real):
                found += _git_areas(real)
        return found
    if rel != ".git" and not os.path.isdir(dotgit):
        return [Area(ws, (rel,), (), git=False)]          # a link or other odd .git: only its own name
    # A .git directory, or none yet at the top (then `git init` is judged by what it writes).
    found = [Area(ws, tuple(f"{rel}/{f}" for f in GIT_FILES), tuple(f"{rel}/{t}" for t in GIT_TREES))]
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        found += [a for a in _git_areas(dotgit) if a.base != dotgit]
    return found


def git_dirs_behind(dotgit: str) -> list[str]:
    """The real directories git reads config and hooks from for the ``.git`` entry ``dotgit``: the
    directory itself, or a ``gitdir:`` file's target and its common dir."""
    if os.path.islink(dotgit):
        return []
    if os.path.isdir(dotgit):
        return [os.path.realpath(dotgit)]
    target = _read_gitfile(dotgit)
    if not target:
        return []
    real = os.path.realpath(os.path.join(os.path.dirname(dotgit), target))
    return [a.base for a in _git_areas(real)] if os.path.isdir(real) else []


# ---------------------------------------------------------------- reading without following links


def _open_dir(base_fd: int, parts: list[str]) -> int | None:
    fd = os.dup(base_fd)
    for part in parts:
        try:
            nxt = os.open(part, _O_DIR, dir_fd=fd)
        except OSError:
            nxt = None
        os.close(fd)
        if nxt is None:
            return None
        fd = nxt
    return fd


def _entry(dir_fd: int, name: str) -> Entry | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", 0, os.fsencode(os.readlink(name, dir_fd=dir_fd)))
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", stat.S_IMODE(st.st_mode))
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
        return Entry("other", stat.S_IMODE(st.st_mode), b"%d" % st.st_mtime_ns)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        return Entry("file", stat.S_IMODE(os.fstat(fd).st_mode), fh.read())


def _capture_area(area: Area, out: dict[tuple[str, str], Entry | None], budget: list[int]) -> bool:
    """Record every guarded path of ``area`` (None: absent). False when the budget ran out."""
    try:
        base_fd = os.open(area.base, _O_DIR)
    except OSError:
        return True
    try:
        for rel in (*area.files, *area.trees):
            *parents, name = rel.split("/")
            fd = _open_dir(base_fd, parents)
            entry = None if fd is None else _entry(fd, name)
            out[(area.base, rel)] = entry
            if fd is not None and entry is not None and entry.kind == "dir" and rel in area.trees:
                complete = _capture_tree(fd, name, area.base, rel, out, budget)
                if not complete:
                    return False
            if fd is not None:
                os.close(fd)
    finally:
        os.close(base_fd)
    return True


def _capture_tree(parent_fd: int, name: str, base: str, rel: str, out: dict[tuple[str, str], Entry | None],
                  budget: list[int]) -> bool:
    fd = _open_dir(parent_fd, [name])
    if fd is None:
        return True
    try:
        for child in sorted(os.listdir(fd)):
            budget[0] -= 1
            entry = _entry(fd, child)
            if entry is None:
                continue
            budget[1] -= len(entry.data)
            if budget[0] < 0 or budget[1] < 0:
                return False
            out[(base, f"{rel}/{child}")] = entry
            if entry.kind == "dir" and not _capture_tree(fd, child, base, f"{rel}/{child}", out, budget):
                return False
    finally:
        os.close(fd)
    return True


def _capture(found: list[Area]) -> tuple[dict[tuple[str, str], Entry | None], bool]:
    out: dict[tuple[str, str], Entry | None] = {}
    budget = [MAX_ENTRIES, MAX_BYTES]
    complete = all([_capture_area(area, out, budget) for area in found])
    return out, not complete


def capture(workspace: str) -> Guard:
    """Record the guarded files before a command."""
    return capture_areas(areas(workspace))


def capture_areas(found: list[Area]) -> Guard:
    before, partial = _capture(found)
    return Guard(found, before, partial)


# ---------------------------------------------------------------- judging and undoing


def _git_area_of(guard: Guard, key: tuple[str, str]) -> Area | None:
    base, rel = key
    for area in guard.areas:
        if area.base == base and area.git and (rel in area.files or any(
                rel == t or rel.startswith(t + "/") for t in area.trees)):
            return area
    return None


def _allowed(guard: Guard, key: tuple[str, str], old: Entry | None, new: Entry | None) -> tuple[bool, str]:
    """Whether a change cannot make code run later, and a short note on what was unsafe."""
    area = _git_area_of(guard, key)
    rel = key[1]
    if area is None:
        return False, ""
    name = rel.rsplit("/", 1)[-1]
    in_tree = any(rel.startswith(t + "/") for t in area.trees)
    if in_tree and name.endswith(".sample"):
        return True, ""
    if (in_tree or rel in area.trees) and old is None and new is not None and new.kind == "dir":
        return True, ""                     # a new directory runs nothing; what it holds is judged itself
    if (name in ("config", "config.worktree") and rel in area.files and (old is None or old.kind == "file")
            and (new is None or new.kind == "file")):
        unsafe = unsafe_changes(old.data if old else b"", new.data if new else b"")
        return not unsafe, ", ".join(unsafe[:4]) + (", ..." if len(unsafe) > 4 else "")
    return False, ""


def _ensure_dirs(base_fd: int, parts: list[str]) -> int:
    """Open ``parts`` below ``base_fd`` as real directories, replacing whatever stands in the way."""
    fd = os.dup(base_fd)
    for part in parts:
        try:
            nxt = os.open(part, _O_DIR, dir_fd=fd)
        except OSError:
            _remove(fd, part)
            os.mkdir(part, 0o755, dir_fd=fd)
            nxt = os.open(part, _O_DIR, dir_fd=fd)
        os.close(fd)
        fd = nxt
    return fd


def _remove(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)


def _put(key: tuple[str, str], entry: Entry | None) -> None:
    """Make ``key`` hold ``entry`` again (None: remove it), byte for byte, through no link."""
    base, rel = key
    *parents, name = rel.split("/")
    base_fd = os.open(base, _O_DIR)
    try:
        dir_fd = _ensure_dirs(base_fd, parents) if entry is not None else _open_dir(base_fd, parents)
    finally:
        os.close(base_fd)
    if dir_fd is None:
        return
    try:
        current = _entry(dir_fd, name)
        if entry is None or entry.kind in ("link", "other") or (current is not None and current.kind != entry.kind):
            _remove(dir_fd, name)
        if entry is None or entry.kind == "other":      # a fifo or device is not re-made
            return
        if entry.kind == "dir":
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, entry.mode, dir_fd=dir_fd)
            os.chmod(name, entry.mode, dir_fd=dir_fd, follow_symlinks=False)
        elif entry.kind == "link":
            os.symlink(entry.data, name, dir_fd=dir_fd)
        else:
            # Written beside, then renamed over the name: a hard link made by the command is
            # replaced, not written through.
            temp = f".keel-restore-{os.getpid()}-{name}"
            _remove(dir_fd, temp)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
            with os.fdopen(fd, "wb") as fh:
                fh.write(entry.data)
                os.fchmod(fd, entry.mode)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _display(key: tuple[str, str], workspace: str) -> str:
    path = os.path.join(*key)
    return os.path.relpath(path, workspace) if path.startswith(workspace.rstrip("/") + "/") else path


def _replaced_repository(guard: Guard, ws: str, after: dict[tuple[str, str], Entry | None]) -> list[str]:
    """Keys of a .git directory the command removed or replaced as a whole (not rebuilt here), and
    a link or gitdir: file it put in its place removed."""
    try:
        ws_fd = os.open(ws, _O_DIR)
    except OSError:
        return []
    try:
        now = _entry(ws_fd, ".git")
        was_dir = any(k[0] == ws and k[1].startswith(".git/") and v is not None for k, v in guard.before.items())
        was_file = guard.before.get((ws, ".git")) is not None
        if now is not None and (now.kind == "link" or (now.kind != "dir" and not was_file)):
            _remove(ws_fd, ".git")
            return [".git"]
    finally:
        os.close(ws_fd)
    if was_dir and (now is None or now.kind != "dir"):
        for key in [k for k in guard.before if k[0] == ws and k[1].startswith(".git/")]:
            guard.before[key] = after.get(key)          # nothing to put back into a repository that is gone
    return []


def _ask_area_of(guard: Guard, key: tuple[str, str]) -> Area | None:
    base, rel = key
    for area in guard.areas:
        if area.ask and area.base == base and (rel in area.files or any(
                rel == t or rel.startswith(t + "/") for t in area.trees)):
            return area
    return None


Keep = Callable[[str], bool]
_NOT_APPROVED = "other programs run commands from it; not approved"


def restore(guard: Guard, workspace: str, keep: Keep | None = None, added: list[Area] | None = None) -> list[str]:
    """Put back every guarded change the rules do not allow; what was undone, for the model.

    ``added``: areas that appeared during the command (a repository it made); all they hold is new.
    A change in an ``ask`` area (another program's run-later config) stands only when ``keep``
    (asked once per area, with its path) says yes; such areas go to ``guard.kept``."""
    ws = os.path.realpath(workspace)
    guard.areas += [a for a in added or [] if a not in guard.areas]
    after, _ = _capture(guard.areas)
    undone = _replaced_repository(guard, ws, after)
    todo: list[tuple[tuple[str, str], Entry | None, str]] = []
    asked: dict[Area, list[tuple[tuple[str, str], Entry | None]]] = {}
    for key in set(guard.before) | set(after):
        old, new = guard.before.get(key), after.get(key)
        if old == new or (key not in guard.before and guard.partial):
            continue
        area = _ask_area_of(guard, key)
        if area is not None:
            asked.setdefault(area, []).append((key, old))
            continue
        ok, note = _allowed(guard, key, old, new)
        if not ok:
            todo.append((key, old, note))
    for area, changes in sorted(asked.items(), key=lambda item: (item[0].files, item[0].trees)):
        label = _display((area.base, (*area.files, *area.trees)[0]), ws)
        if keep is not None and keep(label):
            guard.kept.append(label)
        else:
            guard.refused.append(label)
            todo += [(key, old, _NOT_APPROVED) for key, old in changes]
    _apply(todo)
    covered = {key for key, old, _ in todo if old is None}
    for key, _, note in sorted(todo):
        parent = (key[0], key[1].rsplit("/", 1)[0])
        if parent in covered and parent != key:
            continue                                   # said once, for the directory removed
        undone.append(_display(key, ws) + (f" ({note})" if note else ""))
    return undone


def _apply(todo: list[tuple[tuple[str, str], Entry | None, str]]) -> None:
    """Removals deepest first, then what was there before, parents first."""
    for key, _old, _ in sorted((t for t in todo if t[1] is None), key=lambda t: -t[0][1].count("/")):
        with contextlib.suppress(OSError):
            _put(key, None)
    for key, old, _ in sorted((t for t in todo if t[1] is not None), key=lambda t: t[0][1].count("/")):
        with contextlib.suppress(OSError):
            _put(key, old)


def report(undone: list[str]) -> str:
    shown = ", ".join(undone[:8]) + (f" and {len(undone) - 8} more" if len(undone) > 8 else "")
    return (f"[keel undid this command's changes to {shown}: files that other programs run code from later "
            "(git hooks and config, .keel/, editors', hook managers' and agents' settings) are not a command's to "
            "change; a person approves such an edit (edit_file asks)]")
