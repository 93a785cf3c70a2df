"""A file move that change_file is asked for, made by keel, with the requires and imports that named it.

Why: measured on Qwen2.5-Coder-1.5B (js-rename-module: "rename lib/utils.js to lib/strings.js and update
everything that requires it"), the model called change_file(lib/utils.js, "Rename the file to
lib/strings.js …") three times; a move is not a rewrite, so the editor gave the file back unchanged
each time and the run ended on repetition. A small model asks for the move in words; keel can make it.

The pure core reads the move a note or task asks for (``move_asked``: the file named, or "it" / "the
file" in a sentence that names it, then "to" and a path of the same kind) and points one JavaScript
importer's relative specifiers to the new path (``retarget``, through tree-sitter: a path in a comment
or another string stays). A Python module moves through rope (keel.drive.refactor.python_move): every
``import a.b``, ``import a.b as c``, ``from a import b``, relative import and dotted use, computed on a
scratch copy. ``carry_move`` is the shell: it writes the new file and removes the old one through the
session's snapshots (so `keel undo` puts both back), writes each importer through write_file, and lists
the files that still mention the old name. A test the task does not ask to change is listed, never
rewritten (keel.drive.spread's rule).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from keel.core.request import Request, move_phrases
from keel.drive.refactor import RefactorError, js_specifiers, python_move
from keel.drive.rename import hit_lines, python_sources, read_other, word_users, write_other
from keel.policy.beneath import anchor, read_beneath, unlink_beneath
from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.policy.reads import read_refusal, shows
from keel.tools.base import ToolContext, ToolResult, approval_refusal
from keel.tools.files import WRITE_FILE, file_session
from keel.verify.contract import JS_EXTS
from keel.verify.selfcheck import is_test_file

PRONOUNS = {"it", "the file", "this file", "that file", "the module", "this module", "that module"}


# -- the pure core -----------------------------------------------------------------------------------
def move_asked(path: str, note: str, request: Request) -> str | None:
    """The workspace path ``path`` is to be moved to, when the note (or else the request) asks for it
    (the phrases are read by keel.core.request.move_phrases; the request's once, in ``Request.moves``).

    Only a path of the same kind (suffix) as ``path`` counts, and the words before "to" must be the
    file itself (its path or name) or a pronoun: "move the helper to utils.py" asked of app.py is a
    change to app.py, not a move of it. In the task a pronoun counts only in a sentence that names
    the file ("lib/utils.js only has string helpers now, so please rename it to lib/strings.js")."""
    suffix = PurePosixPath(path).suffix
    if not suffix:
        return None
    for phrases, pronoun_ok in ((move_phrases(note), True), (request.moves, False)):
        for m in phrases:
            what = m.what.strip("`'\" ").lower()
            what = re.sub(r"^(?:the\s+)?(?:file|module)\s+", "", what).strip("`'\" ")
            named = what in (path.lower(), PurePosixPath(path).name.lower())
            if not named and what in PRONOUNS:
                named = pronoun_ok or _mentions(m.lead, path)
            new = posixpath.normpath(m.new).lstrip("/")
            if "/" not in m.new.lstrip("./"):
                new = posixpath.normpath(posixpath.join(posixpath.dirname(path), new))
            if named and PurePosixPath(new).suffix == suffix and new != path and not new.startswith(".."):
                return new
    return None


def _mentions(text: str, path: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])|(?<![\w/.-]){re.escape(PurePosixPath(path).name)}"
                     r"(?![\w/-])", text) is not None


def retarget(text: str, importer: str, old: str, new: str) -> str:
    """``text`` (the JavaScript file ``importer``) with its module specifiers that resolve to ``old``
    pointing to ``new`` (workspace paths); the text as it was when it has none. Only real specifiers
    count (tree-sitter: import/export sources, require() and import() arguments), never the same
    path in a comment or another string."""
    if not (old.endswith(JS_EXTS) and importer.endswith(JS_EXTS)):
        return text
    for start, end, spec in reversed(js_specifiers(text)):
        text = text[:start] + _js_spec(spec, importer, old, new) + text[end:]
    return text


def _js_spec(spec: str, importer: str, old: str, new: str) -> str:
    if not spec.startswith(("./", "../")):
        return spec   # a package, not a file of the workspace
    base = posixpath.dirname(importer)
    target = posixpath.normpath(posixpath.join(base, spec))
    if target == old:
        keep_suffix = True
    elif target == posixpath.splitext(old)[0]:
        keep_suffix = False
    else:
        return spec
    rel = posixpath.relpath(new if keep_suffix else posixpath.splitext(new)[0], base or ".")
    return rel if rel.startswith("../") else "./" + rel


# -- the shell ---------------------------------------------------------------------------------------
def carry_move(ctx: ToolContext, old: str, new: str, protected: Callable[[str], bool]) -> ToolResult:
    """Move ``old`` to ``new`` (workspace paths) and point its importers to it; a clear error, with
    nothing changed, when the move cannot be made."""
    try:
        real_old = resolve_in_workspace(ctx.workspace, old, for_write=True)
        real_new = resolve_in_workspace(ctx.workspace, new, for_write=True)
    except PathJailError as e:
        return ToolResult.error(f"Cannot move {old} to {new}: {e}")
    if real_new.exists():
        return ToolResult.error(f"Cannot move {old} to {new}: {new} exists already. Change it with change_file "
                                "if it needs changing, or say why both files stay.")
    if not real_old.is_file():
        return ToolResult.error(f"Cannot move {old}: it is not a file.")
    refusal = approval_refusal(ctx, "edit", old) or approval_refusal(ctx, "edit", new)
    # a move carries the bytes to a name the tools may read freely (.env -> notes.local): it needs
    # what reading the old name needs (keel.policy.reads)
    if refusal is None and not shows(ctx.approval)(real_old):
        refusal = read_refusal(ctx.approval, old, real_old)
    if refusal is not None:
        return ToolResult.error(refusal)
    try:
        data = read_beneath(*anchor(real_old))
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return ToolResult.error(f"Cannot move {old}: {e}")
    python = old.endswith(".py") and new.endswith(".py")
    planned, reads, left = _python_plan(ctx, old, new) if python else ({}, {}, [])
    moved = planned.pop(new, text)   # rope points the module's own relative imports too
    written = WRITE_FILE.execute(WRITE_FILE.spec.args(path=new, content=moved), ctx)
    if not written.ok:
        return written
    session = file_session(ctx)
    try:
        session.snapshot(real_old)   # before the unlink: `keel undo` and the session put it back
        unlink_beneath(*anchor(real_old))
    except OSError as e:
        return ToolResult.error(f"Wrote {new}, but could not remove {old}: {e.strerror or e}. Both exist now.",
                                files_changed=written.files_changed)
    changed: list[str] = []
    for path in sorted(p for p in planned if p != old):
        real, data, _ = reads[path]
        why = "a test, and the task does not ask to change tests" if protected(path) else \
            write_other(ctx, real, path, data, planned[path])
        if why is None:
            changed.append(path)
        else:
            left.append((path, why))
    if not python:   # JavaScript's specifiers, through tree-sitter
        changed, left = _point_importers(ctx, old, new, protected)
    same = "the same bytes" if moved == text else "its own imports pointed to the new place"
    lines = [f"Moved {old} to {new} ({same}; {old} is gone)."]
    if changed:
        lines.append(f"Pointed the imports of {old} to {new} in: {', '.join(changed)}.")
    if left:
        lines.append("Left as they were: " + "; ".join(f"{p} ({why})" for p, why in left) + ".")
    lines.append(_still_mentioned(ctx, old))
    return ToolResult(ok=True, output="\n".join(line for line in lines if line),
                      files_changed=[old, new, *changed], meta={"moved": [old, new]})


def _python_plan(ctx: ToolContext, old: str, new: str
                 ) -> tuple[dict[str, str], dict[str, tuple[Path, bytes, str]], list[tuple[str, str]]]:
    """rope's move of module ``old`` to ``new`` over a copy of the workspace's Python files: the new
    texts of the files it changes (``new`` included), the bytes each was read as, the files left."""
    users = {p for p, _ in word_users(ctx, PurePosixPath(old).stem)}
    files = python_sources(ctx, users)
    if old not in files.texts:
        return {}, files.reads, files.left
    try:
        planned = python_move(files.texts, old, new)
    except RefactorError as e:
        return {}, files.reads, [(p, f"imports not pointed: {e}") for p in sorted(users) if p.endswith(".py")
                                 and p != old]
    return {p: t for p, t in planned.items() if t is not None}, files.reads, files.left


def asked_move(ctx: ToolContext, shown: str, current: str | None, change: str, request: Request,
               checks: Any) -> ToolResult | None:
    """change_file's answer when its note or the request asks to move ``shown``: the move made, or why
    not; None when no move is asked."""
    new = move_asked(shown, change, request)
    if new is None:
        return None
    if current is None:   # asked again after the move: the old file must not come back as a new one
        return ToolResult.error(f"{shown} does not exist" + (f": it was moved to {new}; change {new} instead."
                                                              if _is_file(ctx, new) else "."))
    tests = checks is not None and not request.allows_test_changes
    return carry_move(ctx, shown, new, lambda p: tests and (is_test_file(p) or p in checks.protected))


def _is_file(ctx: ToolContext, path: str) -> bool:
    try:
        return resolve_in_workspace(ctx.workspace, path).is_file()
    except PathJailError:
        return False


def _point_importers(ctx: ToolContext, old: str, new: str,
                     protected: Callable[[str], bool]) -> tuple[list[str], list[tuple[str, str]]]:
    changed: list[str] = []
    left: list[tuple[str, str]] = []
    for path, _ in word_users(ctx, PurePosixPath(old).stem):
        if path == new:
            continue
        read = read_other(ctx, path)
        if isinstance(read, str):
            continue   # unread, it may not import the old file at all
        real, data, text = read
        after = retarget(text, path, old, new)
        if after == text:
            continue
        if protected(path):
            left.append((path, "a test, and the task does not ask to change tests"))
        elif (why := write_other(ctx, real, path, data, after)) is not None:
            left.append((path, why))
        else:
            changed.append(path)
    return changed, left


def _still_mentioned(ctx: ToolContext, old: str) -> str:
    """The lines that still name the old file (a comment, a README, package.json), for the model to judge."""
    stem = PurePosixPath(old).stem
    files = word_users(ctx, stem)
    if not files:
        return f"No file mentions {stem} any more."
    return "\n".join([f"Still mentioning {stem} (change these too if they mean the old file):", *hit_lines(files)])
