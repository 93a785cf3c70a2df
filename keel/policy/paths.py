"""The workspace path jail.

Every path a tool touches goes through ``resolve_in_workspace``. It resolves the path the way
the kernel would (every existing symlink followed, ``..`` applied to the resolved directory, at
most 40 link hops) with its own walker instead of ``os.path.realpath``, because realpath gives
up silently on a symlink loop and then returns a path that still contains ``..`` components.
The result is compared with the workspace component by component (never by string prefix:
``/ws-evil`` is not inside ``/ws``), so ``..``, absolute paths, ``~``, symlinks, dangling links
and ``/proc/self/root`` tricks are all judged by where they really lead. Callers must then use
the returned real path for I/O, never the string they were given.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from pathlib import Path


class PathJailError(Exception):
    """A path the tool must not touch; the message is shown to the model as is."""


# The kernel's MAXSYMLINKS: more hops than this fail with ELOOP, so we refuse them too.
MAX_SYMLINK_HOPS = 40

# THE list of secret-looking files (docs/sandbox.md, "Secret files"), shared by the file tools (reading
# one needs approval), the shell policy (a command naming one asks), the bubblewrap tier (hidden from
# commands at any depth) and the gate's snapshots (their text is never kept). Case-insensitive globs
# on the file's name.
SECRET_PATTERNS = (".env", ".env.*", "*.env", ".envrc", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ed25519*",
                   "id_ecdsa*", ".netrc", ".npmrc", ".pypirc", "credentials", "*.p12", "*.pfx", ".git-credentials",
                   ".htpasswd", "*.jks", "*.keystore", "*.kdbx", ".vault-token", "*.tfvars", "*.tfstate", "*.ovpn",
                   ".dockercfg", "client_secret*.json", "service-account*.json", "*.token", ".authinfo*", ".boto",
                   ".s3cfg", "*.secret", "*.secrets", "auth.json", "token.json", "*credentials*", "secrets.*")
# Source code that merely carries the word: read_file credentials.py is ordinary work.
SOURCE_SUFFIXES = ("py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "tsx", "go", "rs", "java", "kt", "rb", "php", "cs",
                   "c", "h", "cc", "cpp", "hpp", "swift", "scala", "ex", "exs", "lua", "sh", "md", "rst", "html", "vue")
# Names that match a secret pattern but are, by convention, committed templates, public keys or code.
NOT_SECRET_PATTERNS = (".env.example", ".env.sample", ".env.template", ".env.dist", "*.pub",
                       *(f"*credentials*.{s}" for s in SOURCE_SUFFIXES), *(f"secrets.{s}" for s in SOURCE_SUFFIXES))
# Directories whose every file holds credentials or keys.
SECRET_DIRS = (".ssh", ".gnupg", ".aws")

# Code points that HFS+ ignores in names, so ".g\u200cit" would open ".git" there (CVE-2014-9390).
_IGNORABLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")


def _is_within(child: Path, parent: Path) -> bool:
    child_parts, parent_parts = child.parts, parent.parts
    return len(child_parts) >= len(parent_parts) and child_parts[: len(parent_parts)] == parent_parts


def _resolve(path: str, shown: str) -> str:
    """The absolute path ``path`` really names: symlinks followed, '.' and '..' applied.

    Components that do not exist are joined lexically: nothing below them can be a link yet,
    and a file created there lands exactly where this function says.
    """
    done = "/"
    pending = [part for part in reversed(path.split("/")) if part not in ("", ".")]
    hops = 0
    while pending:
        name = pending.pop()
        if name == "..":
            done = os.path.dirname(done)
            continue
        candidate = os.path.join(done, name)
        try:
            mode = os.lstat(candidate).st_mode
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            done = candidate  # missing (or unreadable, so not traversable by us either)
            continue
        except UnicodeEncodeError as exc:
            raise PathJailError(f"{shown!r} is not a valid file name (bad unicode: {exc.reason})") from None
        except OSError as exc:
            raise PathJailError(f"{shown!r} cannot be resolved: {exc.strerror}") from None
        if not stat.S_ISLNK(mode):
            done = candidate
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            raise PathJailError(f"{shown!r}: symlink loop (more than {MAX_SYMLINK_HOPS} links to follow)")
        try:
            target = os.readlink(candidate)
        except OSError as exc:
            raise PathJailError(f"{shown!r} cannot be resolved: {exc.strerror}") from None
        if target.startswith("/"):
            done = "/"
        pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
    return done


def is_git_internal_name(name: str) -> bool:
    """True for '.git' and names some filesystem would treat as '.git' (case, HFS+, NTFS tricks)."""
    folded = _IGNORABLE.sub("", name).casefold().rstrip(". ")
    return folded in (".git", "git~1")


def workspace_root(workspace: Path) -> Path:
    """The real absolute path of the workspace itself."""
    return Path(_resolve(os.path.abspath(workspace), str(workspace)))


def resolve_in_workspace(workspace: Path, path: str, *, for_write: bool = False) -> Path:
    """Return the real absolute path of ``path`` (relative to ``workspace``) or raise PathJailError."""
    if not isinstance(path, str) or path.strip() == "":
        raise PathJailError("path must be a non-empty string (use '.' for the workspace root)")
    if "\x00" in path:
        raise PathJailError("path contains a NUL byte")
    if path.startswith("~"):
        raise PathJailError(f"{path!r}: '~' paths point outside the workspace; use a path relative to it")
    root = workspace_root(workspace)
    joined = path if path.startswith("/") else f"{root}/{path}"
    real = Path(_resolve(joined, path))
    if not _is_within(real, root):
        raise PathJailError(f"{path!r} resolves to {real}, which is outside the workspace {root}" + _nearby(real, root))
    if not os.path.lexists(real) and (same := _same_but_case(real, root)) is not None:
        real = Path(_resolve(str(same), path))   # the existing file, judged again: it may be a link
        if not _is_within(real, root):
            raise PathJailError(f"{path!r} resolves to {real}, which is outside the workspace {root}")
    if for_write:
        rel = real.relative_to(root).parts
        if not rel:
            raise PathJailError(f"{path!r} is the workspace directory itself, not a file")
        if any(is_git_internal_name(part) for part in rel):
            raise PathJailError(f"{path!r} is inside .git; writing git internals is refused")
        if path.endswith("/"):
            raise PathJailError(f"{path!r} ends with '/', so it names a directory; give a file path")
    return real


def _nearby(real: Path, root: Path) -> str:
    """For a path outside the workspace whose name is a file at the workspace's top: the path to use.
    Measured on the 1.5B (Exercism sum-of-multiples): it wrote the workspace's absolute path without
    its last folder, was refused three times and the run ended on repetition. The name may differ in
    case or in '-' for '_' when one file matches so (Exercism pythagorean-triplet: the folder's
    hyphenated name with ".py", four times, then the end on repetition at 83 s). Only the workspace's
    top is looked at, so the refusal tells nothing of what lies outside it; a secret-looking name is
    never suggested, and a hidden one only when the path named it exactly."""
    if not real.name:
        return ""
    name = real.name
    if not (root / name).is_file():
        try:
            names = [n for n in os.listdir(root) if _loose(n) == _loose(name)]
        except OSError:
            return ""
        name = names[0] if len(names) == 1 and not names[0].startswith(".") else ""
    inside = root / name
    return f"; the workspace has {name}: use the path {name}" if name and inside.is_file() \
        and not inside.is_symlink() and not is_secret_path(inside) else ""


def _loose(name: str) -> str:
    return name.casefold().replace("-", "_")


def _same_but_case(real: Path, root: Path) -> Path | None:
    """The one existing path that differs from the missing ``real`` only in the case of its names, or None.

    Why: on an exercise whose spec is ``INSTRUCTIONS.md`` a 1.5B model read ``instructions.md``, was told
    "File not found", and then wrote a new ``instructions.md`` instead of changing the module the task
    named. A name matched by more than one entry (``Readme.md`` and ``README.md``) is left missing; from
    the first name that matches nothing (a new file) on, the path is kept as written."""
    current, parts = root, real.relative_to(root).parts
    for i, part in enumerate(parts):
        step = current / part
        if not os.path.lexists(step):
            try:
                matches = [n for n in os.listdir(current) if n.casefold() == part.casefold()]
            except OSError:
                return None
            if len(matches) > 1:
                return None
            if not matches:
                current = current.joinpath(*parts[i:])
                break
            step = current / matches[0]
        current = step
    return current if current != real else None


def _name_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(p) for p in patterns), re.IGNORECASE)


_SECRET_NAME = _name_regex(SECRET_PATTERNS)
_NOT_SECRET_NAME = _name_regex(NOT_SECRET_PATTERNS)


def is_secret_name(path: str) -> bool:
    """``is_secret_path`` for a '/'-separated path string (no Path object: grep checks thousands)."""
    parent, _, name = path.rpartition("/")
    if parent.rpartition("/")[2] in SECRET_DIRS:
        return True
    return _SECRET_NAME.match(name) is not None and _NOT_SECRET_NAME.match(name) is None


def is_secret_path(path: Path) -> bool:
    """True for files that hold credentials or keys (matched case-insensitively, by name)."""
    return is_secret_name(path.as_posix())


def display_path(workspace: Path, path: Path) -> str:
    """The path as the model should see it: relative to the workspace."""
    root = workspace_root(workspace)
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."
