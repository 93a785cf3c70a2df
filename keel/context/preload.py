"""The project's files, put in the first message for a small model.

Why: a 1.5B model's first edit invents ``old_text`` (measured: ``if total_amount >= 50.00:`` for a
file that says ``if cart_cents > threshold_cents:``), and each read_file turn costs a step and a
chance to drift. With the files it needs already in front of it, the model copies real text, as
Aider gives weak models the files "added to the chat". The files shown count as read by this
session (read-before-edit is satisfied, and an overwrite of a file changed since is still caught).

The pure core ranks and picks within a character budget; ``collect`` is the I/O shell. Ranking,
most relevant first: files the task names (path or file name), files whose name stem is a word of
the task (``shipping.py`` for "…shipping is free…", ``test_shipping.py`` too), then files sharing
the most words with the task, then smaller files. Files that do not fit are listed by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.core.request import Request, words

MAX_FILE_BYTES = 16_000        # larger files are listed, never shown whole
MAX_SCANNED_FILES = 400
MAX_LISTED = 40
CHARS_PER_TOKEN = 3.5          # code in Qwen's tokenizer, measured on the eval repos (3.2–3.9)
_SOURCE_SUFFIXES = {".py", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".rb", ".c", ".h",
                    ".cpp", ".hpp", ".cs", ".php", ".sh", ".toml", ".json", ".yaml", ".yml", ".cfg", ".ini",
                    ".md", ".txt", ".html", ".css", ".sql"}


@dataclass(frozen=True)
class FileText:
    path: str           # relative to the workspace, '/'-separated
    text: str | None    # None: binary, too large or unreadable (listed, never shown)
    data: bytes | None = field(default=None, repr=False, compare=False)   # the bytes ``text`` came from


@dataclass(frozen=True)
class Preload:
    shown: list[FileText]
    listed: list[str]      # in the workspace but not shown (did not fit, or too large)
    more: int = 0          # files beyond the listing cap


def _stem_words(path: str) -> set[str]:
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    parts = {p for p in re.split(r"[_\-.]+", stem) if len(p) >= 3} - {"test", "tests", "spec"}
    return parts | {stem}


def rank_key(f: FileText, request: Request) -> tuple[int, int, int, int, str]:
    named = request.names_file(f.path)
    stem_hit = bool(_stem_words(f.path) & request.words)
    overlap = len(words(f.text or "") & request.words)
    return (-int(named), -int(stem_hit), -overlap, len(f.text or ""), f.path)


def choose(request: Request, files: list[FileText], budget_chars: int, more: int = 0) -> Preload:
    """The most relevant files for ``request`` that fit in ``budget_chars`` (pure)."""
    ranked = sorted(files, key=lambda f: rank_key(f, request))
    shown: list[FileText] = []
    listed: list[str] = []
    left = budget_chars
    for f in ranked:
        cost = len(f.text) + len(f.path) + 40 if f.text is not None else None
        if cost is not None and cost <= left:
            shown.append(f)
            left -= cost
        else:
            listed.append(f.path)
    extra = max(0, len(listed) - MAX_LISTED) + more
    return Preload(shown, sorted(listed)[:MAX_LISTED], extra)


def render(preload: Preload) -> str:
    """The message section. Contents are shown as they are (no line numbers): the model copies
    ``old_text`` from here, and a small model copies a number prefix along with the line."""
    if not preload.shown and not preload.listed:
        return ""
    parts = []
    if preload.shown:
        parts.append("The project's files (current content, already read for you; copy old_text from here):")
        for f in preload.shown:
            text = f.text or ""
            body = text if text.endswith("\n") or not text else text + "\n"
            parts.append(f"=== {f.path} ===\n{body}=== end of {f.path} ===")
    if preload.listed:
        more = f" and {preload.more} more" if preload.more else ""
        parts.append("Other files (use read_file to see one): " + ", ".join(preload.listed) + more)
    return "\n".join(parts)


def budget_chars(window_tokens: int, share: float = 0.25) -> int:
    return int(window_tokens * share * CHARS_PER_TOKEN)


def collect(workspace: Path, may_read: Any = None) -> tuple[list[FileText], int]:
    """Text files of the workspace that ignore rules keep, up to MAX_FILE_BYTES each; a file
    ``may_read(real_path)`` refuses (a read rule) comes without its text, secrets not at all.
    Returns the files and how many more were not scanned."""
    from keel.context.ignore import IgnoreRules, read_unless_binary
    from keel.policy.paths import is_secret_path

    root = workspace.resolve()
    found: list[FileText] = []
    skipped = 0
    for entry in IgnoreRules(root).walk_files(str(root), with_stat=True):
        if len(found) >= MAX_SCANNED_FILES:
            skipped += 1
            continue
        real = Path(entry.path)
        rel = real.relative_to(root).as_posix()
        if is_secret_path(real):
            continue
        if may_read is not None and not may_read(real):   # a read rule asks or denies: name it only
            found.append(FileText(rel, None))
            continue
        text: str | None = None
        if real.suffix.lower() in _SOURCE_SUFFIXES or not real.suffix:
            size = entry.stat().st_size
            data = read_unless_binary(entry.path) if size <= MAX_FILE_BYTES else None
            text = data.decode("utf-8", errors="replace") if data is not None else None
            found.append(FileText(rel, text, data))
            continue
        found.append(FileText(rel, None))
    return found, skipped


def preload_section(workspace: Path, request: Request, window_tokens: int, ctx: Any,
                    collected: tuple[list[FileText], int] | None = None, list_others: bool = True) -> tuple[str, Preload]:
    """The first message's file section for ``request``, and what it chose; the files shown are recorded
    as read by the session (``ctx.session``), through the same read rules read_file obeys (``ctx.approval``).
    ``collected``: ``collect``'s answer when the caller has it; ``list_others`` False: the files not shown
    are left for the project overview to name (keel.context.overview)."""
    from keel.policy.reads import shows

    files, more = collected or collect(workspace, shows(ctx.approval))
    chosen = choose(request, files, budget_chars(window_tokens), more)
    root = workspace.resolve()
    for f in chosen.shown:   # the bytes shown, not a second read: an edit is checked against what the model saw
        if f.data is not None:
            ctx.session.record_read(root / f.path, f.data)
    return render(chosen if list_others else Preload(chosen.shown, [], 0)), chosen


def top_level_entries(workspace: Path, cap: int = 40) -> list[str]:
    """The workspace's top level as list_dir would show it (ignored entries left out), capped."""
    from keel.context.ignore import IgnoreRules

    try:
        kept, _ignored = IgnoreRules(workspace).scan(str(workspace))
    except OSError:
        return []
    names = sorted((e.name + "/" if e.is_dir() else e.name) for e in kept)
    names.sort(key=lambda n: not n.endswith("/"))
    return names[:cap] + ([f"… {len(names) - cap} more"] if len(names) > cap else [])
