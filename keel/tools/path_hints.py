"""What the reply to a path that is missing, or names a directory where a file was wanted, suggests
instead: the close names beside it, or the files the directory holds. The file tools and change_file
end their refusals with these, so a small model's next call can name the right file."""

from __future__ import annotations

import difflib
from pathlib import Path

from keel.context.ignore import IgnoreRules
from keel.policy.paths import (
    PathJailError,
    display_path,
    is_git_internal_name,
    is_secret_path,
    resolve_in_workspace,
    workspace_root,
)
from keel.policy.reads import hides_name
from keel.tools.base import ToolContext, ToolResult


def not_found(ctx: ToolContext, shown: str, real: Path) -> ToolResult:
    """read_file's reply for a missing file: the names beside it that differ only in case, or are close,
    among those the model may see (listed as directory_hint lists them)."""
    parent = real.parent
    if not parent.is_dir():
        return ToolResult.error(f"File not found: {shown} (directory {display_path(ctx.workspace, parent)} "
                                "does not exist either). Use find_files to locate it.")
    siblings = _visible(ctx, parent, files_only=False)
    same = [n for n in siblings if n.casefold() == real.name.casefold()]   # more than one: the jail kept it missing
    close = same or difflib.get_close_matches(real.name, siblings, n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(display_path(ctx.workspace, parent / c) for c in close)}?" if close else ""
    return ToolResult.error(f"File not found: {shown}.{hint} Use find_files or list_dir to locate it.")


def _visible(ctx: ToolContext, directory: Path, files_only: bool) -> list[str]:
    """The names at the top of ``directory`` as list_dir shows them (no link followed, ignored and
    read-denied names left out), less secret-looking ones and git's own; [] when it cannot be listed.
    Listing by path (iterdir) suggested git-ignored and read-denied names the model could not open."""
    try:
        hidden = hides_name(ctx.approval)
        kept, _ = IgnoreRules(ctx.workspace).scan(str(directory))
        return sorted(e.name for e in kept if (e.is_file() or not files_only) and not is_git_internal_name(e.name)
                      and not is_secret_path(Path(e.path)) and not hidden(Path(e.path)))
    except (PathJailError, OSError):   # EscapeError too: the directory became a link
        return []


HINT_FILES = 8   # files a directory hint names


def directory_hint(ctx: ToolContext, path: str) -> str:
    """For ``path`` naming a directory where a file was wanted: the files at its top, as a clause to end a
    refusal with, so the next call can name one ("" when it is no directory, or holds no file the model
    may see). Measured on the 1.5B (Exercism dominoes): it gave the workspace's own path to read_file
    once and to change_file four times, its note naming dominoes.py, and the run ended on the wall clock
    with the file unchanged. The directory is listed as list_dir lists it (no link followed, ignored and
    read-denied names left out), and hidden and secret-looking names are left out too."""
    try:
        real = resolve_in_workspace(ctx.workspace, path)
        inside = real.relative_to(workspace_root(ctx.workspace)).parts
        if not real.is_dir() or any(is_git_internal_name(part) for part in inside):   # git's files are no answer
            return ""
    except (PathJailError, OSError):   # EscapeError too: the directory became a link
        return ""
    names = [n for n in _visible(ctx, real, files_only=True) if not n.startswith(".")]
    if not names:
        return ""
    shown = ", ".join(display_path(ctx.workspace, real / n) for n in names[:HINT_FILES])
    more = f" and {len(names) - HINT_FILES} more" if len(names) > HINT_FILES else ""
    return f"; it holds the files {shown}{more}: give one of them as the path."
