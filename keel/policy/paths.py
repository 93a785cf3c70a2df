"""The workspace path jail.

Every path a tool touches goes through ``resolve_in_workspace``. The check compares real,
fully-resolved paths component by component (never by string prefix: ``/ws-evil`` is not
inside ``/ws``), so ``..``, absolute paths, ``~``, symlinks and ``/proc/self/root`` tricks all
end up judged by where they really point.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path


class PathJailError(Exception):
    """A path the tool must not touch; the message is shown to the model as is."""


# Files whose content is a secret: reading them needs explicit approval.
SECRET_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "id_ecdsa*",
                   ".netrc", ".npmrc", ".pypirc", "credentials", "*.p12", "*.pfx")


def _is_within(child: Path, parent: Path) -> bool:
    child_parts, parent_parts = child.parts, parent.parts
    return len(child_parts) >= len(parent_parts) and child_parts[: len(parent_parts)] == parent_parts


def resolve_in_workspace(workspace: Path, path: str, *, for_write: bool = False) -> Path:
    """Return the real absolute path of ``path`` (relative to ``workspace``) or raise PathJailError."""
    if not isinstance(path, str) or path == "":
        raise PathJailError("path must be a non-empty string")
    if "\x00" in path:
        raise PathJailError("path contains a NUL byte")
    root = Path(os.path.realpath(workspace))
    if path.startswith("~"):
        raise PathJailError(f"{path!r}: '~' paths point outside the workspace; use a path relative to it")
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    # realpath resolves every symlink that exists, including /proc/self/root style links,
    # and normalises '..' after resolution, which is what the kernel would do.
    real = Path(os.path.realpath(candidate))
    if not _is_within(real, root):
        raise PathJailError(f"{path!r} resolves to {real}, which is outside the workspace {root}")
    if for_write:
        rel = real.relative_to(root).parts
        if rel and rel[0] == ".git":
            raise PathJailError(f"{path!r} is inside .git; writing git internals is refused")
    return real


def is_secret_path(path: Path) -> bool:
    return any(fnmatch.fnmatch(path.name, pat) for pat in SECRET_PATTERNS)


def display_path(workspace: Path, path: Path) -> str:
    """The path as the model should see it: relative to the workspace."""
    root = Path(os.path.realpath(workspace))
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."
