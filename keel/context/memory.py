"""Project memory: the instruction files a project keeps for coding agents, read once per session.

Discovery (``discover_memory``): a user-level ``AGENTS.md`` in keel's config directory
(``$XDG_CONFIG_HOME/keel``, else ``~/.config/keel``, next to config.toml), then one file per
directory from the repository root (the nearest ``.git`` above the workspace, else the workspace
itself) down to the workspace: ``AGENTS.md``, or where a directory has none, ``CLAUDE.md``, then
``QWEN.md``. The order is general to specific, so the nearest file comes last and reads as the one
that wins.

Rendering (``render_memory``, pure): the files go into the first user message, which is part of
the request prefix every later request repeats byte for byte, so they are read once and never
re-read mid-session (a ``remember`` during the run changes the file, not this session's prefix).
The whole block is capped; the nearest files are kept first, and any cut says so in the text the
model sees, with where to read the rest.

(keel.verify.detect.agents_md reads the workspace's AGENTS.md for check commands: a different
question about the same file, answered there.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MEMORY_FILES = ("AGENTS.md", "CLAUDE.md", "QWEN.md")   # per directory, the first that exists
USER_FILE = "AGENTS.md"
MEMORY_CAP_BYTES = 16_000                             # ~4k tokens for all files together
_READ_LIMIT = 1024 * 1024                             # never read more of one file than this


@dataclass(frozen=True)
class MemoryFile:
    label: str           # how the model sees it: a workspace-relative path, or "~/.config/keel/AGENTS.md"
    text: str
    size: int            # the file's size in bytes (it may be larger than what was read)
    readable: bool       # whether read_file can reach it (inside the workspace)


def config_dir() -> Path:
    """keel's user config directory (where config.toml lives)."""
    from keel.config import user_config_path

    return user_config_path().parent


def repository_root(workspace: Path) -> Path:
    """The nearest directory at or above ``workspace`` holding ``.git`` (a dir, or a worktree's file),
    else the workspace itself."""
    for directory in (workspace, *workspace.parents):
        if (directory / ".git").exists():
            return directory
    return workspace


def memory_dirs(root: Path, workspace: Path) -> list[Path]:
    """``root``, then every directory down to ``workspace`` (root first)."""
    rel = workspace.relative_to(root)
    dirs = [root]
    for part in rel.parts:
        dirs.append(dirs[-1] / part)
    return dirs


def discover_memory(workspace: Path, user_dir: Path | None = None) -> list[MemoryFile]:
    """The memory files for a session in ``workspace``, general first, nearest last."""
    workspace = workspace.resolve()
    found: list[MemoryFile] = []
    seen: set[str] = set()
    user_dir = config_dir() if user_dir is None else user_dir
    home = str(Path.home())
    user_label = str(user_dir / USER_FILE)
    if user_label.startswith(home + os.sep):
        user_label = "~" + user_label[len(home):]
    _add(found, seen, user_dir / USER_FILE, user_label, readable=False)
    for directory in memory_dirs(repository_root(workspace), workspace):
        for name in MEMORY_FILES:
            path = directory / name
            if path.is_file():
                inside = directory == workspace or workspace in directory.parents
                label = str(path.relative_to(workspace)) if inside else str(path)
                _add(found, seen, path, label, readable=inside)
                break
    return found


def _add(found: list[MemoryFile], seen: set[str], path: Path, label: str, *, readable: bool) -> None:
    try:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):     # CLAUDE.md is often a link to AGENTS.md
            return
        with open(real, "rb") as fh:
            data = fh.read(_READ_LIMIT)
        size = os.path.getsize(real)
    except OSError:
        return
    seen.add(real)
    text = data.decode("utf-8", errors="replace").strip()
    if text:
        found.append(MemoryFile(label, text, size, readable))


def render_memory(files: list[MemoryFile], cap: int = MEMORY_CAP_BYTES) -> str:
    """The block for the first user message ('' when there are no files). At most ``cap`` bytes of
    file text in all: the nearest file is kept whole first, then the next one up, and so on."""
    if not files:
        return ""
    room = cap
    shown: dict[int, str] = {}
    for index in range(len(files) - 1, -1, -1):
        f = files[index]
        encoded = f.text.encode()
        if len(encoded) <= room and f.size <= _READ_LIMIT:
            shown[index] = f.text
            room -= len(encoded)
            continue
        kept = _cut(f.text, room)
        room -= len(kept.encode())
        shown[index] = (kept + "\n" if kept else "") + _cut_notice(f, len(kept.encode()), cap)
    parts = ["Project instructions (from the files below; where they disagree, the later, nearer file wins):"]
    for index, f in enumerate(files):
        parts.append(f"=== {f.label} ===\n{shown[index]}")
    return "\n\n".join(parts)


def _cut(text: str, room: int) -> str:
    """The longest head of ``text`` that fits ``room`` bytes, ended at a line break when there is one."""
    if room <= 0:
        return ""
    head = text.encode()[:room].decode("utf-8", errors="ignore")
    newline = head.rfind("\n")
    return head[:newline] if newline > len(head) // 2 else head


def _cut_notice(f: MemoryFile, kept: int, cap: int) -> str:
    where = f"read_file {f.label} for the rest" if f.readable else f"the rest is in {f.label}"
    if kept == 0:
        return (f"[{f.label} ({f.size:,} bytes) left out: project instructions are capped at {cap:,} bytes "
                f"and nearer files came first; {where}]")
    return (f"[{f.label} cut here: {kept:,} of its {f.size:,} bytes shown (project instructions are capped at "
            f"{cap:,} bytes); {where}]")


def memory_cap(window_tokens: int, share: float) -> int:
    """Bytes the files may take: the ``[context.budget] memory`` share of the window (at about four
    bytes a token), at most MEMORY_CAP_BYTES. A small local model's 8k window gets ~1.6 kB, not 16."""
    return min(MEMORY_CAP_BYTES, int(window_tokens * share * 4))


def project_memory(workspace: Path, cap: int = MEMORY_CAP_BYTES, user_dir: Path | None = None) -> str:
    """The rendered memory block for a session in ``workspace`` ('' when ``cap`` is 0: memory off)."""
    if cap <= 0:
        return ""
    return render_memory(discover_memory(workspace, user_dir), cap)
